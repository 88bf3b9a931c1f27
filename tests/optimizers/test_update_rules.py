"""Keras's update rules in graphfit (AdamW, RMSprop, Adagrad, Adadelta, Adamax, Nadam, Ftrl,
Lion, Lamb): Keras's lower-case names, Keras's defaults, clear errors for bad arguments, and a
fit resumed from a checkpoint that ends bitwise where an uninterrupted one does.

The numbers against Keras are in tests/keras_parity/test_optimizer_rules.py; the optimizer
contract (XLA, float64, checkpoints, configs) runs from graphfit.testing's examples."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers
from graphfit.saving import checkpoints

NAMES = ["AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax", "Nadam", "Ftrl", "Lion", "Lamb"]


@pytest.mark.parametrize("name", NAMES)
def test_keras_lower_case_name_gives_keras_defaults(name):
    optimizer = optimizers.get(name.lower())
    assert type(optimizer) is getattr(optimizers, name)
    ours = optimizer.get_config()
    theirs = getattr(keras.optimizers, name)().get_config()
    shared = set(ours) - {"name", "gradient_transforms"}
    assert shared <= set(theirs)
    assert {k: ours[k] for k in shared} == pytest.approx({k: theirs[k] for k in shared})
    again = optimizers.get({"type": name.lower(), **optimizers.serialize(optimizer)})
    assert again.get_config() == ours


def test_adamw_takes_keras_argument_order_and_needs_weight_decay():
    optimizer = optimizers.AdamW(0.01, 0.1, 0.8)
    assert (optimizer.weight_decay, optimizer.beta_1) == (0.1, 0.8)
    assert optimizers.AdamW().weight_decay == 0.004
    with pytest.raises(ValueError, match=r"weight_decay must be a float >= 0 for AdamW .*"
                                         r"Received: weight_decay=None"):
        optimizers.AdamW(weight_decay=None)


@pytest.mark.parametrize("name, kwargs, message", [
    ("RMSprop", {"rho": 1.5}, "rho must be a float in [0, 1]. Received: rho=1.5"),
    ("RMSprop", {"momentum": -0.1}, "momentum must be a float in [0, 1]. Received: momentum=-0.1"),
    ("RMSprop", {"centered": 1}, "centered must be a bool. Received: centered=1"),
    ("Adagrad", {"initial_accumulator_value": -1.0},
     "initial_accumulator_value must be a float >= 0. Received: initial_accumulator_value=-1.0"),
    ("Adadelta", {"epsilon": -1.0}, "epsilon must be a float >= 0. Received: epsilon=-1.0"),
    ("Adamax", {"beta_1": 1.0}, "beta_1 must be a float in [0, 1). Received: beta_1=1.0"),
    ("Nadam", {"beta_2": 1.0}, "beta_2 must be a float in [0, 1). Received: beta_2=1.0"),
    ("Ftrl", {"learning_rate_power": 0.5},
     "learning_rate_power must be a float <= 0 (-0.5 is FTRL's 1/sqrt(n)). "
     "Received: learning_rate_power=0.5"),
    ("Ftrl", {"l1_regularization_strength": -0.1},
     "l1_regularization_strength must be a float >= 0. Received: l1_regularization_strength"),
    ("Ftrl", {"beta": "0.1"}, "beta must be a float >= 0. Received: beta='0.1'"),
    ("Lion", {"beta_1": 0.0}, "beta_1 must be a float in (0, 1]. Received: beta_1=0.0"),
    ("Lamb", {"epsilon": None}, "epsilon must be a float >= 0. Received: epsilon=None"),
])
def test_bad_arguments_are_named(name, kwargs, message):
    with pytest.raises(ValueError) as error:
        getattr(optimizers, name)(**kwargs)
    assert message in str(error.value)


def test_nadam_keeps_one_u_product_in_the_first_variables_dtype():
    w64, w32 = tf.Variable([1.0], dtype=tf.float64), tf.Variable([1.0, 2.0])
    optimizer = optimizers.Nadam(0.1, beta_1=0.5)
    for _ in range(2):
        optimizer.apply_gradients([(tf.ones_like(w64), w64), (tf.ones_like(w32), w32)])
    u_product = optimizer.variables[-1]
    assert u_product.dtype == tf.float64 and "u_product" in u_product.name
    # Advanced once per step, not once per variable: u_1 * u_2, u_t = 0.5 (1 - 0.5 0.96^t).
    expected = 0.5 * (1 - 0.5 * 0.96) * 0.5 * (1 - 0.5 * 0.96**2)
    assert float(u_product) == pytest.approx(expected, rel=1e-15)


# ----------------------------------------------------- bitwise resume from a checkpoint

MAKE = {
    "AdamW": lambda: optimizers.AdamW(0.01, amsgrad=True),
    "RMSprop": lambda: optimizers.RMSprop(0.01, momentum=0.9, centered=True),
    "Adagrad": lambda: optimizers.Adagrad(0.1),
    "Adadelta": lambda: optimizers.Adadelta(1.0),
    "Adamax": lambda: optimizers.Adamax(0.01),
    "Nadam": lambda: optimizers.Nadam(0.01),
    "Ftrl": lambda: optimizers.Ftrl(0.5, l1_regularization_strength=0.01, beta=0.1),
    "Lion": lambda: optimizers.Lion(0.001, weight_decay=0.1),
    "Lamb": lambda: optimizers.Lamb(0.01),
}


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(24, 3)).astype("float32")
    return x, (x @ np.array([[1.0], [-2.0], [0.5]], "float32") + 0.1).astype("float32")


def _model(optimizer, run_eagerly):
    model = gf.Sequential([layers.Dense(4, activation="tanh"), layers.Dense(1)])
    model.compile(optimizer=optimizer, loss="mse", run_eagerly=run_eagerly)
    return model


def _fit(model, folder, epochs, initial_epoch=0):
    x, y = _data()
    model.fit(x, y, batch_size=8, epochs=epochs, initial_epoch=initial_epoch, verbose=0,
              callbacks=[gf.callbacks.ModelCheckpoint(folder, monitor="loss")])


def _state(model) -> list[np.ndarray]:
    return [v.numpy() for v in [*model.variables, *model.optimizer.variables]]


# Eager steps keep the file fast (a compiled fit traces for ~2 s per model); Nadam, whose
# optimizer-level u_product is restored into a variable created later, also runs compiled.
@pytest.mark.parametrize("name, run_eagerly", [(n, True) for n in NAMES] + [("Nadam", False)])
def test_resumed_fit_is_bitwise_an_uninterrupted_one(tmp_path, name, run_eagerly):
    assert set(MAKE) == set(NAMES)
    gf.set_seed(0)
    uninterrupted = _model(MAKE[name](), run_eagerly)
    _fit(uninterrupted, str(tmp_path / "a"), epochs=2)
    gf.set_seed(0)
    first = _model(MAKE[name](), run_eagerly)
    _fit(first, str(tmp_path / "b"), epochs=1)
    gf.set_seed(7)  # a fresh model and optimizer: the checkpoint alone carries the run on
    resumed = _model(MAKE[name](), run_eagerly)
    assert checkpoints.restore_latest(resumed, str(tmp_path / "b"))["epoch"] == 1
    _fit(resumed, str(tmp_path / "b"), epochs=2, initial_epoch=1)
    want, got = _state(uninterrupted), _state(resumed)
    assert len(got) == len(want) and int(resumed.optimizer.iterations) == 6
    for index, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(a, b, err_msg=f"{name}: state entry {index}")
    assert not np.array_equal(want[0], _state(first)[0]), "the second epoch changed nothing"
