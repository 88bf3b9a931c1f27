"""A `GraphSet` as a `tf.data.Dataset` of graph batches, assembled inside the pipeline.

The graphs are held as ragged tensors (nodes and edges per graph); each batch gathers its
graphs' rows, shifts every edge by the offset of its graph's first node in the batch, and
optionally pads nodes and edges to fixed capacities. Integer inputs stay int32 throughout.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from graphfit.core import validation
from graphfit.datasets.pipeline_functions import own_function

__all__ = ["graph_dataset"]


def _ragged(values: np.ndarray, lengths: np.ndarray) -> tf.RaggedTensor:
    return tf.RaggedTensor.from_row_lengths(tf.constant(values), tf.constant(lengths, tf.int64))


def _assembler(graphs, capacities):
    """A function: int64 graph indices -> the batch dict (padded to `capacities` if given)."""
    nodes = _ragged(graphs.node_features, graphs.node_counts)
    senders = _ragged(graphs.senders, graphs.edge_counts)
    receivers = _ragged(graphs.receivers, graphs.edge_counts)
    edge_features = (None if graphs.edge_features is None
                     else _ragged(graphs.edge_features, graphs.edge_counts))

    @own_function
    def assemble(indices):
        picked = tf.gather(nodes, indices)
        counts = tf.cast(picked.row_lengths(), tf.int32)
        offsets = tf.cumsum(counts, exclusive=True)
        batch = {"node_features": picked.flat_values,
                 "graph_index": tf.cast(picked.value_rowids(), tf.int32),
                 "node_counts": counts}
        for key, ragged in (("senders", senders), ("receivers", receivers)):
            edges = tf.gather(ragged, indices)
            batch[key] = edges.flat_values + tf.gather(offsets, edges.value_rowids())
        if edge_features is not None:
            batch["edge_features"] = tf.gather(edge_features, indices).flat_values
        return batch if capacities is None else _pad(batch, capacities)

    return assemble


def _level(n, e, capacities):
    """The first (nodes, edges) capacity that holds n nodes plus a padding node and e edges."""
    nodes, edges = (tf.constant(capacities[-1][0]), tf.constant(capacities[-1][1]))
    for cap_n, cap_e in reversed(capacities[:-1]):
        fits = tf.logical_and(n < cap_n, e <= cap_e)
        nodes, edges = tf.where(fits, cap_n, nodes), tf.where(fits, cap_e, edges)
    return nodes, edges


def _pad(batch: dict, capacities) -> dict:
    """Padding nodes: zero features, graph_index G; padding edges: from and to the first
    padding node (there is always one: the capacities leave room for it)."""
    n = tf.shape(batch["graph_index"])[0]
    e = tf.shape(batch["senders"])[0]
    nodes, edges = _level(n, e, capacities)
    graphs = tf.shape(batch["node_counts"])[0]
    out = dict(batch)
    out["node_features"] = tf.pad(batch["node_features"], [[0, nodes - n], [0, 0]])
    out["graph_index"] = tf.concat([batch["graph_index"], tf.fill([nodes - n], graphs)], 0)
    for key in ("senders", "receivers"):
        out[key] = tf.concat([batch[key], tf.fill([edges - e], n)], 0)
    if "edge_features" in batch:
        out["edge_features"] = tf.pad(batch["edge_features"], [[0, edges - e], [0, 0]])
    return out


def _per_graph(values, name: str, count: int) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim == 0 or len(array) != count:
        raise ValueError(f"{name} must have one row per graph ({count}); received shape "
                         f"{array.shape}.")
    return array.astype(np.float32) if np.issubdtype(array.dtype, np.floating) else array


def graph_dataset(graphs, batch_size: int, labels=None, sample_weight=None,
                  shuffle: bool = False, seed: int = 0, pad: bool = True) -> tf.data.Dataset:
    """See `GraphSet.to_dataset`."""
    batch_size = validation.positive_int("batch_size", batch_size)
    if len(graphs) == 0:
        raise ValueError("the GraphSet holds no graphs: there is nothing to batch.")
    if sample_weight is not None and labels is None:
        raise ValueError("sample_weight needs labels: pass labels too.")
    capacities = graphs.capacities(batch_size) if pad else None
    dataset = tf.data.Dataset.range(len(graphs))
    if shuffle:
        dataset = dataset.shuffle(len(graphs), seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.batch(batch_size)
    assemble = _assembler(graphs, capacities)
    if labels is None:
        return dataset.map(assemble)
    extra = [tf.constant(_per_graph(labels, "labels", len(graphs)))]
    if sample_weight is not None:
        extra.append(tf.constant(_per_graph(sample_weight, "sample_weight", len(graphs)),
                                 tf.float32))
    return dataset.map(own_function(lambda i: (assemble(i), *[tf.gather(t, i) for t in extra])))
