"""The optimizer contract, and the differential harness against keras.optimizers.

`run_optimizer_test` checks a first-order optimizer through `minimize` on a small
least-squares problem: slots created once and kept in `optimizer.variables`, an idempotent
and incremental `build`, the same result eagerly, in `tf.function` (slots built inside the
first trace: traced at most twice) and with XLA (built before, as the engine builds them:
traced once), no new variables after the first step, a float64 model, a checkpoint round
trip of iterations and slots (also restored before build), and a config round trip.

`assert_matches_keras` runs a graphfit optimizer and a Keras optimizer side by side on the same
problem, each from its own copy of the same variables, and compares every variable after
every step.

Optimizers that need the model and the batch, not only a loss value (Levenberg–Marquardt
linearizes the model's residuals), cannot be driven through a bare `minimize`; they are
checked through `model.fit` by `graphfit.testing.run_fit_optimizer_test`.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Callable

import keras
import numpy as np
import tensorflow as tf

from graphfit import optimizers

__all__ = [
    "run_optimizer_test",
    "assert_matches_keras",
    "make_variables",
    "make_loss_fn",
    "gradients",
    "run",
    "INITIAL",
    "check_slots",
    "check_eager_function_and_xla_agree",
    "check_float64",
    "check_checkpoint_round_trip",
    "check_config_round_trip",
]

_RNG = np.random.RandomState(0)
X = _RNG.normal(size=(8, 3))
Y = 2.0 * X @ np.array([[1.0, -2.0], [3.0, 0.5], [-1.0, 2.0]]) + 1.0
# At the initial point below the gradients are large: norms of about 3 to 12 and elements
# above 1, so clipnorm=0.5, clipvalue=0.2 and global_clipnorm=0.7 all bite
# (tests check this).
INITIAL = {"kernel": np.full((3, 2), 0.1), "bias": np.array([0.2, -0.1])}

OptimizerFactory = Callable[[], optimizers.Optimizer]


def make_variables(dtype=tf.float32) -> list[tf.Variable]:
    """Fresh `[kernel (3, 2), bias (2,)]` at the fixed initial point."""
    return [tf.Variable(value, dtype=dtype, name=name) for name, value in INITIAL.items()]


def make_loss_fn(variables: list[tf.Variable]) -> Callable[[], tuple[tf.Tensor, tf.Tensor]]:
    """`loss_fn() -> (loss, predictions)`: half mean squared error of a linear model."""
    kernel, bias = variables
    x = tf.constant(X, kernel.dtype)
    y = tf.constant(Y, kernel.dtype)

    def loss_fn():
        predictions = x @ kernel + bias
        return 0.5 * tf.reduce_mean(tf.square(predictions - y)), predictions

    return loss_fn


def gradients(variables: list[tf.Variable]) -> list[tf.Tensor]:
    """The gradients of the problem's loss at the variables' current values."""
    loss_fn = make_loss_fn(variables)
    with tf.GradientTape() as tape:
        loss, _ = loss_fn()
    return tape.gradient(loss, variables)


def run(optimizer, variables, steps: int, mode: str = "eager", build_first: bool = False):
    """Takes `steps` `minimize` steps in "eager", "function" or "xla" mode.

    Args:
        build_first: build the slots before the first step, as the training engine does; a
            `tf.function` whose first trace creates the slots traces a second time.

    Returns:
        The step function (a `tf.function` outside eager mode), to inspect its tracing count.
    """
    if build_first:
        optimizer.build(variables)
    loss_fn = make_loss_fn(variables)

    def step():
        loss, _ = optimizer.minimize(loss_fn, variables)
        return loss

    if mode != "eager":
        step = tf.function(step, jit_compile=(mode == "xla"))
    for _ in range(steps):
        step()
    return step


def assert_matches_keras(
    make_graphfit: OptimizerFactory,
    make_keras: Callable[[], keras.optimizers.Optimizer],
    steps: int = 20,
    dtype=tf.float32,
    tolerance: float = 1e-6,
    keras_variables: bool = False,
) -> None:
    """Both optimizers, same start, each its own gradients, variables equal after each step.

    With `keras_variables=True` the Keras optimizer updates `keras.Variable`s named "kernel"
    and "bias" (for an optimizer that reads Keras-only attributes such as `variable.path`,
    as Muon does); by default it updates plain `tf.Variable`s.
    """
    ours, theirs = make_graphfit(), make_keras()
    our_vars, their_vars = make_variables(dtype), make_variables(dtype)
    their_targets = their_vars
    if keras_variables:
        their_targets = [keras.Variable(v.numpy(), dtype=dtype.name, name=v.name.split(":")[0])
                         for v in their_vars]
        their_vars = [v.value for v in their_targets]  # the tf.Variables Keras assigns
    for step in range(steps):
        ours.apply_gradients(zip(gradients(our_vars), our_vars))
        theirs.apply_gradients(zip(gradients(their_vars), their_targets))
        for mine, reference in zip(our_vars, their_vars):
            np.testing.assert_allclose(
                mine.numpy(), reference.numpy(), rtol=tolerance, atol=tolerance,
                err_msg=f"{mine.name} differs from Keras after step {step + 1}",
            )
    moved = max(np.abs(v.numpy() - INITIAL[v.name.split(":")[0]]).max() for v in our_vars)
    assert moved > 1e-3, "the comparison is vacuous: the variables hardly moved"
    assert int(ours.iterations) == int(theirs.iterations) == steps


def run_optimizer_test(make_optimizer: OptimizerFactory,
                       expected_slot_names: tuple[str, ...] = (), steps: int = 3) -> None:
    """Checks the optimizer contract of a first-order optimizer (see the module docstring).

    Args:
        make_optimizer: returns a new optimizer each call (the checks need several).
        expected_slot_names: the optimizer's `slot_names`, in order.
        steps: the training steps each check takes.

    Raises:
        AssertionError: naming the check that fails.

    Example:

        >>> from graphfit import optimizers, testing
        >>> testing.run_optimizer_test(lambda: optimizers.SGD(0.05, momentum=0.9),
        ...                            expected_slot_names=("momentum",))
    """
    check_slots(make_optimizer, tuple(expected_slot_names))
    check_eager_function_and_xla_agree(make_optimizer, steps)
    check_float64(make_optimizer, steps)
    check_checkpoint_round_trip(make_optimizer, steps)
    check_config_round_trip(make_optimizer)


def _state(optimizer, variables) -> list[np.ndarray]:
    return [v.numpy() for v in variables] + [v.numpy() for v in optimizer.variables]


def _assert_same_state(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    for index, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(a, b, err_msg=f"{what}: state entry {index} differs")


def check_slots(make_optimizer: OptimizerFactory, expected_slot_names: tuple[str, ...]) -> None:
    """Slots are created once by `build`, kept in `variables`, and added for new variables."""
    optimizer = make_optimizer()
    variables = make_variables()
    optimizer.build(variables)
    assert tuple(optimizer.slot_names) == expected_slot_names, (
        f"slot_names {tuple(optimizer.slot_names)}, expected {expected_slot_names}"
    )
    own = optimizer.variables
    assert own[0] is optimizer.iterations and own[0].dtype == tf.int64, (
        "optimizer.variables must start with the int64 iterations counter"
    )
    assert own[1].dtype == tf.float64 and "learning_rate" in own[1].name, (
        "optimizer.variables[1] must be the float64 learning rate"
    )
    # The slots, then any optimizer-level state made with `add_variable` (Nadam's u_product),
    # whose number does not grow with the variables (checked below).
    slots = own[2:]
    # An empty slot (Muon's velocity of a Muon variable) holds no state: not in `variables`.
    per_variable = [slot for slot in (optimizer.get_slot(v, n) for v in variables
                                      for n in expected_slot_names)
                    if slot.shape.num_elements() != 0]
    assert [id(s) for s in slots[:len(per_variable)]] == [id(s) for s in per_variable], (
        f"optimizer.variables[2:] must start with the {len(per_variable)} slot variables of "
        f"{len(variables)} variables and slots {expected_slot_names}, variable by variable"
    )
    for variable in variables:
        for name in expected_slot_names:
            slot = optimizer.get_slot(variable, name)
            assert slot.shape.num_elements() == 0 or any(slot is s for s in slots), (
                f"slot {name!r} is not in variables")
            # The variable's shape unless the optimizer says otherwise (Adafactor's
            # factored moments, Muon's empty velocity): `slot_initial_value` decides.
            shape = optimizer.slot_initial_value(name, variable).shape
            assert slot.shape == shape and slot.dtype == variable.dtype, (
                f"slot {name!r} has shape {slot.shape} and dtype {slot.dtype.name}; "
                f"slot_initial_value gives {shape} and the variable has {variable.dtype.name}"
            )
            assert not slot.trainable, f"slot {name!r} is trainable"
    optimizer.build(variables)
    assert [id(v) for v in optimizer.variables] == [id(v) for v in own], (
        "a second build with the same variables created variables"
    )
    extra = tf.Variable([1.0, 2.0, 3.0], name="extra")
    optimizer.build([*variables, extra])
    grown = optimizer.variables
    kept = {id(v) for v in own}  # in their order; the new slots come before the state
    assert [id(v) for v in grown if id(v) in kept] == [id(v) for v in own] and len(grown) == len(
        own) + len(expected_slot_names), "build with one more variable must add only its slots"
    assert all(optimizer.get_slot(extra, n).shape == optimizer.slot_initial_value(n, extra).shape
               for n in expected_slot_names)


def check_eager_function_and_xla_agree(make_optimizer: OptimizerFactory, steps: int = 3) -> None:
    """Eager, `tf.function` and XLA steps give the same state; no retrace, no new variable."""
    results = {}
    for mode in ("eager", "function", "xla"):
        optimizer, variables = make_optimizer(), make_variables()
        # Eagerly and in `tf.function` the first call builds the slots (there inside the
        # trace, under `init_scope`); the XLA step is built first, as the engine builds it,
        # so its one trace is compiled once.
        step = run(optimizer, variables, 1, mode, build_first=(mode == "xla"))
        count = len(optimizer.variables)
        # tf.function traces a second time when its first trace created variables (the
        # slots); after that first call, no step may retrace or create anything.
        traces = step.experimental_get_tracing_count() if mode != "eager" else 0
        for _ in range(steps - 1):
            step()
        assert len(optimizer.variables) == count, f"{mode}: variables created after build"
        if mode != "eager":
            retraced = step.experimental_get_tracing_count()
            most = 1 if mode == "xla" else 2
            assert retraced == traces <= most, (
                f"{mode}: traced {retraced} times, at most {most} expected")
        assert int(optimizer.iterations) == steps, f"{mode}: iterations is not {steps}"
        results[mode] = _state(optimizer, variables)
    for mode in ("function", "xla"):
        for got, want in zip(results[mode], results["eager"]):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6,
                                       err_msg=f"{mode} differs from eager")
    assert not np.allclose(results["eager"][0], INITIAL["kernel"]), "the kernel did not move"


def check_float64(make_optimizer: OptimizerFactory, steps: int = 3) -> None:
    """A float64 model gets float64 slots and the float32 result to float32 precision."""
    optimizer, variables = make_optimizer(), make_variables(tf.float64)
    run(optimizer, variables, steps, "xla", build_first=True)
    assert all(s.dtype == tf.float64 for s in optimizer.variables[2:]), (
        "a float64 model got slots of another dtype"
    )
    single = make_variables(tf.float32)
    run(make_optimizer(), single, steps, "eager")
    for double, float32 in zip(variables, single):
        assert double.dtype == tf.float64
        np.testing.assert_allclose(double.numpy(), float32.numpy(), rtol=1e-5, atol=1e-5,
                                   err_msg="float64 and float32 training disagree")


def check_checkpoint_round_trip(make_optimizer: OptimizerFactory, steps: int = 3) -> None:
    """Iterations and slots survive a checkpoint, restored after or before `build`."""
    optimizer, variables = make_optimizer(), make_variables()
    run(optimizer, variables, steps)
    with tempfile.TemporaryDirectory() as directory:
        path = tf.train.Checkpoint(optimizer=optimizer, kernel=variables[0],
                                   bias=variables[1]).write(os.path.join(directory, "ckpt"))
        saved = _state(optimizer, variables)

        restored, new_vars = make_optimizer(), make_variables()
        restored.build(new_vars)
        tf.train.Checkpoint(optimizer=restored, kernel=new_vars[0], bias=new_vars[1]) \
            .read(path).assert_consumed()
        _assert_same_state(_state(restored, new_vars), saved, "restored after build")
        # Restored before building: slots are filled in when build creates them.
        deferred, late_vars = make_optimizer(), make_variables()
        tf.train.Checkpoint(optimizer=deferred, kernel=late_vars[0], bias=late_vars[1]) \
            .read(path)
        assert int(deferred.iterations) == steps, "iterations not restored before build"
        deferred.build(late_vars)
        _assert_same_state(_state(deferred, late_vars), saved, "restored before build")
    # Training goes on identically from the restored state.
    run(optimizer, variables, 1)
    run(restored, new_vars, 1)
    _assert_same_state(_state(restored, new_vars), _state(optimizer, variables),
                       "a step after restoring")


def check_config_round_trip(make_optimizer: OptimizerFactory) -> None:
    """`from_config(get_config())` and `get(serialize())` rebuild an optimizer that trains
    exactly like the original."""
    optimizer = make_optimizer()
    config = optimizer.get_config()
    try:
        json.dumps(config)  # plain data, ready for a recipe or a log
    except TypeError as error:
        raise AssertionError(f"get_config() is not JSON-serializable: {error}") from None
    clone = type(optimizer).from_config(config)
    assert type(clone) is type(optimizer) and clone.get_config() == config, (
        "from_config(get_config()) changed the config"
    )
    again = optimizers.get(optimizers.serialize(optimizer))
    assert type(again) is type(optimizer) and again.get_config() == config, (
        "optimizers.get(optimizers.serialize(optimizer)) changed the config"
    )
    first, second = make_variables(), make_variables()
    run(optimizer, first, 2)
    run(clone, second, 2)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a.numpy(), b.numpy(),
                                      err_msg="the optimizer rebuilt from its config differs")
