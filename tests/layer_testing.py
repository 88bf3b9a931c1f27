"""`run_layer_test`: the one shared contract test that every layer test runs.

A layer test calls `run_layer_test(...)` with the layer's class, constructor arguments and
sample inputs, then adds the checks particular to the layer (numbers against Keras,
hand-computed values, error messages) on the layer it returns.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Callable

import keras
import numpy as np
import pytest
import tensorflow as tf

from graphfit.core import update_hooks
from graphfit.core.layer import Layer
from graphfit.core.registry import LAYERS

__all__ = ["run_layer_test", "to_inputs", "copy_weights_to_keras"]


def to_inputs(input_data) -> tf.Tensor | list[tf.Tensor]:
    """A NumPy array (or a list of them) as a tensor (or a list of tensors)."""
    if isinstance(input_data, (list, tuple)):
        return [tf.convert_to_tensor(x) for x in input_data]
    return tf.convert_to_tensor(input_data)


def copy_weights_to_keras(layer: Layer, keras_layer: keras.layers.Layer, inputs) -> None:
    """Builds `keras_layer` on `inputs` and gives it `layer`'s weights, by position."""
    if not keras_layer.built:
        keras_layer(inputs)
    assert len(keras_layer.weights) == len(layer.variables), (
        f"the Keras twin has {len(keras_layer.weights)} weights, "
        f"{type(layer).__name__} has {len(layer.variables)} variables"
    )
    keras_layer.set_weights([v.numpy() for v in layer.variables])


def assert_gradients_match_keras(layer: Layer, twin: keras.layers.Layer, x, *, rtol=1e-6,
                                 atol=1e-6, seed: int = 1) -> None:
    """Gradients of a fixed random projection of the outputs, with respect to the inputs and
    the trainable weights, equal those of the Keras twin (weights copied in first)."""
    xs = tf.convert_to_tensor(x)
    layer(xs)
    copy_weights_to_keras(layer, twin, xs)
    projection = tf.constant(
        np.random.default_rng(seed).normal(size=layer(xs).shape).astype(xs.dtype.as_numpy_dtype)
    )
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(xs)
        ours = tf.reduce_sum(layer(xs) * projection)
        theirs = tf.reduce_sum(twin(xs) * projection)
    for a, b in zip(
        tape.gradient(ours, [xs, *layer.trainable_variables]),
        tape.gradient(theirs, [xs, *(w.value for w in twin.trainable_weights)]),
    ):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=rtol, atol=atol)


def run_layer_test(
    layer_cls: type[Layer],
    init_kwargs: dict[str, Any],
    input_data,
    expected_output_shape: tuple,
    expected_trainable: int,
    expected_non_trainable: int,
    expected_hooks: int = 0,
    run_xla: bool = True,
    training_deterministic: bool = True,
    reference: keras.layers.Layer | Callable | None = None,
    atol: float = 1e-6,
    rtol: float = 1e-6,
) -> Layer:
    """Checks the layer contract of `layer_cls` and returns the built layer.

    Checks, in order:

    1. the class is registered under its name, documents an example and declares a bool
       `xla_friendly_on_cpu`;
    2. the inference output has `expected_output_shape` (batch axis included);
    3. the counts of trainable and non-trainable variables;
    4. a second call creates no variable and reuses the same variable objects;
    5. eager, `tf.function` and (if `run_xla`) XLA give the same outputs in inference mode,
       and in training mode too when `training_deterministic` (training calls run under
       `update_hooks.collect_updates()`, so nothing is applied);
    6. update hooks: a `training=True` call under `collect_updates()` registers exactly
       `expected_hooks` hooks on the layer's own non-trainable variables, the traced call
       the same number, and no non-trainable variable changes;
    7. once built, inputs whose size differs on an axis the `input_spec` fixed raise a
       ValueError that says what the layer was built for;
    8. config round trip: `from_config(get_config())` gives an equal, JSON-serializable
       config, the same variable shapes, and with the weights copied the same outputs; the
       config with dtype='float64' gives float64 outputs;
    9. freezing moves every variable to the non-trainable collection, and a `training=True`
       call then registers no hooks and changes no variable (eagerly, with no collector);
    10. `reference`: a Keras layer twin (given the layer's weights by position) or a
        callable `reference(layer, inputs) -> expected inference outputs`; the outputs
        must match (for a Keras twin, in training mode too when deterministic).

    Args:
        layer_cls: the layer class.
        init_kwargs: its constructor arguments.
        input_data: a NumPy array, or a list of them for layers taking a list.
        expected_output_shape: the output shape, batch axis included.
        expected_trainable: the number of trainable variables once built.
        expected_non_trainable: the number of non-trainable variables once built.
        expected_hooks: the update hooks one `training=True` call registers.
        run_xla: whether to compare with an XLA-compiled (`jit_compile=True`) call.
        training_deterministic: whether training-mode outputs are reproducible (False for
            Dropout), so they can be compared between eager, graph and XLA.
        reference: a Keras twin layer or a callable giving the expected outputs.
        atol: absolute tolerance of the comparisons.
        rtol: relative tolerance of the comparisons.

    Returns:
        The layer, built, trainable, with its variables unchanged by the checks.
    """
    close = lambda a, b, what: np.testing.assert_allclose(  # noqa: E731
        np.asarray(a), np.asarray(b), rtol=rtol, atol=atol, err_msg=what
    )
    inputs = to_inputs(input_data)

    # 1. registration and documentation
    assert LAYERS.get(layer_cls.__name__) is layer_cls, "decorate the class with @register_layer"
    assert layer_cls.__doc__ and "Example" in layer_cls.__doc__, "docstring needs an Example"
    assert isinstance(getattr(layer_cls, "xla_friendly_on_cpu", None), bool)

    # 2-4. shape, collections, variable reuse
    layer = layer_cls(**init_kwargs)
    outputs = layer(inputs)
    assert tuple(outputs.shape) == tuple(expected_output_shape), f"output shape {outputs.shape}"
    assert len(layer.trainable_variables) == expected_trainable, layer.trainable_variables
    assert len(layer.non_trainable_variables) == expected_non_trainable, (
        layer.non_trainable_variables
    )
    assert len(layer.variables) == expected_trainable + expected_non_trainable
    variable_ids = [id(v) for v in layer.variables]
    close(layer(inputs), outputs, "a second inference call differs")
    assert [id(v) for v in layer.variables] == variable_ids, "a second call made new variables"

    # 5-6. eager == tf.function == XLA; hooks registered, not applied
    non_trainable_ids = {id(v) for v in layer.non_trainable_variables}
    snapshot = [v.numpy() for v in layer.variables]
    with update_hooks.collect_updates() as pending:
        train_outputs = layer(inputs, training=True)
    assert len(pending) == expected_hooks, f"{len(pending)} hooks, expected {expected_hooks}"
    assert all(p.hook.layer is layer for p in pending)
    assert all(id(p.hook.variable) in non_trainable_ids for p in pending)
    _assert_unchanged(layer, snapshot, "a collected training call changed a variable")

    traced_hooks: list[int] = []

    def both_modes(x):
        with update_hooks.collect_updates() as collected:
            train = layer(x, training=True)
        traced_hooks.append(len(collected))
        return layer(x), train

    compiled = [("tf.function", tf.function(both_modes))]
    if run_xla:
        compiled.append(("XLA", tf.function(both_modes, jit_compile=True)))
    for label, function in compiled:
        graph_inference, graph_training = function(inputs)
        close(graph_inference, outputs, f"{label} inference output differs from eager")
        if training_deterministic:
            close(graph_training, train_outputs, f"{label} training output differs from eager")
    assert traced_hooks and all(n == expected_hooks for n in traced_hooks), (
        f"traced training calls registered {traced_hooks} hooks, expected {expected_hooks}"
    )
    _assert_unchanged(layer, snapshot, "a traced training call changed a variable")

    # 7. feature sizes fixed at build time
    spec = layer.input_spec
    if isinstance(inputs, tf.Tensor) and spec is not None and spec.axes:
        for axis, size in spec.axes.items():
            shape = inputs.shape.as_list()
            shape[axis] = size + 1
            with pytest.raises(ValueError, match="was built for"):
                layer(tf.zeros(shape, inputs.dtype))

    # 8. config round trip
    config = layer.get_config()
    json.dumps(config)  # plain data, so recipes and checkpoints can hold it
    clone = layer_cls.from_config(copy.deepcopy(config))
    assert clone.get_config() == config, "from_config(get_config()) changed the config"
    clone(inputs)
    assert [tuple(v.shape) for v in clone.variables] == [
        tuple(v.shape) for v in layer.variables
    ], "the layer rebuilt from its config has other variables"
    for target, source in zip(clone.variables, layer.variables):
        target.assign(source)
    close(clone(inputs), outputs, "the layer rebuilt from its config differs")
    wide = layer_cls.from_config({**copy.deepcopy(config), "dtype": "float64", "name": None})
    wide_outputs = wide(tf.nest.map_structure(_to_float64, inputs))
    if wide_outputs.dtype.is_floating:
        assert wide_outputs.dtype == tf.float64

    # 9. freezing
    layer.trainable = False
    try:
        assert layer.trainable_variables == []
        assert [id(v) for v in layer.non_trainable_variables] == variable_ids
        with update_hooks.collect_updates() as pending:
            layer(inputs, training=True)
        assert pending == [], "a frozen layer registered update hooks"
        layer(inputs, training=True)  # no collector: hooks would apply at once
        _assert_unchanged(layer, snapshot, "a frozen layer changed a variable")
    finally:
        layer.trainable = True
    assert len(layer.trainable_variables) == expected_trainable

    # 10. reference
    if isinstance(reference, keras.layers.Layer):
        copy_weights_to_keras(layer, reference, inputs)
        close(layer(inputs), reference(inputs, training=False), "differs from the Keras twin")
        if training_deterministic:
            with update_hooks.collect_updates():
                ours = layer(inputs, training=True)
            close(ours, reference(inputs, training=True), "differs from Keras in training")
    elif reference is not None:
        close(layer(inputs), reference(layer, input_data), "differs from the reference")
    return layer


def _assert_unchanged(layer: Layer, snapshot: list[np.ndarray], message: str) -> None:
    for before, variable in zip(snapshot, layer.variables):
        np.testing.assert_array_equal(variable.numpy(), before, err_msg=message)


def _to_float64(tensor: tf.Tensor) -> tf.Tensor:
    return tf.cast(tensor, tf.float64) if tensor.dtype.is_floating else tensor
