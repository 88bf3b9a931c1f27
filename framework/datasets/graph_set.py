"""`GraphSet`: many small graphs held as flat arrays, batched by graph count.

A graph set stores every graph's nodes one after the other (like a CSR matrix): node features
(all nodes, F), the node count of each graph, the edges as (sender, receiver) pairs of indices
*within their own graph*, the edge count of each graph, and optional edge features. A batch of
G graphs is a dict in the graph-batch form that `layers.SegmentPooling` and `layers.GINConv`
read:

    node_features  float32 (N, F)   the nodes of the batch's graphs, graph after graph
    graph_index    int32 (N,)       the graph (0..G-1) of each node; >= G marks a padding node
    node_counts    int32 (G,)       nodes per graph (0 for an empty graph)
    senders        int32 (E,)       edges as indices into the batch's nodes
    receivers      int32 (E,)
    edge_features  float32 (E, Fe)  only when the set has edge features

Batches can be padded (`pad=True`) to one of two node and edge capacities ("levels"), so XLA
compiles a bounded number of shapes: padding nodes get `graph_index == G` and zero features,
padding edges join padding nodes only, so no result of a layer that follows the form changes.
"""

from __future__ import annotations

import numpy as np

__all__ = ["GraphSet", "GRAPH_KEYS", "INDEX_KEYS", "bucket_size"]

GRAPH_KEYS = ("node_features", "graph_index", "node_counts", "senders", "receivers",
              "edge_features")
# The integer inputs of a batch: never cast to float, never standardized.
INDEX_KEYS = ("graph_index", "node_counts", "senders", "receivers")


def bucket_size(count: int) -> int:
    """The smallest of 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 20, 24, ... (steps of a quarter
    of the power of two below) that holds `count`: at most 25% waste, and splits drawn from
    one distribution usually land in the same bucket.

    Example:

        >>> [bucket_size(n) for n in (7, 9, 17, 641)]
        [7, 10, 20, 768]
    """
    if count <= 8:
        return max(int(count), 1)
    step = 1 << (int(count).bit_length() - 3)
    return -(-int(count) // step) * step


def _int_array(value, name: str) -> np.ndarray:
    array = np.asarray(value)
    if array.size and not np.issubdtype(array.dtype, np.integer):
        if not np.issubdtype(array.dtype, np.number) or np.any(np.mod(array, 1) != 0):
            raise ValueError(f"{name} must hold integer indices; received {array.dtype} "
                             f"values such as {array.flat[0]!r}.")
    return array.astype(np.int32).reshape(-1)


def _as_rows(value) -> np.ndarray:
    """One graph's features as (rows, features): a 1-D array is one feature per row."""
    array = np.asarray(value, np.float32)
    return array[:, None] if array.ndim == 1 else array


def _features(value, name: str, rows: int) -> np.ndarray:
    array = np.asarray(value, dtype=np.float32)
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2 or array.shape[0] != rows:
        raise ValueError(f"{name} must have shape ({rows}, features); received shape "
                         f"{array.shape}.")
    return array


class GraphSet:
    """A set of graphs, batched by graph count for `fit`, `evaluate` and `predict`.

    Args:
        node_features: (total nodes, F) float features of all graphs' nodes, graph after graph.
        node_counts: (graphs,) nodes per graph.
        senders, receivers: (total edges,) edge endpoints, indices within the edge's own graph.
        edge_counts: (graphs,) edges per graph.
        edge_features: optional (total edges, Fe) float features.

    Raises:
        ValueError: when the counts do not add up, or an edge points outside its graph.

    Example:

        >>> import numpy as np
        >>> triangle = dict(nodes=np.ones((3, 1)), senders=[0, 1, 2], receivers=[1, 2, 0])
        >>> pair = dict(nodes=np.ones((2, 1)), senders=[0], receivers=[1])
        >>> graphs = GraphSet.from_lists([g["nodes"] for g in (triangle, pair)],
        ...                              [g["senders"] for g in (triangle, pair)],
        ...                              [g["receivers"] for g in (triangle, pair)])
        >>> batch = graphs.batch([1, 0])
        >>> batch["graph_index"].tolist(), batch["senders"].tolist()
        ([0, 0, 1, 1, 1], [0, 2, 3, 4])
    """

    def __init__(self, node_features, node_counts, senders, receivers, edge_counts,
                 edge_features=None):
        self.node_counts = _int_array(node_counts, "node_counts")
        self.edge_counts = _int_array(edge_counts, "edge_counts")
        if len(self.node_counts) != len(self.edge_counts):
            raise ValueError(f"node_counts has {len(self.node_counts)} graphs but edge_counts "
                             f"has {len(self.edge_counts)}; give one count per graph in each.")
        if (self.node_counts < 0).any() or (self.edge_counts < 0).any():
            raise ValueError("node_counts and edge_counts must not be negative.")
        self.node_features = _features(node_features, "node_features",
                                       int(self.node_counts.sum()))
        edges = int(self.edge_counts.sum())
        self.senders = _int_array(senders, "senders")
        self.receivers = _int_array(receivers, "receivers")
        for name, array in (("senders", self.senders), ("receivers", self.receivers)):
            if len(array) != edges:
                raise ValueError(f"{name} has {len(array)} entries but edge_counts adds up to "
                                 f"{edges}; give one entry per edge.")
        self.edge_features = (None if edge_features is None
                              else _features(edge_features, "edge_features", edges))
        self._check_edges()

    def _check_edges(self) -> None:
        sizes = np.repeat(self.node_counts, self.edge_counts)
        for name, array in (("senders", self.senders), ("receivers", self.receivers)):
            bad = (array < 0) | (array >= sizes)
            if bad.any():
                edge = int(np.argmax(bad))
                graph = int(np.searchsorted(np.cumsum(self.edge_counts), edge, side="right"))
                raise ValueError(f"{name}[{edge}] = {int(array[edge])} points outside graph "
                                 f"{graph}, which has {int(sizes[edge])} nodes; edge indices "
                                 f"count from 0 within their own graph.")

    @classmethod
    def from_lists(cls, node_features, senders, receivers, edge_features=None) -> "GraphSet":
        """A set from per-graph lists: node features (n_i, F) and edge endpoints (e_i,)."""
        if not (len(node_features) == len(senders) == len(receivers)):
            raise ValueError(f"node_features, senders and receivers must list the same graphs; "
                             f"received {len(node_features)}, {len(senders)} and "
                             f"{len(receivers)} entries.")
        nodes = [_as_rows(f) for f in node_features]
        width = {n.shape[1] for n in nodes if len(n)}
        if len(width) > 1:
            raise ValueError(f"every graph's node_features must have the same number of "
                             f"features; received {sorted(width)}.")
        features = (np.concatenate(nodes) if nodes else np.zeros((0, 1), np.float32))
        counts = [len(s) for s in senders]
        if [len(r) for r in receivers] != counts:
            raise ValueError("each graph needs as many receivers as senders.")

        def join(parts):
            return (np.concatenate([np.asarray(p).reshape(-1) for p in parts]) if parts
                    else np.zeros(0, np.int32))

        edge = None if edge_features is None else np.concatenate(
            [_as_rows(f) for f in edge_features])
        return cls(features, [len(n) for n in nodes], join(senders), join(receivers), counts,
                   edge)

    @classmethod
    def from_dict(cls, graphs: dict) -> "GraphSet":
        """A set from a dict of per-graph lists: `node_features`, `senders`, `receivers` and
        optionally `edge_features` (the form `fit` also accepts)."""
        unknown = set(graphs) - {"node_features", "senders", "receivers", "edge_features"}
        missing = {"node_features", "senders", "receivers"} - set(graphs)
        if unknown or missing:
            raise ValueError(f"a dict of per-graph lists needs keys node_features, senders, "
                             f"receivers (and optionally edge_features); missing "
                             f"{sorted(missing)}, unknown {sorted(unknown)}.")
        return cls.from_lists(graphs["node_features"], graphs["senders"], graphs["receivers"],
                              graphs.get("edge_features"))

    # ------------------------------------------------------------------ selection
    def __len__(self) -> int:
        return len(self.node_counts)

    def __repr__(self) -> str:
        return (f"GraphSet({len(self)} graphs, {len(self.node_features)} nodes, "
                f"{len(self.senders)} edges, {self.node_features.shape[1]} node features)")

    def _starts(self):
        return (np.concatenate([[0], np.cumsum(self.node_counts)[:-1]]).astype(np.int64),
                np.concatenate([[0], np.cumsum(self.edge_counts)[:-1]]).astype(np.int64))

    def _rows(self, indices):
        """Node rows and edge rows of the graphs `indices`, in that order."""
        node_start, edge_start = self._starts()
        node_rows = np.concatenate([np.arange(node_start[i], node_start[i] + self.node_counts[i])
                                    for i in indices] or [np.zeros(0, np.int64)])
        edge_rows = np.concatenate([np.arange(edge_start[i], edge_start[i] + self.edge_counts[i])
                                    for i in indices] or [np.zeros(0, np.int64)])
        return node_rows.astype(np.int64), edge_rows.astype(np.int64)

    def __getitem__(self, indices) -> "GraphSet":
        """The graphs at `indices` (an index array, list or slice), as a new set."""
        indices = np.arange(len(self))[indices] if isinstance(indices, slice) else \
            np.asarray(indices, dtype=np.int64).reshape(-1)
        node_rows, edge_rows = self._rows(indices)
        return GraphSet(self.node_features[node_rows], self.node_counts[indices],
                        self.senders[edge_rows], self.receivers[edge_rows],
                        self.edge_counts[indices],
                        None if self.edge_features is None else self.edge_features[edge_rows])

    def with_node_features(self, node_features) -> "GraphSet":
        """The same graphs with other node features (e.g. standardized), one row per node."""
        return GraphSet(node_features, self.node_counts, self.senders, self.receivers,
                        self.edge_counts, self.edge_features)

    _ARRAYS = ("node_features", "node_counts", "senders", "receivers", "edge_counts",
               "edge_features")

    def save_npz(self, path) -> None:
        """Writes the set to an .npz file (its flat arrays), which `load_npz` and
        `graphfit predict --input` read."""
        np.savez(path, **{k: getattr(self, k) for k in self._ARRAYS
                          if getattr(self, k) is not None})

    @classmethod
    def load_npz(cls, path) -> "GraphSet":
        """A set from an .npz file written by `save_npz`.

        Raises:
            ValueError: naming the arrays the file lacks.
        """
        with np.load(path, allow_pickle=False) as data:
            missing = [k for k in cls._ARRAYS[:5] if k not in data.files]
            if missing:
                raise ValueError(f"{path} does not hold graphs: it lacks the arrays "
                                 f"{', '.join(missing)} (write it with GraphSet.save_npz).")
            return cls(*(data[k] if k in data.files else None for k in cls._ARRAYS))

    # ------------------------------------------------------------------ batches
    def batch(self, indices=None, pad_nodes: int | None = None,
              pad_edges: int | None = None) -> dict:
        """The graphs at `indices` (default: all) as one batch dict of numpy arrays.

        Args:
            indices: the graphs, in batch order.
            pad_nodes, pad_edges: pad to this many nodes / edges (padding nodes get
                `graph_index == G` and zero features; padding edges join padding nodes).
        """
        indices = np.arange(len(self)) if indices is None else np.asarray(indices, np.int64)
        node_rows, edge_rows = self._rows(indices)
        counts = self.node_counts[indices]
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int32)
        shift = np.repeat(offsets, self.edge_counts[indices])
        batch = {"node_features": self.node_features[node_rows],
                 "graph_index": np.repeat(np.arange(len(indices), dtype=np.int32), counts),
                 "node_counts": counts.astype(np.int32),
                 "senders": (self.senders[edge_rows] + shift).astype(np.int32),
                 "receivers": (self.receivers[edge_rows] + shift).astype(np.int32)}
        if self.edge_features is not None:
            batch["edge_features"] = self.edge_features[edge_rows]
        if pad_nodes is not None:
            batch = pad_batch(batch, pad_nodes, pad_edges)
        return batch

    def capacities(self, batch_size: int, seed: int = 0) -> list[tuple[int, int]]:
        """Node and edge capacities ("levels") for padding batches of `batch_size` graphs.

        Two levels at most, each rounded up to a bucket (`bucket_size`) and with room for one
        padding node: a typical one (the largest of 64 random batches of this set) and the
        worst case (the `batch_size` largest graphs together), so every batch fits one and XLA
        sees at most two shapes per batch size, while typical batches waste little room.
        """
        size = min(int(batch_size), len(self))
        worst = (bucket_size(int(np.sort(self.node_counts)[::-1][:size].sum()) + 1),
                 bucket_size(max(int(np.sort(self.edge_counts)[::-1][:size].sum()), 1)))
        rng = np.random.default_rng(seed)
        picks = [rng.choice(len(self), size, replace=False) for _ in range(64)]
        typical = (bucket_size(max(int(self.node_counts[p].sum()) for p in picks) + 1),
                   bucket_size(max(max(int(self.edge_counts[p].sum()) for p in picks), 1)))
        return [typical, worst] if typical != worst else [worst]

    def input_spec(self) -> dict:
        """The `tf.TensorSpec`s of a batch (sizes left open), for building a model."""
        import tensorflow as tf

        spec = {"node_features": tf.TensorSpec([None, self.node_features.shape[1]], tf.float32)}
        spec.update({key: tf.TensorSpec([None], tf.int32) for key in INDEX_KEYS})
        if self.edge_features is not None:
            spec["edge_features"] = tf.TensorSpec([None, self.edge_features.shape[1]],
                                                  tf.float32)
        return spec

    def to_dataset(self, batch_size: int = 32, labels=None, sample_weight=None,
                   shuffle: bool = False, seed: int = 0, pad: bool = True):
        """A `tf.data.Dataset` of batches of `batch_size` graphs (the last may hold fewer).

        Args:
            batch_size: graphs per batch.
            labels: optional per-graph labels (one row per graph); then the dataset yields
                (batch, labels).
            sample_weight: optional per-graph weights (needs labels).
            shuffle: a new order of the graphs on every pass, drawn from `seed`.
            seed: the shuffling seed.
            pad: pad every batch to one of this set's capacity levels (`capacities`), so XLA
                sees at most two shapes per batch size.

        Example:

            >>> from graphfit.datasets import make_graph_classes
            >>> graphs, labels = make_graph_classes(10, seed=0)
            >>> batch, y = next(iter(graphs.to_dataset(4, labels)))
            >>> batch["node_counts"].shape.as_list(), y.shape.as_list()
            ([4], [4])
        """
        from graphfit.datasets.graph_dataset import graph_dataset

        return graph_dataset(self, batch_size, labels, sample_weight, shuffle, seed, pad)


def pad_batch(batch: dict, nodes: int, edges: int | None) -> dict:
    """A numpy batch padded to `nodes` nodes and `edges` edges (see `GraphSet.batch`)."""
    n, e = len(batch["graph_index"]), len(batch["senders"])
    edges = e if edges is None else edges
    if nodes < n + (edges > e) or edges < e:
        raise ValueError(f"cannot pad a batch of {n} nodes and {e} edges to {nodes} nodes and "
                         f"{edges} edges (padding edges need a padding node).")
    graphs = len(batch["node_counts"])
    out = dict(batch)
    out["node_features"] = np.concatenate(
        [batch["node_features"], np.zeros((nodes - n, batch["node_features"].shape[1]),
                                          np.float32)])
    out["graph_index"] = np.concatenate([batch["graph_index"],
                                         np.full(nodes - n, graphs, np.int32)])
    for key in ("senders", "receivers"):
        out[key] = np.concatenate([batch[key], np.full(edges - e, n, np.int32)])
    if "edge_features" in batch:
        out["edge_features"] = np.concatenate(
            [batch["edge_features"], np.zeros((edges - e, batch["edge_features"].shape[1]),
                                              np.float32)])
    return out
