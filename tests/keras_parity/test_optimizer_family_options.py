"""Keras's base-optimizer options on every optimizer graphfit shares with Keras: each runs the
same gradients through `apply_gradients` with an EMA of the weights, gradient accumulation
and a learning rate given as a callable, beside its `keras.optimizers` twin; then under a
`LossScaleOptimizer` and with `steps_per_execution` through `fit`. Read from the registry,
so an optimizer added later is checked the day it is registered."""

from __future__ import annotations

import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers
from graphfit.core.registry import OPTIMIZERS

RNG = np.random.RandomState(7)
INIT = [RNG.normal(size=(3, 2)).astype("float32"), RNG.normal(size=(2,)).astype("float32")]
GRADS = [[RNG.normal(size=(3, 2)).astype("float32"), RNG.normal(size=(2,)).astype("float32")]
         for _ in range(8)]
X = RNG.normal(size=(24, 3)).astype("float32")
Y = RNG.normal(size=(24, 2)).astype("float32")
# Muon's decision per variable reads Keras's `variable.path`; it has its own parity tests.
NOT_HERE = {"Muon"}


def _shared_with_keras() -> list[str]:
    names = []
    for name in OPTIMIZERS.names():
        cls = OPTIMIZERS.get(name)
        if (isinstance(cls, type) and issubclass(cls, optimizers.Optimizer)
                and hasattr(keras.optimizers, name) and name not in NOT_HERE):
            names.append(name)
    return names


SHARED = _shared_with_keras()


def test_the_family_is_keras_3_15s():
    keras_names = {n for n in dir(keras.optimizers) if isinstance(
        getattr(keras.optimizers, n), type) and issubclass(getattr(keras.optimizers, n),
                                                           keras.optimizers.Optimizer)}
    ours = set(OPTIMIZERS.names())
    # Optimizer is the base class (OptimizerMap, a mapping, is no optimizer in Keras either).
    assert keras_names - ours <= {"Optimizer"}, sorted(keras_names - ours)
    assert hasattr(optimizers, "OptimizerMap")


@pytest.mark.parametrize("name", SHARED)
def test_ema_accumulation_and_a_callable_rate_give_kerass_numbers(name):
    options = dict(use_ema=True, ema_momentum=0.9, ema_overwrite_frequency=3,
                   gradient_accumulation_steps=2)
    ours = [tf.Variable(v) for v in INIT]
    theirs = [keras.Variable(v) for v in INIT]
    ours_opt = getattr(optimizers, name)(learning_rate=lambda: 0.05, **options)
    keras_opt = getattr(keras.optimizers, name)(learning_rate=lambda: 0.05, **options)
    for grads in GRADS:
        ours_opt.apply_gradients(zip([tf.constant(g) for g in grads], ours))
        keras_opt.apply_gradients(zip([tf.constant(g) for g in grads], theirs))
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=2e-6, atol=2e-6)
    assert int(ours_opt.iterations) == int(keras_opt.iterations) == 4
    ours_opt.finalize_variable_values(ours)
    keras_opt.finalize_variable_values(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=2e-6, atol=2e-6)


def _fit(optimizer, loss_scale: bool, steps_per_execution: int):
    model = gf.Sequential([layers.Dense(2, kernel_initializer="ones")], input_shape=(3,))
    if loss_scale:
        # 6 steps, far below dynamic_growth_steps: the scale stays 1024 (a power of two)
        optimizer = optimizers.LossScaleOptimizer(optimizer, initial_scale=1024.0)
    model.compile(optimizer=optimizer, loss="mse", steps_per_execution=steps_per_execution,
                  jit_compile=False)
    model.fit(X, Y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    return model.get_weights()


@pytest.mark.parametrize("name", SHARED)
def test_loss_scaling_and_steps_per_execution_change_no_number(name):
    # A fixed power-of-two scale and three steps per execution leave float32 steps exact.
    reference = _fit(getattr(optimizers, name)(learning_rate=0.01), False, 1)
    other = _fit(getattr(optimizers, name)(learning_rate=0.01), True, 3)
    for a, b in zip(reference, other):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------------- under MirroredStrategy

TWO_CPU_SCRIPT = pathlib.Path(__file__).with_name("optimizer_family_mirrored_script.py")


def test_every_first_order_optimizer_under_mirrored_strategy_equals_one_device(
        two_cpu_results):
    result = two_cpu_results[str(TWO_CPU_SCRIPT)]
    assert isinstance(result, dict), result  # else the script's failure
    differences = result["differences"]
    assert set(SHARED) <= set(differences)
    assert {name: d for name, d in differences.items() if d > 1e-6} == {}
