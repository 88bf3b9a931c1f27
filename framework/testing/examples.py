"""Small example arguments for every registered layer, model and optimizer (goldens style).

`LAYER_EXAMPLES` maps each registered layer name (models included) to one or more
`LayerExample`s: constructor arguments, sample inputs, the expected output shape and
variable counts, and where one exists a Keras twin as the reference. `OPTIMIZER_EXAMPLES`
does the same for optimizers. The conformance test runs every registered class through its
contract with these arguments and fails for a registered class that has no entry, so a new
layer or optimizer is checked the day it is registered.

Inputs are tiny and built from fixed seeds; constructor arguments and references that hold
objects (a Keras layer to wrap, sublayers of a model) are made fresh for every run.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import keras
import numpy as np

from graphfit import layers, optimizers
from graphfit.core.layer import Layer
from graphfit.models.graph_model import Node
from graphfit.models.input_layer import Input
from graphfit.testing.fit_contract import run_fit_optimizer_test
from graphfit.testing.layer_contract import run_layer_test
from graphfit.testing.optimizer_contract import run_optimizer_test

__all__ = ["LayerExample", "OptimizerExample", "LAYER_EXAMPLES", "OPTIMIZER_EXAMPLES"]


@dataclasses.dataclass(frozen=True)
class LayerExample:
    """Arguments of one `run_layer_test` run (see it for the meaning of each field).

    Attributes:
        init_kwargs: constructor arguments, or a function returning them (when they hold
            objects that one layer may own, such as sublayers or a Keras layer to wrap).
        reference: a function returning the reference: a Keras twin layer, or a callable
            `(layer, input_data) -> expected outputs`; None for no reference.
        label: a short name of the example, for test ids.

    Example:

        >>> import numpy as np
        >>> from graphfit import layers
        >>> example = LayerExample({"units": 2}, np.ones((3, 4), "float32"), (3, 2), 2, 0)
        >>> example.run(layers.Dense).kernel.shape
        TensorShape([4, 2])
    """

    init_kwargs: dict[str, Any] | Callable[[], dict[str, Any]]
    input_data: Any
    expected_output_shape: tuple
    expected_trainable: int
    expected_non_trainable: int
    expected_hooks: int = 0
    run_xla: bool = True
    training_deterministic: bool = True
    reference: Callable[[], Any] | None = None
    atol: float = 1e-6
    rtol: float = 1e-6
    label: str = "default"

    def arguments(self) -> dict[str, Any]:
        """Fresh constructor arguments."""
        kwargs = self.init_kwargs
        return dict(kwargs() if callable(kwargs) else kwargs)

    def run(self, layer_cls: type[Layer]) -> Layer:
        """Runs `run_layer_test` on `layer_cls` with this example; returns the layer."""
        return run_layer_test(
            layer_cls, self.arguments(), self.input_data, self.expected_output_shape,
            self.expected_trainable, self.expected_non_trainable,
            expected_hooks=self.expected_hooks, run_xla=self.run_xla,
            training_deterministic=self.training_deterministic,
            reference=None if self.reference is None else self.reference(),
            atol=self.atol, rtol=self.rtol,
        )


@dataclasses.dataclass(frozen=True)
class OptimizerExample:
    """One optimizer configuration and the contracts it goes through.

    Attributes:
        make_optimizer: returns a new optimizer each call.
        expected_slot_names: its `slot_names`, in order.
        through_minimize: run `run_optimizer_test` (a bare `minimize` on a least-squares
            problem); False for optimizers that need the model's batch (Levenberg–Marquardt).
        through_fit: run `run_fit_optimizer_test` (compile and fit a tiny model).
        fit_xla: whether the fit contract compares with XLA-compiled training.
        label: a short name of the example, for test ids.

    Example:

        >>> from graphfit import optimizers
        >>> OptimizerExample(lambda: optimizers.SGD(0.1), through_fit=False).run()
    """

    make_optimizer: Callable[[], optimizers.Optimizer]
    expected_slot_names: tuple[str, ...] = ()
    through_minimize: bool = True
    through_fit: bool = True
    fit_xla: bool = True
    label: str = "default"

    def run(self) -> None:
        """Runs the contracts this example asks for."""
        if self.through_minimize:
            run_optimizer_test(self.make_optimizer, self.expected_slot_names)
        if self.through_fit:
            run_fit_optimizer_test(self.make_optimizer, run_xla=self.fit_xla)


def _normal(*shape, seed: int = 0, scale: float = 1.0, shift: float = 0.0) -> np.ndarray:
    values = np.random.default_rng(seed).normal(size=shape) * scale + shift
    return values.astype("float32")


def _identity(layer, inputs):
    return inputs


# Shared inputs: a batch of feature vectors, sequences, images, integer ids.
_VECTORS = _normal(4, 3)
_SEQUENCES = _normal(2, 3, 4, scale=3.0, shift=1.0)
_IMAGES = _normal(2, 5, 6, 3)
_STEPS = _normal(2, 6, 3, seed=4)
_VOLUMES = _normal(2, 3, 4, 4, 2, seed=5)
_IDS = np.array([[0, 3, 9, 3], [1, 2, 8, 7], [5, 5, 4, 6]], dtype="int32")
_MERGE_A, _MERGE_B, _MERGE_C = (_normal(2, 3, n, seed=n) for n in (4, 2, 4))
_CURVE_X = np.array([0.5, 1.0, 1.7, 2.5, 3.2], dtype="float32")
_BN_RANDOM = {
    "gamma_initializer": "random_uniform",
    "beta_initializer": "random_normal",
    "moving_mean_initializer": "random_normal",
    "moving_variance_initializer": {"class_name": "RandomUniform",
                                    "config": {"minval": 0.5, "maxval": 2.0}},
}
_FORMULA = "b1*(1-exp(-b2*x)) + sin(pi*x)"


def _conv(name: str, inputs, output_shape, weights: int = 2, label: str = "default",
          **kwargs) -> LayerExample:
    """A convolution layer's example, its Keras twin built from the same arguments."""
    return LayerExample({**kwargs, "bias_initializer": "random_normal"}, inputs, output_shape,
                        weights, 0, reference=lambda: getattr(keras.layers, name)(**kwargs),
                        atol=1e-5, rtol=1e-5, label=label)


def _formula_values(layer, x):
    return (2.0 * (1 - np.exp(-0.5 * x)) + np.sin(np.pi * x))[:, None]


def _sequential_layers() -> dict[str, Any]:
    return {"layers": [layers.Dense(4, activation="tanh", bias_initializer="random_normal"),
                       layers.BatchNormalization(momentum=0.9), layers.Dense(2)]}


def _keras_sequential() -> keras.Sequential:
    return keras.Sequential([keras.layers.Dense(4, activation="tanh"),
                             keras.layers.BatchNormalization(momentum=0.9),
                             keras.layers.Dense(2)])


def _graph_nodes() -> dict[str, Any]:
    # Two inputs joined, a hidden layer, one output: the branches Sequential cannot express.
    return {"inputs": {"a": (3,), "b": (2,)},
            "nodes": [Node(layers.Concatenate(name="joined"), ["a", "b"]),
                      Node(layers.Dense(4, activation="tanh", name="hidden"), "joined"),
                      Node(layers.Dense(1, name="out"), "hidden")],
            "outputs": "out"}


def _keras_graph() -> keras.Model:
    a, b = keras.Input((3,)), keras.Input((2,))
    hidden = keras.layers.Dense(4, activation="tanh")(keras.layers.Concatenate()([a, b]))
    return keras.Model([a, b], keras.layers.Dense(1)(hidden))


def _functional_io() -> dict[str, Any]:
    # The graph above through the functional API, with a layer called twice (shared).
    a, b = Input((3,), name="a"), Input((2,), name="b")
    hidden = layers.Dense(4, activation="tanh", name="hidden")(layers.Concatenate()([a, b]))
    shared = layers.Dense(4, activation="tanh", name="shared")
    return {"inputs": [a, b], "outputs": layers.Dense(1)(shared(shared(hidden)))}


def _keras_functional() -> keras.Model:
    a, b = keras.Input((3,)), keras.Input((2,))
    hidden = keras.layers.Dense(4, activation="tanh")(keras.layers.Concatenate()([a, b]))
    shared = keras.layers.Dense(4, activation="tanh")
    return keras.Model([a, b], keras.layers.Dense(1)(shared(shared(hidden))))


LAYER_EXAMPLES: dict[str, tuple[LayerExample, ...]] = {
    "Activation": (LayerExample({"activation": "softmax"}, _normal(3, 4), (3, 4), 0, 0,
                                reference=lambda: keras.layers.Activation("softmax")),),
    "Add": (LayerExample({}, [_MERGE_A, _MERGE_C, _MERGE_A], (2, 3, 4), 0, 0,
                         reference=keras.layers.Add),),
    "Concatenate": (LayerExample({}, [_MERGE_A, _MERGE_B], (2, 3, 6), 0, 0,
                                 reference=keras.layers.Concatenate),),
    "TensorOperation": (
        LayerExample({"operation": "multiply"}, [_MERGE_A, _MERGE_C], (2, 3, 4), 0, 0,
                     reference=lambda: lambda layer, data: data[0] * data[1],
                     label="two_tensors"),
        LayerExample({"operation": "subtract", "constant": [1.0, 2.0, 3.0, 4.0],
                      "reverse": True}, _MERGE_A, (2, 3, 4), 0, 0,
                     reference=lambda: lambda layer, data: np.array([1.0, 2, 3, 4]) - data,
                     label="constant_on_the_left"),
        LayerExample({"operation": "getitem", "index": [{"slice": [None, None, None]}, 1]},
                     _MERGE_A, (2, 4), 0, 0, reference=lambda: lambda layer, data: data[:, 1],
                     label="getitem"),
    ),
    "AveragePooling2D": (LayerExample({"pool_size": (2, 3)}, _IMAGES, (2, 2, 2, 3), 0, 0,
                                      reference=lambda: keras.layers.AveragePooling2D((2, 3))),),
    "MaxPooling2D": (LayerExample({}, _IMAGES, (2, 2, 3, 3), 0, 0,
                                  reference=keras.layers.MaxPooling2D),),
    "GlobalAveragePooling2D": (LayerExample({}, _IMAGES, (2, 3), 0, 0,
                                            reference=keras.layers.GlobalAveragePooling2D),),
    **{f"{kind}Pooling{rank}D": (LayerExample(
        dict(arguments), inputs, shape, 0, 0,
        reference=lambda kind=kind, rank=rank, arguments=arguments: getattr(
            keras.layers, f"{kind}Pooling{rank}D")(**arguments)),)
       for kind, rank, arguments, inputs, shape in (
           ("Max", 1, {}, _STEPS, (2, 3, 3)),
           ("Average", 1, {"pool_size": 3, "strides": 1, "padding": "same"}, _STEPS, (2, 6, 3)),
           ("Max", 3, {"pool_size": (2, 3, 2), "padding": "same"}, _VOLUMES, (2, 2, 2, 2, 2)),
           ("Average", 3, {"pool_size": 2}, _VOLUMES, (2, 1, 2, 2, 2)),
           ("GlobalMax", 1, {}, _STEPS, (2, 3)),
           ("GlobalMax", 2, {"keepdims": True}, _IMAGES, (2, 1, 1, 3)),
           ("GlobalMax", 3, {}, _VOLUMES, (2, 2)),
           ("GlobalAverage", 1, {}, _STEPS, (2, 3)),
           ("GlobalAverage", 3, {"keepdims": True}, _VOLUMES, (2, 1, 1, 1, 2)))},
    **{f"{kind}{rank}D": (LayerExample(
        dict(arguments), inputs, shape, 0, 0,
        reference=lambda kind=kind, rank=rank, arguments=arguments: getattr(
            keras.layers, f"{kind}{rank}D")(**arguments)),)
       for kind, rank, arguments, inputs, shape in (
           ("ZeroPadding", 1, {"padding": (1, 2)}, _STEPS, (2, 9, 3)),
           ("ZeroPadding", 2, {"padding": ((1, 0), (2, 1))}, _IMAGES, (2, 6, 9, 3)),
           ("ZeroPadding", 3, {}, _VOLUMES, (2, 5, 6, 6, 2)),
           ("Cropping", 1, {"cropping": (1, 2)}, _STEPS, (2, 3, 3)),
           ("Cropping", 2, {"cropping": ((1, 0), (2, 1))}, _IMAGES, (2, 4, 3, 3)),
           ("Cropping", 3, {}, _VOLUMES, (2, 1, 2, 2, 2)),
           ("UpSampling", 1, {"size": 3}, _STEPS, (2, 18, 3)),
           ("UpSampling", 3, {"size": (1, 2, 1)}, _VOLUMES, (2, 3, 8, 4, 2)))},
    "UpSampling2D": tuple(
        LayerExample({"size": (2, 3), "interpolation": interpolation}, _IMAGES,
                     (2, 10, 18, 3), 0, 0, atol=1e-5, label=interpolation,
                     run_xla=interpolation == "nearest",  # supports_jit=False otherwise
                     reference=lambda interpolation=interpolation: keras.layers.UpSampling2D(
                         (2, 3), interpolation=interpolation))
        for interpolation in ("nearest", "bilinear")),
    # Training draws graphfit's own random numbers; inference is the identity, as in Keras.
    **{name: (LayerExample(dict(arguments), inputs, inputs.shape, 0, 0,
                           training_deterministic=False, reference=lambda: _identity),)
       for name, arguments, inputs in (
           ("SpatialDropout1D", {"rate": 0.5, "seed": 1}, _STEPS),
           ("SpatialDropout2D", {"rate": 0.5, "seed": 2}, _IMAGES),
           ("SpatialDropout3D", {"rate": 0.5, "seed": 3}, _VOLUMES),
           ("GaussianNoise", {"stddev": 0.5, "seed": 4}, _VECTORS),
           ("GaussianDropout", {"rate": 0.3, "seed": 5}, _VECTORS))},
    "Rescaling": (LayerExample({"scale": [0.5, -2.0, 3.0], "offset": 1.0}, _IMAGES,
                               (2, 5, 6, 3), 0, 0,
                               reference=lambda: keras.layers.Rescaling([0.5, -2.0, 3.0], 1.0)),),
    # Keras's recurrent and attention layers as graphfit layers (KerasBacked): unrolled LSTM
    # and GRU (graphfit's unroll=None) against Keras's looped ones on the same weights. The
    # non-trainable variable is the Keras layer's dropout seed generator.
    "LSTM": (LayerExample({"units": 3, "bias_initializer": "random_normal"}, _SEQUENCES,
                          (2, 3), 3, 1, reference=lambda: _keras_twin(lambda: keras.layers.LSTM(3)),
                          atol=1e-5,
                          rtol=1e-5),),
    "GRU": (LayerExample({"units": 3, "return_sequences": True}, _SEQUENCES, (2, 3, 3), 3, 1,
                         reference=lambda: _keras_twin(
                             lambda: keras.layers.GRU(3, return_sequences=True)),
                         atol=1e-5, rtol=1e-5),),
    "MultiHeadAttention": (LayerExample({"num_heads": 2, "key_dim": 2}, _SEQUENCES,
                                        (2, 3, 4), 8, 0, reference=lambda: _keras_twin(
                                            lambda: keras.layers.MultiHeadAttention(2, 2), True),
                                        atol=1e-5, rtol=1e-5),),
    "BatchNormalization": (LayerExample(
        {**_BN_RANDOM, "momentum": 0.9}, _normal(8, 3, scale=2.0, shift=3.0), (8, 3), 2, 2,
        expected_hooks=2, reference=lambda: keras.layers.BatchNormalization(momentum=0.9)),),
    "Conv2D": (LayerExample(
        {"filters": 3, "kernel_size": 3, "bias_initializer": "random_normal"},
        _normal(2, 6, 6, 2), (2, 4, 4, 3), 2, 0,
        reference=lambda: keras.layers.Conv2D(3, 3), atol=1e-5, rtol=1e-5),
        _conv("Conv2D", _normal(2, 6, 6, 4), (2, 4, 4, 6), filters=6, kernel_size=3, groups=2,
              label="groups")),
    "Conv1D": (
        _conv("Conv1D", _normal(2, 7, 4), (2, 7, 3), filters=3, kernel_size=3,
              padding="causal", dilation_rate=2, activation="tanh", label="causal"),
        _conv("Conv1D", _normal(2, 7, 4), (2, 6, 4), filters=4, kernel_size=2, groups=2,
              label="groups"),
    ),
    "Conv3D": (_conv("Conv3D", _normal(2, 4, 5, 5, 2), (2, 3, 2, 2, 2), filters=2,
                     kernel_size=2, strides=(1, 2, 2)),),
    "Conv1DTranspose": (_conv("Conv1DTranspose", _normal(2, 5, 4), (2, 12, 3), filters=3,
                              kernel_size=3, strides=2, output_padding=1),),
    "Conv2DTranspose": (_conv("Conv2DTranspose", _IMAGES, (2, 10, 12, 3), filters=3,
                              kernel_size=3, strides=2, padding="same"),),
    "Conv3DTranspose": (_conv("Conv3DTranspose", _normal(2, 2, 3, 3, 2), (2, 4, 6, 6, 2),
                              filters=2, kernel_size=2, strides=2),),
    "DepthwiseConv1D": (_conv("DepthwiseConv1D", _normal(2, 7, 3), (2, 7, 6), kernel_size=3,
                              depth_multiplier=2, padding="same"),),
    "DepthwiseConv2D": (_conv("DepthwiseConv2D", _IMAGES, (2, 3, 4, 6), kernel_size=3,
                              depth_multiplier=2),),
    "SeparableConv1D": (_conv("SeparableConv1D", _normal(2, 7, 3), (2, 3, 4), weights=3,
                              filters=4, kernel_size=3, dilation_rate=2),),
    "SeparableConv2D": (_conv("SeparableConv2D", _IMAGES, (2, 3, 3, 4), weights=3, filters=4,
                              kernel_size=2, strides=2, padding="same"),),
    "Dense": (LayerExample(
        {"units": 5, "activation": "tanh", "bias_initializer": "random_normal"}, _VECTORS,
        (4, 5), 2, 0, reference=lambda: keras.layers.Dense(5, activation="tanh")),),
    "ClassMeans": (LayerExample({"num_classes": 3, "momentum": 0.5}, _VECTORS, (4, 3), 0, 3,
                                expected_hooks=3, reference=lambda: _identity),),  # identity
    "Dropout": (LayerExample({"rate": 0.5, "seed": 3}, _normal(4, 6), (4, 6), 0, 0,
                             training_deterministic=False,
                             reference=lambda: _identity),),  # inference is the identity
    "BlackBox": (
        LayerExample({"function": "numpy:tanh", "output_shape": (3,), "seed": 0}, _VECTORS,
                     (4, 3), 0, 0, run_xla=False, reference=lambda: lambda layer, x: np.tanh(x),
                     label="spsa"),
        LayerExample({"function": "numpy:sin", "output_shape": (3,), "estimator": "central",
                      "vectorized": False}, _VECTORS, (4, 3), 0, 0, run_xla=False,
                     reference=lambda: lambda layer, x: np.sin(x), label="per_example"),
    ),
    "GradientHook": (
        LayerExample({"scale": 0.5}, _VECTORS, (4, 3), 0, 0,
                     reference=lambda: lambda layer, x: x, label="scale"),
        LayerExample({"clip_norm": 1.0}, _VECTORS, (4, 3), 0, 0,
                     reference=lambda: lambda layer, x: x, label="clip_norm"),
    ),
    "Embedding": (LayerExample({"input_dim": 10, "output_dim": 5}, _IDS, (3, 4, 5), 1, 0,
                               reference=lambda: keras.layers.Embedding(10, 5)),),
    "Flatten": (LayerExample({}, _SEQUENCES, (2, 12), 0, 0, reference=keras.layers.Flatten),),
    "Reshape": (LayerExample({"target_shape": (4, 3)}, _SEQUENCES, (2, 4, 3), 0, 0,
                             reference=lambda: keras.layers.Reshape((4, 3))),),
    "Formula": (LayerExample({"expression": _FORMULA, "params": {"b1": 2.0, "b2": 0.5}},
                             _CURVE_X, (5, 1), 2, 0, reference=lambda: _formula_values,
                             atol=1e-5),
                # b1 bounded (its variable holds the unbounded value), b2 fixed
                LayerExample({"expression": _FORMULA, "params": {
                    "b1": {"value": 2.0, "min": 0.0, "max": 5.0}, "b2": {"value": 0.5,
                                                                       "vary": False}}},
                             _CURVE_X, (5, 1), 1, 1, reference=lambda: _formula_values,
                             atol=1e-5, label="bounded_and_fixed")),
    "KerasLayer": (LayerExample(
        lambda: {"layer": keras.layers.Dense(4, activation="tanh")}, _VECTORS, (4, 4), 2, 0,
        reference=lambda: keras.layers.Dense(4, activation="tanh")),),
    "LayerNormalization": (LayerExample(
        {"gamma_initializer": "random_normal", "beta_initializer": "random_normal"},
        _SEQUENCES, (2, 3, 4), 2, 0, reference=keras.layers.LayerNormalization),),
    "Sequential": (LayerExample(_sequential_layers, _normal(6, 3), (6, 2), 6, 2,
                                expected_hooks=2, reference=_keras_sequential, atol=1e-5),),
    "GraphModel": (LayerExample(_graph_nodes, [_normal(5, 3), _normal(5, 2, seed=1)], (5, 1),
                                4, 0, reference=_keras_graph, atol=1e-5),),
    "Functional": (LayerExample(_functional_io, [_normal(5, 3), _normal(5, 2, seed=1)], (5, 1),
                                6, 0, reference=_keras_functional, atol=1e-5),),
    "InputLayer": (LayerExample({"shape": (3,)}, _normal(4, 3), (4, 3), 0, 0,
                                reference=lambda: lambda layer, x: x),),
    # Graphs 0 and 3 empty (first and last), a padding node (index 9 >= G = 4) last.
    "SegmentPooling": tuple(
        LayerExample({"reduce": reduce, "kernel_initializer": "random_normal"},
                     [_normal(6, 3, seed=2), np.array([1, 1, 2, 2, 2, 9], "int32"),
                      np.array([0, 2, 3, 0], "int32")], (4, 3), int(reduce == "attention"), 0,
                     reference=lambda: _segment_pooling_values, atol=1e-5, label=reduce)
        for reduce in ("max", "attention")),
    # A triangle 0-1-2, the edge 3->0 twice, node 4 isolated.
    "GINConv": (LayerExample(
        {"units": 4, "epsilon": 0.3, "train_epsilon": True, "bias_initializer": "random_normal"},
        [_normal(5, 3, seed=3), np.array([0, 1, 1, 2, 2, 0, 3, 3], "int32"),
         np.array([1, 0, 2, 1, 0, 2, 0, 0], "int32")], (5, 4), 5, 0,
        reference=lambda: _gin_values, atol=1e-5),),
}


def _keras_twin(make: Callable[[], keras.layers.Layer], self_attention: bool = False):
    """A reference `(layer, x) -> outputs`: a fresh Keras layer from `make()` given the
    wrapped Keras layer's weights (its seed generators left out), called on x (as (x, x)
    for self-attention)."""

    def reference(layer, x):
        twin = make()
        arguments = (x, x) if self_attention else (x,)
        twin(*arguments)
        twin.set_weights([w.numpy() for w in layer.keras_layer.weights])
        return twin(*arguments)

    return reference


def _segment_pooling_values(layer, inputs):
    """NumPy SegmentPooling: a loop over graphs; empty graphs give zeros."""
    values, graph_index, counts = inputs
    out = np.zeros((len(counts), values.shape[1]), "float32")
    for g in range(len(counts)):
        rows = values[graph_index == g]
        if len(rows) and layer.reduce == "attention":
            scores = np.exp((rows @ layer.kernel.numpy())[:, 0])
            out[g] = (scores / scores.sum()) @ rows
        elif len(rows):
            out[g] = {"sum": np.sum, "mean": np.mean, "max": np.max}[layer.reduce](rows, 0)
    return out


def _gin_values(layer, inputs):
    """NumPy GIN: ((1 + eps) h_i + sum over edges j->i of h_j), then the two relu Denses."""
    nodes, senders, receivers = inputs
    hidden = (1 + layer.epsilon_variable.numpy()) * nodes
    np.add.at(hidden, receivers, nodes[senders])
    for dense in layer.mlp:
        hidden = np.maximum(hidden @ dense.kernel.numpy() + dense.bias.numpy(), 0)
    return hidden

OPTIMIZER_EXAMPLES: dict[str, tuple[OptimizerExample, ...]] = {
    "SGD": (
        OptimizerExample(lambda: optimizers.SGD(learning_rate=0.05), through_fit=False,
                         label="plain"),
        OptimizerExample(lambda: optimizers.SGD(0.02, momentum=0.9, nesterov=True,
                                                weight_decay=0.01, clipnorm=5.0),
                         ("momentum",), label="nesterov"),
    ),
    "Adam": (
        OptimizerExample(lambda: optimizers.Adam(learning_rate=0.05),
                         ("momentum", "velocity"), label="adam"),
        OptimizerExample(lambda: optimizers.Adam(
            learning_rate=keras.optimizers.schedules.ExponentialDecay(0.05, 2, 0.5),
            amsgrad=True, global_clipnorm=1.0),
            ("momentum", "velocity", "velocity_hat"), through_fit=False, label="amsgrad"),
    ),
    "Adafactor": (
        OptimizerExample(lambda: optimizers.Adafactor(learning_rate=0.05), ("r", "c", "velocity"),
                         label="default"),
        OptimizerExample(lambda: optimizers.Adafactor(
            0.5, beta_2_decay=-0.65, epsilon_1=1e-15, epsilon_2=1e-4, clip_threshold=0.9,
            relative_step=False, weight_decay=0.01), ("r", "c", "velocity"), through_fit=False,
            label="tuned"),
    ),
    "Muon": (
        OptimizerExample(lambda: optimizers.Muon(learning_rate=0.05), ("momentum", "velocity"),
                         label="default"),
        OptimizerExample(lambda: optimizers.Muon(
            0.02, nesterov=False, rms_rate=None, ns_steps=3, exclude_layers=["kernel"]),
            ("momentum", "velocity"), through_fit=False, label="all_adamw"),
    ),
    "ScheduleFreeAdamW": (
        OptimizerExample(lambda: optimizers.ScheduleFreeAdamW(learning_rate=0.05),
                         ("momentum", "velocity"), label="default"),
        OptimizerExample(lambda: optimizers.ScheduleFreeAdamW(
            0.1, beta_1=0.8, warmup_steps=3, weight_decay=0.01), ("momentum", "velocity"),
            through_fit=False, label="warmup"),
    ),
    # Keras's other update rules (optimizers/<name>.py), each with non-default arguments.
    "AdamW": (OptimizerExample(lambda: optimizers.AdamW(0.05, weight_decay=0.1, amsgrad=True),
                               ("momentum", "velocity", "velocity_hat"), label="amsgrad"),),
    "RMSprop": (
        OptimizerExample(lambda: optimizers.RMSprop(0.01), ("velocity",), through_fit=False,
                         label="plain"),
        OptimizerExample(lambda: optimizers.RMSprop(0.01, momentum=0.9, centered=True),
                         ("velocity", "momentum", "average_gradient"), label="centered"),
    ),
    "Adagrad": (OptimizerExample(lambda: optimizers.Adagrad(0.1, initial_accumulator_value=0.3),
                                 ("accumulator",)),),
    "Adadelta": (OptimizerExample(lambda: optimizers.Adadelta(1.0, rho=0.8, epsilon=1e-4),
                                  ("accumulated_grad", "accumulated_delta_var")),),
    "Adamax": (OptimizerExample(lambda: optimizers.Adamax(0.05, weight_decay=0.01),
                                ("momentum", "norm")),),
    # Nadam also keeps one optimizer-level variable, u_product, after the slots.
    "Nadam": (OptimizerExample(lambda: optimizers.Nadam(0.05), ("momentum", "velocity")),),
    # FTRL sets each weight from its accumulated linear term: a small rate first jumps away.
    "Ftrl": (OptimizerExample(lambda: optimizers.Ftrl(
        1.0, initial_accumulator_value=1.0, l1_regularization_strength=0.001,
        l2_regularization_strength=0.01, l2_shrinkage_regularization_strength=0.01, beta=0.1),
        ("accumulator", "linear")),),
    "Lion": (OptimizerExample(lambda: optimizers.Lion(0.01, weight_decay=0.1), ("momentum",)),),
    "Lamb": (OptimizerExample(lambda: optimizers.Lamb(0.05), ("momentum", "velocity")),),
    # LM linearizes the model's residuals, so only a model-level fit can drive it. XLA is
    # left out: its trial loop takes seconds to compile on a CPU, for no extra coverage here.
    "LevenbergMarquardt": (
        OptimizerExample(optimizers.LevenbergMarquardt, through_minimize=False, fit_xla=False,
                         label="marquardt"),
    ),
    # Loss scaling: the inner optimizer's update on gradient / scale, the scale growing. Fit
    # only: the minimize contract wants `variables` to be iterations, rate and slots alone,
    # and the scale and its counter come after them (tests/optimizers/test_loss_scale.py).
    "LossScaleOptimizer": (
        OptimizerExample(lambda: optimizers.LossScaleOptimizer(
            optimizers.SGD(0.02, momentum=0.9), initial_scale=2.0**8, dynamic_growth_steps=2),
            ("momentum",), through_minimize=False, label="sgd_momentum"),
    ),
    # Each variable to its optimizer: the kernels to Adam, the rest to SGD with momentum. Fit
    # only, as LossScaleOptimizer: its `variables` are its iterations, then each inner
    # optimizer's (tests/keras_parity/test_multi_optimizer.py).
    "MultiOptimizer": (
        OptimizerExample(lambda: optimizers.MultiOptimizer(optimizers.OptimizerMap(
            optimizers.SGD(0.02, momentum=0.9), {".*kernel": optimizers.Adam(0.01)})),
            through_minimize=False, label="adam_kernels_sgd_rest"),
    ),
}
