"""`run_layer_test`: the layer contract every graphfit layer (and model) passes.

A layer test calls `run_layer_test(...)` with the layer's class, constructor arguments and
sample inputs, then adds the checks particular to the layer (numbers against Keras,
hand-computed values, error messages) on the layer it returns. The contract runs without
pytest: a failed check raises an `AssertionError` that says what broke, so it works in a
plain script on a user's own layer as well as in a test suite.

`run_layer_test` checks, in order:

1. the class is registered (`@graphfit.register_layer`, so configs and recipes can
   name it) and `xla_friendly_on_cpu`, where it sets one, is a bool;
2. `layer.build(input_shape)` called by hand with plain tuples marks it built (a second
   build does nothing) and the first call reuses its variables; the inference output has
   `expected_output_shape` (batch axis included);
3. the counts of trainable and non-trainable variables;
4. a second call creates no variable and reuses the same variable objects;
5. eager, `tf.function` and (if `run_xla`) XLA give the same outputs in inference mode,
   and in training mode too when `training_deterministic` (training calls run under
   `update_hooks.collect_updates()`, so nothing is applied);
6. update hooks: a `training=True` call under `collect_updates()` registers exactly
   `expected_hooks` hooks on non-trainable variables of the layer (or of its
   sublayers), the traced call the same number, and no variable changes;
7. once built, inputs whose size differs on an axis the `input_spec` fixed raise a
   ValueError that says what the layer was built for;
8. config round trip: `from_config(get_config())` gives an equal, JSON-serializable
   config, the same variable shapes, and with the weights copied the same outputs; the
   config with dtype='float64' gives float64 outputs;
9. freezing moves every variable to the non-trainable collection, and a `training=True`
   call then registers no hooks and changes no variable (eagerly, with no collector);
10. mixed precision: the config with dtype='mixed_bfloat16' builds float32 variables, its
    floating outputs are bfloat16 (or float32, for layers that stay in float32), close to
    the float32 outputs at bfloat16's precision, and a training call registers the same
    hooks (their values reach the float32 variables);
11. `reference`: a Keras layer twin (given the layer's weights by position) or a
    callable `reference(layer, input_data) -> expected inference outputs`; the outputs
    must match (for a Keras twin, in training mode too when deterministic);
12. a layer that says `keeps_example_axis` (LevenbergMarquardt's closed-form Jacobian relies
    on it) gives, in inference, the outputs of the examples in reverse order for inputs
    in reverse order.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Callable

import keras
import numpy as np
import tensorflow as tf

from graphfit.core import update_hooks
from graphfit.core.layer import Layer
from graphfit.core.registry import LAYERS
from graphfit.testing.build_contract import build_by_hand, check_first_call_reuses

__all__ = [
    "run_layer_test",
    "to_inputs",
    "copy_weights_to_keras",
    "assert_gradients_match_keras",
    "registered_name",
]


def to_inputs(input_data) -> tf.Tensor | list[tf.Tensor]:
    """A NumPy array (or a list of them) as a tensor (or a list of tensors)."""
    if isinstance(input_data, (list, tuple)):
        return [tf.convert_to_tensor(x) for x in input_data]
    return tf.convert_to_tensor(input_data)


def registered_name(layer_cls: type) -> str | None:
    """The name `layer_cls` is registered under in the layer registry, or None."""
    return next((name for name in LAYERS.names() if LAYERS.get(name) is layer_cls), None)


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
    """Checks the layer contract of `layer_cls` (listed in the module docstring).

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
        atol, rtol: absolute and relative tolerances of the comparisons.

    Returns:
        The layer, built, trainable, with its variables unchanged by the checks.

    Raises:
        AssertionError: naming the first check that fails.

    Example:

        >>> import numpy as np, graphfit as gf
        >>> @gf.register_layer
        ... class FeatureScale(gf.Layer):
        ...     def build(self, input_shape):
        ...         self.scale = self.add_weight("scale", (input_shape[-1],), initializer="ones")
        ...     def call(self, x, training=False):
        ...         return x * self.compute_value(self.scale)
        >>> layer = gf.testing.run_layer_test(
        ...     FeatureScale, {}, np.ones((2, 3), "float32"), expected_output_shape=(2, 3),
        ...     expected_trainable=1, expected_non_trainable=0, reference=lambda layer, x: x)
        >>> [v.name for v in layer.variables]
        ['feature_scale/scale:0']
    """
    close = _comparer(atol, rtol)
    inputs = to_inputs(input_data)
    _check_class(layer_cls)

    # 2-4. build by hand, shape, collections, variable reuse
    layer = layer_cls(**init_kwargs)
    built = build_by_hand(layer, inputs)
    outputs = layer(inputs)
    check_first_call_reuses(layer, built)
    _check_shape_and_counts(layer, outputs, expected_output_shape, expected_trainable,
                            expected_non_trainable)
    variable_ids = [id(v) for v in layer.variables]
    close(layer(inputs), outputs, "a second inference call differs")
    assert [id(v) for v in layer.variables] == variable_ids, "a second call made new variables"

    # 5-6. eager == tf.function == XLA; hooks registered, not applied
    snapshot = [v.numpy() for v in layer.variables]
    with update_hooks.collect_updates() as pending:
        train_outputs = layer(inputs, training=True)
    _check_hooks(layer, pending, expected_hooks, "an eager training call")
    _assert_unchanged(layer, snapshot, "a collected training call changed a variable")
    _check_traced_calls(layer, inputs, outputs, train_outputs, expected_hooks, run_xla,
                        training_deterministic, close)
    _assert_unchanged(layer, snapshot, "a traced training call changed a variable")

    _check_input_spec(layer, inputs)
    _check_config_round_trip(layer_cls, layer, inputs, outputs, close)
    _check_freezing(layer, inputs, snapshot, variable_ids, expected_trainable)
    _check_mixed_policy(layer_cls, layer, inputs, outputs, expected_hooks)
    _check_reference(layer, reference, inputs, input_data, training_deterministic, close)
    _check_example_axis(layer, inputs, outputs, close)
    return layer


def _check_example_axis(layer: Layer, inputs, outputs, close) -> None:
    """Output i comes from input i, when the layer says so: reversing the examples of the
    inputs reverses those of the outputs."""
    if not getattr(layer, "keeps_example_axis", False):
        return
    flat = tf.nest.flatten(inputs)
    if flat[0].shape.rank == 0 or flat[0].shape[0] is None or flat[0].shape[0] < 2:
        return
    reverse = lambda t: tf.reverse(t, [0])  # noqa: E731
    reversed_outputs = layer(tf.nest.map_structure(reverse, inputs))
    close(reversed_outputs, tf.nest.map_structure(reverse, outputs),
          "keeps_example_axis is True, but reversing the examples of the inputs does not "
          "reverse those of the outputs")


def _comparer(atol: float, rtol: float) -> Callable[[Any, Any, str], None]:
    def close(actual, desired, what: str) -> None:
        np.testing.assert_allclose(np.asarray(actual), np.asarray(desired), rtol=rtol,
                                   atol=atol, err_msg=what)

    return close


def _check_class(layer_cls: type) -> None:
    assert registered_name(layer_cls) is not None, (
        f"{layer_cls.__qualname__} is not registered: decorate the class with "
        f"@graphfit.register_layer so that configs and recipes can name it"
    )
    flag = getattr(layer_cls, "xla_friendly_on_cpu", True)
    assert isinstance(flag, bool), (
        f"{layer_cls.__qualname__}.xla_friendly_on_cpu must be a bool; received {flag!r}"
    )


def _check_shape_and_counts(layer: Layer, outputs, expected_output_shape, expected_trainable,
                            expected_non_trainable) -> None:
    name = type(layer).__name__
    assert tuple(outputs.shape) == tuple(expected_output_shape), (
        f"{name} output shape {tuple(outputs.shape)}, expected {tuple(expected_output_shape)}"
    )
    trainable = [v.name for v in layer.trainable_variables]
    assert len(trainable) == expected_trainable, (
        f"{name} has {len(trainable)} trainable variables {trainable}, "
        f"expected {expected_trainable}"
    )
    non_trainable = [v.name for v in layer.non_trainable_variables]
    assert len(non_trainable) == expected_non_trainable, (
        f"{name} has {len(non_trainable)} non-trainable variables {non_trainable}, "
        f"expected {expected_non_trainable}"
    )
    assert len(layer.variables) == expected_trainable + expected_non_trainable, (
        f"{name}.variables is not the trainable plus the non-trainable variables"
    )


def _check_hooks(layer: Layer, pending, expected_hooks: int, what: str) -> None:
    assert len(pending) == expected_hooks, (
        f"{what} registered {len(pending)} update hooks, expected {expected_hooks}"
    )
    own_layers = {id(sublayer) for sublayer in layer.flatten_layers()}
    assert all(id(p.hook.layer) in own_layers for p in pending), (
        f"{what} registered a hook of a layer outside {layer.name!r}"
    )
    non_trainable = {id(v) for v in layer.non_trainable_variables}
    assert all(id(p.hook.variable) in non_trainable for p in pending), (
        f"{what} registered a hook on a variable outside the non-trainable collection"
    )


def _check_traced_calls(layer, inputs, outputs, train_outputs, expected_hooks, run_xla,
                        training_deterministic, close) -> None:
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


def _check_input_spec(layer: Layer, inputs) -> None:
    """Feature sizes are fixed at build time, and a mismatch says what the layer expects."""
    spec = layer.input_spec
    if not isinstance(inputs, tf.Tensor) or spec is None or not spec.axes:
        return
    for axis, size in spec.axes.items():
        shape = inputs.shape.as_list()
        shape[axis] = size + 1
        try:
            layer(tf.zeros(shape, inputs.dtype))
        except ValueError as error:
            assert "was built for" in str(error), (
                f"the error for a wrong size on axis {axis} does not say what the layer was "
                f"built for: {error}"
            )
        else:
            raise AssertionError(
                f"{layer.name!r} accepted inputs of shape {shape} after being built for size "
                f"{size} on axis {axis}; its input_spec should refuse them"
            )


def _check_config_round_trip(layer_cls, layer: Layer, inputs, outputs, close) -> None:
    config = layer.get_config()
    try:
        json.dumps(config)  # plain data, so recipes and checkpoints can hold it
    except TypeError as error:
        raise AssertionError(f"get_config() is not JSON-serializable: {error}") from None
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
        assert wide_outputs.dtype == tf.float64, (
            f"with dtype='float64' in its config the layer returns {wide_outputs.dtype.name}"
        )


def _check_mixed_policy(layer_cls, layer: Layer, inputs, outputs, expected_hooks: int) -> None:
    config = {**copy.deepcopy(layer.get_config()), "dtype": "mixed_bfloat16", "name": None}
    mixed = layer_cls.from_config(config)
    mixed_outputs = mixed(inputs)
    floating = [v for v in mixed.variables if v.dtype.is_floating]
    assert all(v.dtype in (tf.float32, tf.float64) for v in floating), (
        "under dtype='mixed_bfloat16' the layer made 16-bit variables: "
        f"{[(v.name, v.dtype.name) for v in floating if v.dtype not in (tf.float32, tf.float64)]}"
        "; add_weight's default dtype is the float32 variable dtype")
    for target, source in zip(mixed.variables, layer.variables):
        target.assign(tf.cast(source, target.dtype))
    mixed_outputs = mixed(inputs)
    for got, want in zip(tf.nest.flatten(mixed_outputs), tf.nest.flatten(outputs)):
        if not want.dtype.is_floating:
            continue
        assert got.dtype in (tf.bfloat16, tf.float32), (
            f"under dtype='mixed_bfloat16' the layer returns {got.dtype.name}, not bfloat16 "
            f"(or float32 for a layer that stays in float32)")
        want = np.asarray(want, np.float64)
        scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
        np.testing.assert_allclose(
            np.asarray(tf.cast(got, tf.float64)), want, rtol=0.05, atol=0.05 * scale,
            err_msg="under dtype='mixed_bfloat16' the outputs are further from float32's "
                    "than bfloat16's 8 bits explain")
    with update_hooks.collect_updates() as pending:
        mixed(inputs, training=True)
    _check_hooks(mixed, pending, expected_hooks, "a training call under mixed_bfloat16")


def _check_freezing(layer: Layer, inputs, snapshot, variable_ids, expected_trainable) -> None:
    layer.trainable = False
    try:
        assert layer.trainable_variables == [], "a frozen layer still has trainable variables"
        assert [id(v) for v in layer.non_trainable_variables] == variable_ids, (
            "freezing did not move every variable, in order, to the non-trainable collection"
        )
        with update_hooks.collect_updates() as pending:
            layer(inputs, training=True)
        assert pending == [], "a frozen layer registered update hooks"
        layer(inputs, training=True)  # no collector: hooks would apply at once
        _assert_unchanged(layer, snapshot, "a frozen layer changed a variable")
    finally:
        layer.trainable = True
    assert len(layer.trainable_variables) == expected_trainable, (
        "unfreezing did not restore the trainable variables"
    )


def _check_reference(layer, reference, inputs, input_data, training_deterministic,
                     close) -> None:
    if isinstance(reference, keras.layers.Layer):
        copy_weights_to_keras(layer, reference, inputs)
        close(layer(inputs), reference(inputs, training=False), "differs from the Keras twin")
        if training_deterministic:
            with update_hooks.collect_updates():
                ours = layer(inputs, training=True)
            close(ours, reference(inputs, training=True), "differs from Keras in training")
    elif reference is not None:
        close(layer(inputs), reference(layer, input_data), "differs from the reference")


def _assert_unchanged(layer: Layer, snapshot: list[np.ndarray], message: str) -> None:
    for before, variable in zip(snapshot, layer.variables):
        np.testing.assert_array_equal(variable.numpy(), before, err_msg=message)


def _to_float64(tensor: tf.Tensor) -> tf.Tensor:
    return tf.cast(tensor, tf.float64) if tensor.dtype.is_floating else tensor
