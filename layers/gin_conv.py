"""`GINConv`: the message-passing layer of Graph Isomorphism Networks (Xu et al., 2019)."""

from __future__ import annotations

from typing import Any

import keras
import tensorflow as tf

from graphfit.core import validation
from graphfit.core.layer import Layer
from graphfit.core.registry import register_layer
from graphfit.layers import arguments, graph_inputs
from graphfit.layers.dense import Dense

__all__ = ["GINConv"]

_NAMES = ("node_features", "senders", "receivers")
_INPUTS = "[node_features (N, F), senders (E,), receivers (E,)]"
_INTEGER_HINT = ("Feed them as int32 arrays. A model built from shapes alone (GraphModel("
                 "inputs={name: shape}), model.build) makes every input float: give the input "
                 "names as a list instead, and it builds on the first batch.")


@register_layer
class GINConv(Layer):
    """A GIN layer: `h_i' = MLP((1 + epsilon) * h_i + sum over edges j->i of h_j)`.

    Called on `[node_features, senders, receivers]`: `node_features` (N, F) holds the nodes
    of a batch of graphs, and edge k sends node `senders[k]`'s features to node
    `receivers[k]` (integers indexing the batch's nodes; list both directions for an
    undirected graph). Every edge counts, so a repeated edge sends its message twice, and a
    node without incoming edges keeps `(1 + epsilon) * h_i`. The MLP is two `Dense` layers
    of `units` with `activation`, named `<name>_mlp_1` and `<name>_mlp_2`. The output is
    (N, units). Padding nodes and edges (edges between padding nodes only) never reach the
    real nodes.

    Args:
        units: the size of both Dense layers of the MLP, so of the output; a positive int.
        activation: the activation of both Dense layers (a Keras name or callable; None is
            the identity).
        epsilon: the weight of a node's own features, `1 + epsilon`; a finite number.
        train_epsilon: whether epsilon is a trainable variable (initialized to `epsilon`,
            named `epsilon`) rather than a constant.
        kernel_initializer: initializer of both Dense kernels.
        bias_initializer: initializer of both Dense biases.
        kernel_regularizer, bias_regularizer, kernel_constraint, bias_constraint: Keras
            regularizers and constraints of both Dense kernels and biases (as `Dense`'s).
        activity_regularizer: a Keras regularizer of the layer's output.
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: False freezes the layer.

    Raises:
        ValueError: if an argument is invalid, or on call, if the inputs are not the three
            tensors above: `node_features` of rank 2 and integer `senders` and
            `receivers` of rank 1 and the same length.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import layers
        >>> gin = layers.GINConv(8)
        >>> nodes = tf.ones((3, 4))  # a path 0 - 1 - 2, both directions listed
        >>> senders, receivers = tf.constant([0, 1, 1, 2]), tf.constant([1, 0, 2, 1])
        >>> gin([nodes, senders, receivers]).shape
        TensorShape([3, 8])
        >>> gin.aggregate([nodes, senders, receivers]).numpy()[:, 0]  # (1 + 0) * 1 + degree
        array([2., 3., 2.], dtype=float32)
    """

    # XLA compiles for each graph batch's shapes (docs/benchmarks/performance.md)
    xla_friendly_on_cpu = False

    def __init__(self, units: int, activation="relu", epsilon: float = 0.0,
                 train_epsilon: bool = False, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
                 name: str | None = None, dtype=None, trainable: bool = True):
        super().__init__(name=name, dtype=dtype, trainable=trainable,
                         activity_regularizer=activity_regularizer)
        self._weight_options = arguments.set_weight_options(
            self, kernel_regularizer=kernel_regularizer, bias_regularizer=bias_regularizer,
            kernel_constraint=kernel_constraint, bias_constraint=bias_constraint)
        self.units = validation.positive_int("units", units)
        self.activation = arguments.get_activation(activation)
        self.epsilon = validation.finite_number("epsilon", epsilon)
        if not isinstance(train_epsilon, bool):
            raise validation.invalid("train_epsilon", train_epsilon, "True or False")
        self.train_epsilon = train_epsilon
        self.kernel_initializer = arguments.get_initializer(
            kernel_initializer, "kernel_initializer")
        self.bias_initializer = arguments.get_initializer(bias_initializer, "bias_initializer")
        # From the configs, so each Dense gets its own initializer: a Keras initializer
        # without a seed draws one when made and repeats its values for equal shapes.
        self.mlp = [Dense(units, activation=self.activation, name=f"{self.name}_mlp_{i}",
                          kernel_initializer=keras.initializers.serialize(
                              self.kernel_initializer),
                          bias_initializer=keras.initializers.serialize(self.bias_initializer),
                          **self._mlp_weight_options())
                    for i in (1, 2)]
        self.epsilon_variable = None

    def _mlp_weight_options(self) -> dict:
        """Each Dense of the MLP gets its own copy (from the config) of the regularizers and
        constraints, which then apply to both kernels and both biases."""
        options = arguments.weight_options_config(self, self._weight_options)
        del options["activity_regularizer"]  # of the GIN layer's output, not the MLP's
        return options

    def build(self, input_shape) -> None:
        _check_shapes(self, input_shape)
        if input_shape[0][-1] is None:
            raise _error(self, f"node_features has shape {tuple(input_shape[0].as_list())}; "
                               f"its feature size (last axis) must be known.")
        if self.train_epsilon:
            self.epsilon_variable = self.add_weight(
                "epsilon", (), initializer=keras.initializers.Constant(self.epsilon))
        # The MLP builds here too, so that build(input_shape) by hand makes every variable.
        self.mlp[0].build((None, input_shape[0][-1]))
        self.mlp[1].build((None, self.units))

    def call(self, inputs, training: bool = False):
        hidden = self.aggregate(inputs)
        for dense in self.mlp:
            hidden = dense(hidden, training=training)
        return hidden

    def aggregate(self, inputs) -> tf.Tensor:
        """The MLP's input, `(1 + epsilon) * h_i + sum over edges j->i of h_j`, (N, F)."""
        inputs = tf.nest.map_structure(self._convert_input, inputs)
        nodes, senders, receivers = _check_inputs(self, inputs)
        messages = tf.gather(nodes, senders)
        incoming = tf.math.unsorted_segment_sum(messages, receivers, tf.shape(nodes)[0])
        epsilon = self.epsilon if self.epsilon_variable is None else self.epsilon_variable
        return (1.0 + tf.cast(epsilon, nodes.dtype)) * nodes + incoming

    def batch_checks(self, inputs, training: bool) -> list:
        """Every sender and receiver indexes one of the batch's nodes."""
        del training
        nodes, senders, receivers = _check_inputs(self, inputs)
        count = tf.cast(tf.shape(nodes)[0], tf.int64)
        checks = []
        for name, ids in (("senders", senders), ("receivers", receivers)):
            ids = tf.cast(ids, tf.int64)
            checks.append((tf.reduce_all((ids >= 0) & (ids < count)), (
                f"GINConv {self.name!r}: {name} must index the batch's nodes, 0 to the node "
                f"count - 1; an edge names a node outside. Build the batch with GraphSet, or "
                f"offset each graph's node ids by the nodes of the graphs before it.")))
        return checks

    def get_config(self) -> dict[str, Any]:
        return {
            **self._base_config(),
            "units": self.units,
            "activation": keras.activations.serialize(self.activation),
            "epsilon": self.epsilon,
            "train_epsilon": self.train_epsilon,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            **arguments.weight_options_config(self, self._weight_options),
        }


def _error(layer: Layer, message: str) -> ValueError:
    return graph_inputs.input_error(layer, _INPUTS, message)


def _check_shapes(layer: Layer, shapes) -> None:
    _, senders, receivers = graph_inputs.checked_shapes(
        layer, _INPUTS, shapes, {"node_features": 2, "senders": 1, "receivers": 1})
    if not senders.is_compatible_with(receivers):
        raise _error(layer, f"senders has {senders[0]} entries but receivers "
                            f"{receivers[0]}; give one sender and one receiver per edge.")


def _check_inputs(layer: Layer, inputs):
    """The three inputs, checked; node features cast to the layer's dtype."""
    return graph_inputs.checked_inputs(layer, _INPUTS, inputs, _check_shapes, _NAMES,
                                       _INTEGER_HINT)
