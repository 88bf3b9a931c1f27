"""`SegmentPooling`: one vector per graph from the node vectors of a batch of graphs."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from graphfit.core import validation
from graphfit.core.layer import Layer
from graphfit.core.registry import did_you_mean, register_layer
from graphfit.layers import arguments, graph_inputs

__all__ = ["SegmentPooling", "REDUCTIONS"]

REDUCTIONS = ("sum", "mean", "max", "attention")
"""The `reduce` values `SegmentPooling` accepts."""

_NAMES = ("values", "graph_index", "node_counts")
_INPUTS = "[values (N, F), graph_index (N,), node_counts (G,)]"
_INTEGER_HINT = ("Feed them as int32 arrays. A model built from shapes alone (GraphModel("
                 "inputs={name: shape}), model.build) makes every input float: give the input "
                 "names as a list instead, and it builds on the first batch.")


@register_layer
class SegmentPooling(Layer):
    """Pools the node vectors of a batch of graphs into one vector per graph.

    Called on `[values, graph_index, node_counts]`: `values` (N, F) holds the nodes of all
    graphs of the batch, `graph_index` (N,) the graph (0..G-1) of each node as integers, and
    `node_counts` (G,) the node count of each graph. The number of graphs G is the length of
    `node_counts`, taken at run time, so empty graphs (count 0) anywhere in the batch, last
    ones included, keep their row; the node counts of the mean come from `graph_index`. The
    output is (G, F):

    - "sum": the sum of the graph's node vectors;
    - "mean": their mean;
    - "max": their element-wise maximum;
    - "attention": `sum_i a_i * values_i` with `a = softmax(values @ kernel)` taken within
      each graph (never over the whole batch); `attention_weights(inputs)` returns `a`.

    An empty graph gives a row of zeros for every reduction (never -inf or NaN, and finite
    gradients). Nodes whose `graph_index` is outside 0..G-1 are padding: they change no
    result, so a batch can be padded to a fixed size.

    Args:
        reduce: "sum", "mean", "max" or "attention".
        kernel_initializer: with "attention", the initializer of the (F, 1) scoring kernel.
            The score has no bias: a constant added to every score of a graph cancels in
            its softmax.
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: False freezes the attention kernel.

    Raises:
        ValueError: for an unknown `reduce` (with a "did you mean"), or on call, if the
            inputs are not the three tensors above: `values` of rank 2, integer
            `graph_index` and `node_counts` of rank 1, as many indices as values.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> values = tf.constant([[1.0], [2.0], [4.0]])
        >>> graph_index = tf.constant([0, 0, 2])  # graph 1 is empty
        >>> node_counts = tf.constant([2, 0, 1])
        >>> layers.SegmentPooling("mean")([values, graph_index, node_counts]).numpy()
        array([[1.5],
               [0. ],
               [4. ]], dtype=float32)
    """

    # On a CPU, XLA adds compile time and no faster steps here (docs/benchmarks/performance.md).
    xla_friendly_on_cpu = False

    def __init__(self, reduce: str = "sum", kernel_initializer="glorot_uniform",
                 name: str | None = None, dtype=None, trainable: bool = True):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        if not isinstance(reduce, str) or reduce not in REDUCTIONS:
            hint = did_you_mean(str(reduce), REDUCTIONS) if isinstance(reduce, str) else ""
            error = validation.invalid("reduce", reduce, validation.choices_text(REDUCTIONS))
            raise ValueError(f"SegmentPooling: {error}.{hint}")
        self.reduce = reduce
        self.kernel_initializer = arguments.get_initializer(
            kernel_initializer, "kernel_initializer")
        self.kernel = None

    def build(self, input_shape) -> None:
        _check_shapes(self, input_shape)
        if self.reduce == "attention":
            features = input_shape[0][-1]
            self.kernel = self.add_weight("kernel", (features, 1),
                                          initializer=self.kernel_initializer)

    def call(self, inputs, training: bool = False):
        values, segments, num_graphs = self._prepare(inputs)
        if self.reduce == "attention":
            weights = _segment_softmax(self._scores(values), segments, num_graphs + 1)
            values = values * weights[:, None]
        if self.reduce == "max":
            pooled = tf.math.unsorted_segment_max(values, segments, num_graphs + 1)
        else:
            pooled = tf.math.unsorted_segment_sum(values, segments, num_graphs + 1)
        pooled = pooled[:num_graphs]  # the last segment holds the padding nodes
        if self.reduce in ("mean", "max"):
            ones = tf.ones(tf.shape(values)[:1], values.dtype)
            counts = tf.math.unsorted_segment_sum(ones, segments, num_graphs + 1)[:num_graphs]
            if self.reduce == "mean":
                pooled = pooled / tf.maximum(counts, 1.0)[:, None]
            else:  # an empty graph's max is the dtype's lowest value: make it 0
                pooled = tf.where(counts[:, None] > 0, pooled, tf.zeros_like(pooled))
        return pooled

    def attention_weights(self, inputs) -> tf.Tensor:
        """The attention weight (N,) of every node: they sum to 1 within each non-empty
        graph; padding nodes get 0. Only for `reduce="attention"`, once built."""
        if self.reduce != "attention" or self.kernel is None:
            raise ValueError(
                f"SegmentPooling {self.name!r}: attention_weights needs reduce='attention' "
                f"and a built layer (call it on data first); this one has "
                f"reduce={self.reduce!r}{'' if self.built else ' and is not built'}."
            )
        inputs = tf.nest.map_structure(self._convert_input, inputs)
        values, segments, num_graphs = self._prepare(inputs)
        weights = _segment_softmax(self._scores(values), segments, num_graphs + 1)
        return tf.where(segments < num_graphs, weights, tf.zeros_like(weights))

    def _scores(self, values: tf.Tensor) -> tf.Tensor:
        return tf.matmul(values, self.compute_value(self.kernel))[:, 0]

    def _prepare(self, inputs):
        """(values as floats, segment ids with padding nodes moved to segment G, G)."""
        values, graph_index, node_counts = _check_inputs(self, inputs)
        num_graphs = tf.shape(node_counts)[0]
        ids = tf.cast(graph_index, tf.int32)
        real = (ids >= 0) & (ids < num_graphs)
        return values, tf.where(real, ids, num_graphs), num_graphs

    def get_config(self) -> dict[str, Any]:
        return {**self._base_config(), "reduce": self.reduce,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer)}


def _segment_softmax(scores: tf.Tensor, segments: tf.Tensor, num_segments) -> tf.Tensor:
    """softmax(scores) within each segment. Shifting by the segment's maximum keeps exp
    finite; the shift is a constant of the softmax, so its gradient is left out."""
    top = tf.stop_gradient(tf.math.unsorted_segment_max(scores, segments, num_segments))
    exp = tf.exp(scores - tf.gather(top, segments))
    total = tf.math.unsorted_segment_sum(exp, segments, num_segments)
    return exp / tf.gather(total, segments)  # >= 1: the maximum's own term is exp(0)


def _error(layer: Layer, message: str) -> ValueError:
    return graph_inputs.input_error(layer, _INPUTS, message)


def _check_shapes(layer: Layer, shapes) -> None:
    values, graph_index, _ = graph_inputs.checked_shapes(
        layer, _INPUTS, shapes, {"values": 2, "graph_index": 1, "node_counts": 1})
    if not values[:1].is_compatible_with(graph_index[:1]):
        raise _error(layer, f"values has {values[0]} rows but graph_index {graph_index[0]} "
                            f"entries; give one graph index per node.")


def _check_inputs(layer: Layer, inputs):
    """The three inputs, checked; values cast to the layer's dtype."""
    return graph_inputs.checked_inputs(layer, _INPUTS, inputs, _check_shapes, _NAMES,
                                       _INTEGER_HINT)
