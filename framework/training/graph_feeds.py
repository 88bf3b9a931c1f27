"""Graphs as training data: a `GraphSet` (or a dict of per-graph lists) fed in batches of
graphs.

`fit(graphs, labels, batch_size=32)` batches by graph count: every batch holds `batch_size`
graphs (the last one fewer), whatever their node counts, in the graph-batch form
(`graphfit.datasets.graph_set`). The batches are assembled in a `tf.data` pipeline
(`GraphSet.to_dataset`), padded to at most two node/edge capacities so an XLA-compiled step
sees a bounded number of shapes, and read by the compiled loop like any dataset. Index inputs
(`graph_index`, `node_counts`, `senders`, `receivers`) are int32 throughout: never cast to
float, never checked for NaN.
"""

from __future__ import annotations

import numpy as np

from graphfit.datasets.graph_set import GRAPH_KEYS, GraphSet
from graphfit.training import input_checks

__all__ = ["as_graph_set", "graph_batches"]


def _is_per_graph_list(value) -> bool:
    return isinstance(value, (list, tuple)) and all(np.ndim(v) >= 1 for v in value)


def as_graph_set(x, name: str = "x") -> GraphSet | None:
    """`x` as a `GraphSet` when it holds graphs, else None (other data).

    Raises:
        ValueError: for a dict that holds one already assembled batch of graphs (arrays with
            `graph_index`), which cannot be split into batches of graphs.
    """
    if isinstance(x, GraphSet):
        return x
    if not isinstance(x, dict) or "node_features" not in x:
        return None
    if "graph_index" in x or "node_counts" in x:
        keys = ", ".join(k for k in GRAPH_KEYS if k in x)
        raise ValueError(
            f"{name} holds one assembled batch of graphs ({keys}); fit, evaluate and predict "
            f"batch graphs themselves. Give a graphfit.datasets.GraphSet, a dict of per-graph "
            f"lists (node_features, senders, receivers), or a tf.data.Dataset of batches "
            f"(GraphSet.to_dataset).")
    if not _is_per_graph_list(x["node_features"]):
        return None  # a model input that happens to be called node_features: plain arrays
    try:
        return GraphSet.from_dict(x)
    except ValueError as error:
        raise ValueError(f"{name}: {error}") from None


def graph_batches(graphs: GraphSet, y, sample_weight, *, batch_size, shuffle: bool,
                  seed: int, check_finite: bool, names=("x", "y")):
    """The `tf.data.Dataset` of padded graph batches (with labels and weights when given).

    Raises:
        ValueError: for labels or weights without one row per graph, a bad batch size, or
            NaN / infinite features (unless `check_finite` is False).
    """
    count = len(graphs)
    if count == 0:
        raise ValueError(f"{names[0]} holds no graphs: there is nothing to train on.")
    named = {f"{names[0]} node_features": graphs.node_features}
    if graphs.edge_features is not None:
        named[f"{names[0]} edge_features"] = graphs.edge_features
    for label, value in ((names[1], y), ("sample_weight", sample_weight)):
        if value is not None:
            array = np.asarray(value)
            if array.ndim == 0 or len(array) != count:
                raise ValueError(
                    f"{label} must have one row per graph: {names[0]} holds {count} graphs but "
                    f"{label} has shape {array.shape}. Labels of graphs are per graph, not per "
                    f"node.")
            named[label] = array
    if check_finite:
        input_checks.check_finite(named)
    if batch_size is not None and (not isinstance(batch_size, (int, np.integer))
                                   or batch_size < 1):
        raise ValueError(f"batch_size must be a positive integer (graphs per batch), or None "
                         f"for all graphs in one batch. Received: batch_size={batch_size!r}")
    return graphs.to_dataset(count if batch_size is None else int(batch_size), labels=y,
                             sample_weight=sample_weight, shuffle=shuffle, seed=seed)
