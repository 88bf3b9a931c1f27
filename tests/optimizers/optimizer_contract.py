"""The shared optimizer contract, and the differential harness against keras.optimizers.

`OptimizerContract` is a test base: a test module subclasses it (as `TestSomething`), sets
`make_optimizer` and `expected_slot_names`, and pytest runs every check below for it:
slots created once and kept in `optimizer.variables`, an idempotent and incremental `build`,
the same result eagerly, in `tf.function` and with XLA (traced once, no new variables), a
float64 model, a checkpoint round trip of iterations and slots (also restored before build),
and a config round trip.

`assert_matches_keras` runs a graphfit optimizer and a Keras optimizer side by side on the same
least-squares problem, each from its own copy of the same variables, and compares every
variable after every step.
"""

from __future__ import annotations

import json
from typing import Callable

import keras
import numpy as np
import tensorflow as tf

from graphfit import optimizers

__all__ = [
    "OptimizerContract",
    "assert_matches_keras",
    "make_variables",
    "make_loss_fn",
    "gradients",
    "run",
    "INITIAL",
]

_RNG = np.random.RandomState(0)
X = _RNG.normal(size=(8, 3))
Y = 2.0 * X @ np.array([[1.0, -2.0], [3.0, 0.5], [-1.0, 2.0]]) + 1.0
# At the initial point below the gradients are large: norms of about 3 to 12 and elements
# above 1, so clipnorm=0.5, clipvalue=0.2 and global_clipnorm=0.7 all bite
# (tests check this).
INITIAL = {"kernel": np.full((3, 2), 0.1), "bias": np.array([0.2, -0.1])}


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
    loss_fn = make_loss_fn(variables)
    with tf.GradientTape() as tape:
        loss, _ = loss_fn()
    return tape.gradient(loss, variables)


def run(optimizer, variables, steps: int, mode: str = "eager"):
    """Takes `steps` `minimize` steps in "eager", "function" or "xla" mode.

    Returns:
        The step function (a `tf.function` outside eager mode), to inspect its tracing count.
    """
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
    make_graphfit: Callable[[], optimizers.Optimizer],
    make_keras: Callable[[], keras.optimizers.Optimizer],
    steps: int = 20,
    dtype=tf.float32,
    tolerance: float = 1e-6,
) -> None:
    """Both optimizers, same start, each its own gradients, variables equal after each step."""
    ours, theirs = make_graphfit(), make_keras()
    our_vars, their_vars = make_variables(dtype), make_variables(dtype)
    for step in range(steps):
        ours.apply_gradients(zip(gradients(our_vars), our_vars))
        theirs.apply_gradients(zip(gradients(their_vars), their_vars))
        for mine, reference in zip(our_vars, their_vars):
            np.testing.assert_allclose(
                mine.numpy(), reference.numpy(), rtol=tolerance, atol=tolerance,
                err_msg=f"{mine.name} differs from Keras after step {step + 1}",
            )
    moved = max(np.abs(v.numpy() - INITIAL[v.name.split(":")[0]]).max() for v in our_vars)
    assert moved > 1e-3, "the comparison is vacuous: the variables hardly moved"
    assert int(ours.iterations) == int(theirs.iterations) == steps


def _state(optimizer, variables) -> list[np.ndarray]:
    return [v.numpy() for v in variables] + [v.numpy() for v in optimizer.variables]


class OptimizerContract:
    """Checks every optimizer must pass. Subclass as `TestX` and set the two attributes."""

    make_optimizer: Callable[[], optimizers.Optimizer]
    expected_slot_names: tuple[str, ...] = ()
    steps = 3

    def _new(self) -> optimizers.Optimizer:
        return type(self).make_optimizer()

    def test_slots_created_once_and_kept_in_variables(self):
        optimizer = self._new()
        variables = make_variables()
        optimizer.build(variables)
        assert tuple(optimizer.slot_names) == self.expected_slot_names
        own = optimizer.variables
        assert own[0] is optimizer.iterations and own[0].dtype == tf.int64
        assert own[1].dtype == tf.float64 and "learning_rate" in own[1].name
        slots = own[2:]
        assert len(slots) == len(variables) * len(self.expected_slot_names)
        for variable in variables:
            for name in self.expected_slot_names:
                slot = optimizer.get_slot(variable, name)
                assert any(slot is s for s in slots)
                assert slot.shape == variable.shape and slot.dtype == variable.dtype
                assert not slot.trainable
        optimizer.build(variables)  # idempotent
        assert [id(v) for v in optimizer.variables] == [id(v) for v in own]
        extra = tf.Variable([1.0, 2.0, 3.0], name="extra")
        optimizer.build([*variables, extra])  # incremental: only the new variable gains slots
        grown = optimizer.variables
        assert [id(v) for v in grown[: len(own)]] == [id(v) for v in own]
        assert len(grown) == len(own) + len(self.expected_slot_names)
        assert all(optimizer.get_slot(extra, n).shape == (3,) for n in self.expected_slot_names)

    def test_eager_function_and_xla_agree(self):
        results = {}
        for mode in ("eager", "function", "xla"):
            optimizer, variables = self._new(), make_variables()
            step = run(optimizer, variables, 1, mode)  # the first call builds, inside the trace
            count = len(optimizer.variables)
            # tf.function traces a second time when its first trace created variables (the
            # slots); after that first call, no step may retrace or create anything.
            traces = step.experimental_get_tracing_count() if mode != "eager" else 0
            for _ in range(self.steps - 1):
                step()
            assert len(optimizer.variables) == count, f"{mode}: variables created after build"
            if mode != "eager":
                assert step.experimental_get_tracing_count() == traces <= 2
            assert int(optimizer.iterations) == self.steps
            results[mode] = _state(optimizer, variables)
        for mode in ("function", "xla"):
            for got, want in zip(results[mode], results["eager"]):
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=mode)
        assert not np.allclose(results["eager"][0], INITIAL["kernel"])

    def test_float64(self):
        optimizer, variables = self._new(), make_variables(tf.float64)
        run(optimizer, variables, self.steps, "xla")
        assert all(s.dtype == tf.float64 for s in optimizer.variables[2:])
        single = make_variables(tf.float32)
        run(self._new(), single, self.steps, "eager")
        for double, float32 in zip(variables, single):
            assert double.dtype == tf.float64
            np.testing.assert_allclose(double.numpy(), float32.numpy(), rtol=1e-5, atol=1e-5)

    def test_checkpoint_round_trip(self, tmp_path):
        optimizer, variables = self._new(), make_variables()
        run(optimizer, variables, self.steps)
        path = tf.train.Checkpoint(optimizer=optimizer, kernel=variables[0],
                                   bias=variables[1]).write(str(tmp_path / "ckpt"))
        saved = _state(optimizer, variables)

        # Built before restoring.
        restored, new_vars = self._new(), make_variables()
        restored.build(new_vars)
        tf.train.Checkpoint(optimizer=restored, kernel=new_vars[0], bias=new_vars[1]) \
            .read(path).assert_consumed()
        for got, want in zip(_state(restored, new_vars), saved):
            np.testing.assert_array_equal(got, want)
        # Restored before building: slots are filled in when build creates them.
        deferred, late_vars = self._new(), make_variables()
        tf.train.Checkpoint(optimizer=deferred, kernel=late_vars[0], bias=late_vars[1]) \
            .read(path)
        assert int(deferred.iterations) == self.steps
        deferred.build(late_vars)
        for got, want in zip(_state(deferred, late_vars), saved):
            np.testing.assert_array_equal(got, want)
        # Training goes on identically from the restored state.
        run(optimizer, variables, 1)
        run(restored, new_vars, 1)
        for got, want in zip(_state(restored, new_vars), _state(optimizer, variables)):
            np.testing.assert_array_equal(got, want)

    def test_config_round_trip(self):
        optimizer = self._new()
        config = optimizer.get_config()
        json.dumps(config)  # plain data, ready for a recipe or a log
        clone = type(optimizer).from_config(config)
        assert type(clone) is type(optimizer) and clone.get_config() == config
        again = optimizers.get(optimizers.serialize(optimizer))
        assert type(again) is type(optimizer) and again.get_config() == config
        # The clone trains exactly like the original.
        first, second = make_variables(), make_variables()
        run(optimizer, first, 2)
        run(clone, second, 2)
        for a, b in zip(first, second):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
