"""What LevenbergMarquardt says about a model it cannot train well: nothing trainable (an
error), and layers that are random in training (a warning)."""

import warnings

import numpy as np
import pytest

import graphfit as gf
from graphfit import layers, optimizers

X = np.random.default_rng(0).normal(size=(40, 3))
Y = X @ np.array([[1.0], [2.0], [3.0]])


def _fit(model):
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    return model.fit(X, Y, batch_size=None, epochs=2, verbose=0)


def test_a_model_with_nothing_to_train_is_refused_with_what_to_do():
    model = gf.Sequential([layers.Dense(1, trainable=False)], input_shape=(3,), dtype="float64")
    with pytest.raises(ValueError, match="no trainable variables to fit.*Unfreeze"):
        _fit(model)


def test_a_formula_with_every_parameter_fixed_is_named_with_what_to_do():
    formula = layers.Formula("a*x1 + b*x2", params={"a": {"value": 1.0, "vary": False},
                                                    "b": {"value": 2.0, "vary": False}},
                             name="line")
    model = gf.Sequential([formula], input_shape=(3,), dtype="float64")
    with pytest.raises(ValueError, match=r"'line' \(Formula\) are all fixed .*vary: false\)"
                                         r"\. Let at least one parameter vary"):
        _fit(model)


def test_dropout_in_the_model_is_named_in_a_warning():
    model = gf.Sequential([layers.Dense(4), layers.Dropout(0.2, name="drop"), layers.Dense(1)],
                          input_shape=(3,), dtype="float64")
    with pytest.warns(UserWarning, match=r"'drop' \(Dropout\) is random in training"):
        _fit(model)


def test_a_deterministic_model_trains_without_the_warning():
    model = gf.Sequential([layers.Dense(4), layers.Dropout(0.0), layers.Dense(1)],
                          input_shape=(3,), dtype="float64")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*random in training")
        history = _fit(model)
    assert history.history["loss"][-1] < history.history["loss"][0]


def _normalized(use_bias):
    return gf.Sequential([layers.Dense(6, use_bias=use_bias, name="hidden"),
                          layers.BatchNormalization(name="bn"), layers.Activation("tanh"),
                          layers.Dense(1)], input_shape=(3,), dtype="float64")


def test_a_dense_bias_that_batch_normalization_cancels_is_named_in_a_warning():
    # Its Jacobian column is rounding noise, which Marquardt's scaling blows up: every trial
    # failed and the fit stopped as converged after its first epoch (a review).
    with pytest.warns(UserWarning, match=r"Dense 'hidden' adds a bias .* 'bn', subtracts "
                                         r"again.*use_bias=False"):
        _fit(_normalized(use_bias=True))


@pytest.mark.parametrize("use_bias, damping", [(False, "marquardt"), (True, "identity")])
def test_the_warned_of_remedies_train_without_the_warning(use_bias, damping):
    model = _normalized(use_bias)
    model.compile(optimizer=optimizers.LevenbergMarquardt(damping=damping), loss="mse")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*subtracts again")
        history = model.fit(X, Y, batch_size=None, epochs=6, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0] / 5, history.history
