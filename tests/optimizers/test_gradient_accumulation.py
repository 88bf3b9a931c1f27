"""gradient_accumulation_steps: Keras's numbers (bare apply_gradients and model.fit), batch b
with k=4 equal to batch 4b, one trace under tf.function / XLA / steps_per_execution, through
LossScaleOptimizer, refused by a second-order optimizer."""

from __future__ import annotations

import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers

# Run in a fresh process with two logical CPUs (tests/conftest.py's two_cpu_results).
TWO_CPU_SCRIPT = pathlib.Path(__file__).with_name("accumulation_mirrored_script.py")

RNG = np.random.RandomState(0)
X = RNG.normal(size=(32, 3)).astype("float32")
Y = (np.tanh(X @ RNG.normal(size=(3, 2))) + 0.1 * RNG.normal(size=(32, 2))).astype("float32")
GRADS = [[RNG.normal(size=(3, 2)).astype("float32"), RNG.normal(size=(2,)).astype("float32")]
         for _ in range(9)]
INIT = [RNG.normal(size=(3, 2)).astype("float32"), RNG.normal(size=(2,)).astype("float32")]


def _bare(make_ours, make_keras, grads=GRADS):
    ours, theirs = [tf.Variable(v) for v in INIT], [keras.Variable(v) for v in INIT]
    ours_opt, keras_opt = make_ours(), make_keras()
    for g in grads:
        ours_opt.apply_gradients(zip([tf.constant(x) for x in g], ours))
        keras_opt.apply_gradients(zip([tf.constant(x) for x in g], theirs))
    return ours, theirs, ours_opt, keras_opt


CASES = {
    "sgd_k3": ("SGD", dict(learning_rate=0.1, momentum=0.9, gradient_accumulation_steps=3)),
    "adam_k2_clip_decay": ("Adam", dict(learning_rate=0.05, gradient_accumulation_steps=2,
                                        clipnorm=0.5, weight_decay=0.1)),
    "adam_k4_schedule": ("Adam", dict(gradient_accumulation_steps=4)),
    # Nadam's optimizer-level u_product advances on update steps only (as Keras's)
    "nadam_k2_ema": ("Nadam", dict(learning_rate=0.1, gradient_accumulation_steps=2,
                                   use_ema=True, ema_momentum=0.5)),
    "nadam_k3": ("Nadam", dict(learning_rate=0.1, gradient_accumulation_steps=3)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_apply_gradients_matches_keras(case):
    name, kwargs = CASES[case]
    schedule = lambda: keras.optimizers.schedules.ExponentialDecay(0.1, 2, 0.5)  # noqa: E731
    extra = {"learning_rate": schedule()} if case.endswith("schedule") else {}
    ours, theirs, ours_opt, keras_opt = _bare(
        lambda: getattr(optimizers, name)(**kwargs, **extra),
        lambda: getattr(keras.optimizers, name)(**kwargs, **extra))
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert int(ours_opt.iterations) == int(keras_opt.iterations) == 9 // kwargs[
        "gradient_accumulation_steps"]
    # the learning rate (a schedule: at the raw counter, 9) and every optimizer variable
    np.testing.assert_allclose(float(ours_opt.learning_rate), float(keras_opt.learning_rate),
                               rtol=1e-7)
    ours_state, keras_state = ours_opt.get_weights(), [v.numpy() for v in keras_opt.variables]
    assert ours_state[0] == keras_state[0] == 9  # the raw counter
    keras_rest = keras_state[1 if extra else 2:]  # under a schedule Keras has no rate variable
    assert len(ours_state[2:]) == len(keras_rest)
    for a, b in zip(ours_state[2:], keras_rest):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_only_every_kth_call_moves_the_variables():
    w = tf.Variable([1.0, 2.0])
    opt = optimizers.Adam(0.1, gradient_accumulation_steps=3)
    for call in range(6):
        before = w.numpy().copy()
        opt.apply_gradients([(tf.constant([1.0, -1.0]), w)])
        moved = not np.array_equal(before, w.numpy())
        assert moved == (call % 3 == 2), call
    assert int(opt.iterations) == 2 and int(opt.variables[0]) == 6


def _models(seed=3):
    keras.utils.set_random_seed(seed)
    theirs = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="tanh"),
                               keras.layers.Dense(2)])
    ours = gf.Sequential([layers.Dense(4, activation="tanh"), layers.Dense(2)], input_shape=(3,))
    ours.set_weights(theirs.get_weights())
    return ours, theirs


def _fit_ours(batch_size, k, jit_compile=False, steps_per_execution=1, optimizer=None):
    ours, theirs = _models()
    opt = optimizer or optimizers.Adam(0.02, gradient_accumulation_steps=k)
    ours.compile(optimizer=opt, loss="mse", jit_compile=jit_compile,
                 steps_per_execution=steps_per_execution)
    ours.fit(X, Y, batch_size=batch_size, epochs=2, shuffle=False, verbose=0)
    return ours, theirs


@pytest.fixture(scope="module")
def keras_k4():
    _, theirs = _models()
    theirs.compile(optimizer=keras.optimizers.Adam(0.02, gradient_accumulation_steps=4),
                   loss="mse", jit_compile=False)
    theirs.fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    return theirs


@pytest.mark.parametrize("jit_compile,steps_per_execution", [(False, 1), (True, 3)])
def test_fit_matches_keras(keras_k4, jit_compile, steps_per_execution):
    ours, _ = _fit_ours(4, 4, jit_compile, steps_per_execution)
    for a, b in zip(ours.get_weights(), keras_k4.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert int(ours.optimizer.iterations) == int(keras_k4.optimizer.iterations) == 4


def test_batch_b_with_k4_equals_batch_4b():
    small, _ = _fit_ours(4, 4, jit_compile=True, steps_per_execution=2)
    big, _ = _fit_ours(16, None, optimizer=optimizers.Adam(0.02))
    for a, b in zip(small.get_weights(), big.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    assert int(small.optimizer.iterations) == int(big.optimizer.iterations) == 4


def test_one_trace_serves_update_and_accumulation_steps():
    w = tf.Variable([1.0, 2.0])
    opt = optimizers.SGD(0.1, momentum=0.9, gradient_accumulation_steps=2)

    @tf.function(jit_compile=True)
    def step(g):
        opt.apply_gradients([(g, w)])

    for _ in range(5):
        step(tf.constant([1.0, 1.0]))
    assert step.experimental_get_tracing_count() <= 2  # the first trace builds the state
    eager = tf.Variable([1.0, 2.0])
    twin = optimizers.SGD(0.1, momentum=0.9, gradient_accumulation_steps=2)
    for _ in range(5):
        twin.apply_gradients([(tf.constant([1.0, 1.0]), eager)])
    np.testing.assert_allclose(w.numpy(), eager.numpy(), rtol=1e-6)


def test_under_loss_scale_optimizer_matches_keras():
    ours, theirs = _models()
    ours.compile(optimizer=optimizers.LossScaleOptimizer(
        optimizers.SGD(0.05, momentum=0.9, gradient_accumulation_steps=2),
        initial_scale=2.0**8, dynamic_growth_steps=3), loss="mse", jit_compile=False)
    theirs.compile(optimizer=keras.optimizers.LossScaleOptimizer(
        keras.optimizers.SGD(0.05, momentum=0.9, gradient_accumulation_steps=2),
        initial_scale=2.0**8, dynamic_growth_steps=3), loss="mse", jit_compile=False)
    for model in (ours, theirs):
        model.fit(X, Y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(ours.get_weights(), theirs.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert int(ours.optimizer.iterations) == int(theirs.optimizer.iterations) == 2
    assert float(ours.optimizer.loss_scale) == float(theirs.optimizer.dynamic_scale)


def test_bad_steps_and_second_order_optimizers_are_refused():
    for bad in (1, 0, 2.5, True):
        with pytest.raises(ValueError, match="gradient_accumulation_steps` must be an integer"):
            optimizers.SGD(gradient_accumulation_steps=bad)
    with pytest.raises(ValueError, match="LevenbergMarquardt does not take "
                                         "gradient_accumulation_steps"):
        optimizers.get({"type": "LevenbergMarquardt", "gradient_accumulation_steps": 2})


def test_one_replica_mirrored_strategy_equals_one_device():
    """Under a strategy a cond cannot assign mirrored variables: the select path instead."""
    plain, _ = _fit_ours(4, None, optimizer=optimizers.Adam(
        0.02, gradient_accumulation_steps=4, use_ema=True, ema_overwrite_frequency=3))
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    with strategy.scope():
        mirrored, _ = _models()
        mirrored.compile(optimizer=optimizers.Adam(0.02, gradient_accumulation_steps=4,
                                                   use_ema=True, ema_overwrite_frequency=3),
                         loss="mse", jit_compile=False)
    mirrored.fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    assert int(mirrored.optimizer.iterations) == 4
    for a, b in zip(mirrored.get_weights(), plain.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    for a, b in zip(mirrored.optimizer.get_weights(), plain.optimizer.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_two_replica_mirrored_strategy_equals_one_device(two_cpu_results):
    result = two_cpu_results[str(TWO_CPU_SCRIPT)]
    assert isinstance(result, dict), result
    assert result["iterations"] == [4, 4]
    assert result["difference"] < 1e-6

