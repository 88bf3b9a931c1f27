"""Synthetic graph classification (like DGL's MiniGC): which structure is this graph?

Every graph is one of eight structural classes, drawn with 10-30 nodes (by default):

    0 cycle            a ring: every node has degree 2
    1 path             a line: two ends of degree 1, the rest degree 2
    2 star             one centre joined to every other node
    3 wheel            a cycle plus a hub joined to every rim node
    4 complete         every pair of nodes joined
    5 grid             an r x c lattice with r, c >= 3
    6 circular_ladder  two cycles of equal length joined rung by rung (a prism, degree 3)
    7 lollipop         a complete graph of 3..n/2 nodes with a path hanging from one node

Node features are a constant 1 by default (`features="constant"`): the class is then in the
structure alone, which a message-passing network must find (a model that only pools the node
features sees the node count, which every class shares). `features="degree"` gives each node
its degree instead, which makes several classes separable by pooling alone (an easier task).
`features="one_hot_degree"` gives the degree one-hot (`max_degree + 1` columns: degree 0, 1,
..., and a last column for `max_degree` or more), as GIN (Xu et al., 2019) and PyG's
`OneHotDegree` feed featureless graphs: a network then tells degree 1 from 2 as easily as 2
from 20 (a scalar degree, even standardized, squeezes together the low degrees that tell
paths, cycles and grids apart). The last column is shared so that a degree rarely seen in
training (a hub, a large complete graph) still lands on trained weights.
Node order is a random permutation per graph, so positions carry no hint either. Edges are
undirected, listed in both directions. Everything is drawn from `np.random.default_rng(seed)`.

Example:

    >>> graphs, labels = make_graph_classes(16, seed=0)
    >>> len(graphs), labels[:8].tolist(), GRAPH_CLASSES[labels[2]]
    (16, [0, 1, 2, 3, 4, 5, 6, 7], 'star')
"""

from __future__ import annotations

import numpy as np

from graphfit.core import validation
from graphfit.datasets.graph_set import GraphSet

__all__ = ["make_graph_classes", "GRAPH_CLASSES", "NODE_FEATURE_KINDS"]

GRAPH_CLASSES = ("cycle", "path", "star", "wheel", "complete", "grid", "circular_ladder",
                 "lollipop")
NODE_FEATURE_KINDS = ("constant", "degree", "one_hot_degree")  # the node features on offer


def _cycle(n: int) -> list[tuple[int, int]]:
    return [(i, (i + 1) % n) for i in range(n)]


def _path(n: int) -> list[tuple[int, int]]:
    return [(i, i + 1) for i in range(n - 1)]


def _grid(rows: int, cols: int) -> list[tuple[int, int]]:
    edges = [(r * cols + c, r * cols + c + 1) for r in range(rows) for c in range(cols - 1)]
    return edges + [(r * cols + c, (r + 1) * cols + c) for r in range(rows - 1)
                    for c in range(cols)]


def _complete(n: int) -> list[tuple[int, int]]:
    return [(i, j) for i in range(n) for j in range(i + 1, n)]


def _structure(label: int, n: int, rng: np.random.Generator, low: int, high: int):
    """(node count, undirected edges) of one graph of class `label` with about `n` nodes."""
    name = GRAPH_CLASSES[label]
    if name == "cycle":
        return n, _cycle(n)
    if name == "path":
        return n, _path(n)
    if name == "star":
        return n, [(0, i) for i in range(1, n)]
    if name == "wheel":
        return n, [(i + 1, (i + 1) % (n - 1) + 1) for i in range(n - 1)] + \
            [(0, i) for i in range(1, n)]
    if name == "complete":
        return n, _complete(n)
    if name == "grid":
        shapes = [(r, c) for r in range(3, high + 1) for c in range(r, high + 1)
                  if low <= r * c <= high] or [(3, 3)]  # no r x c in range: the smallest
        rows, cols = shapes[rng.integers(len(shapes))]
        return rows * cols, _grid(rows, cols)
    if name == "circular_ladder":
        half = n // 2 if 2 * (n // 2) >= low else (n + 1) // 2
        rungs = [(i, i + half) for i in range(half)]
        ring = _cycle(half)
        return 2 * half, ring + [(a + half, b + half) for a, b in ring] + rungs
    clique = int(rng.integers(3, max(3, n // 2) + 1))
    tail = [(clique - 1 + i, clique + i) for i in range(n - clique)]
    return n, _complete(clique) + tail


def _node_features(receivers: np.ndarray, count: int, features: str, max_degree: int):
    """(count, F) node features: constant, degree, or one-hot degree (max_degree + 1 columns,
    the last one for every degree from max_degree up)."""
    degree = np.bincount(receivers, minlength=count)
    if features == "degree":
        return degree.astype(np.float32)[:, None]
    if features == "one_hot_degree":
        return np.eye(max_degree + 1, dtype=np.float32)[np.minimum(degree, max_degree)]
    return np.ones((count, 1), np.float32)


def _graph(label, n, rng, low, high, features: str, max_degree: int):
    count, edges = _structure(label, n, rng, low, high)
    order = rng.permutation(count)  # node positions carry no hint of the structure
    pairs = np.asarray(edges, np.int32).reshape(-1, 2)
    pairs = order[pairs]
    senders = np.concatenate([pairs[:, 0], pairs[:, 1]]).astype(np.int32)
    receivers = np.concatenate([pairs[:, 1], pairs[:, 0]]).astype(np.int32)
    return _node_features(receivers, count, features, max_degree), senders, receivers


def make_graph_classes(n_graphs: int = 800, seed: int | None = 0, min_nodes: int = 10,
                       max_nodes: int = 30, features: str = "constant", max_degree: int = 8):
    """Graphs of eight structural classes (`GRAPH_CLASSES`), as a `GraphSet` and labels.

    Class k gets graphs k, k + 8, k + 16, ... (balanced); each graph's node count is drawn
    uniformly from [min_nodes, max_nodes] (a grid takes the nearest r x c, a circular ladder
    an even count).

    Args:
        n_graphs: how many graphs.
        seed: seed of `np.random.default_rng` (None: fresh randomness).
        min_nodes, max_nodes: the range of node counts (min_nodes >= 9, so every class fits).
        features: "constant" (one feature, 1 on every node), "degree" (the node's degree)
            or "one_hot_degree" (`max_degree + 1` columns, a 1 in the column of the degree).
        max_degree: with "one_hot_degree", the degree from which on nodes share the last
            column.

    Returns:
        (graphs, labels): a `GraphSet` and int32 labels of shape (n_graphs,).

    Raises:
        ValueError: for a bad count, range, features name or max_degree.

    Example:

        >>> graphs, labels = make_graph_classes(8, seed=1, features="degree")
        >>> graphs.node_features.shape[1], sorted(set(labels.tolist())) == list(range(8))
        (1, True)
    """
    n_graphs = validation.positive_int("n_graphs", n_graphs)
    min_nodes = validation.positive_int("min_nodes", min_nodes)
    max_nodes = validation.positive_int("max_nodes", max_nodes)
    if min_nodes < 9 or max_nodes < min_nodes:
        raise ValueError(f"min_nodes must be at least 9 (a 3 x 3 grid) and max_nodes at least "
                         f"min_nodes. Received: min_nodes={min_nodes}, max_nodes={max_nodes}")
    if features not in NODE_FEATURE_KINDS:
        raise ValueError(f"features must be one of {', '.join(map(repr, NODE_FEATURE_KINDS))}. "
                         f"Received: features={features!r}")
    max_degree = validation.positive_int("max_degree", max_degree)
    rng = np.random.default_rng(seed)
    labels = (np.arange(n_graphs) % len(GRAPH_CLASSES)).astype(np.int32)
    parts = [_graph(int(label), int(rng.integers(min_nodes, max_nodes + 1)), rng, min_nodes,
                    max_nodes, features, max_degree) for label in labels]
    values, senders, receivers = zip(*parts)
    return GraphSet.from_lists(list(values), list(senders), list(receivers)), labels
