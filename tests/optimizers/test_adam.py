"""Adam: Keras as the reference, and a hand-computed golden value. The optimizer contract
(Adam and AMSGrad) runs from graphfit.testing's examples (tests/test_conformance.py)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from graphfit import optimizers
from graphfit.testing import assert_matches_keras

VARIANTS = {
    "adam": {"learning_rate": 0.05},
    "amsgrad": {"learning_rate": 0.05, "amsgrad": True},
}
EXTRAS = {
    "none": dict,
    "clipnorm": lambda: {"clipnorm": 0.5},
    "clipvalue": lambda: {"clipvalue": 0.2},
    "global_clipnorm": lambda: {"global_clipnorm": 0.7},
    "weight_decay": lambda: {"weight_decay": 0.1},
    "schedule": lambda: {
        "learning_rate": keras.optimizers.schedules.ExponentialDecay(0.1, 5, 0.5)
    },
    "hyperparameters": lambda: {"beta_1": 0.5, "beta_2": 0.9, "epsilon": 1e-3},
}


@pytest.mark.parametrize("extra", sorted(EXTRAS))
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_matches_keras(variant, extra):
    def arguments():
        return {**VARIANTS[variant], **EXTRAS[extra]()}

    assert_matches_keras(
        lambda: optimizers.Adam(**arguments()), lambda: keras.optimizers.Adam(**arguments())
    )


def test_matches_keras_in_float64():
    # Keras rounds beta_1 and beta_2 through float32 even for float64 variables
    # (tf.cast(0.999, "float64") == 0.99900001287...), which moves 1 - beta_2^t by ~1e-5
    # relative; graphfit keeps them exact (see test_golden_two_steps), hence the tolerance.
    arguments = {"learning_rate": 0.05, "amsgrad": True, "weight_decay": 0.1}
    assert_matches_keras(
        lambda: optimizers.Adam(**arguments),
        lambda: keras.optimizers.Adam(**arguments),
        dtype=tf.float64,
        tolerance=2e-5,
    )


def test_golden_two_steps():
    # loss = w^2, g = 2w, w0 = 1, lr = 0.1, beta_1 = 0.9, beta_2 = 0.999, epsilon = 1e-7.
    # step 1: g = 2; m = 0.2; v = 0.004; alpha = 0.1 * sqrt(0.001) / 0.1 = 0.0316227766
    #         w = 1 - 0.2 * alpha / (sqrt(0.004) + 1e-7) = 0.900000158113633
    # step 2: g = 1.800000316227266; m = 0.2 + (g - 0.2) * 0.1 = 0.3600000316227266
    #         v = 0.004 + (g^2 - 0.004) * 0.001 = 0.0072360011384182635
    #         alpha = 0.1 * sqrt(1 - 0.999^2) / (1 - 0.9^2) = 0.023531672532745275
    #         w = w - m * alpha / (sqrt(v) + 1e-7) = 0.8004125019437753
    w = tf.Variable([1.0], dtype=tf.float64)
    optimizer = optimizers.Adam(learning_rate=0.1)
    expected = [0.900000158113633, 0.8004125019437753]
    for want in expected:
        optimizer.minimize(lambda: (tf.reduce_sum(w * w), None), [w])
        np.testing.assert_allclose(w.numpy(), [want], rtol=0, atol=1e-12)
    np.testing.assert_allclose(optimizer.get_slot(w, "momentum").numpy(), [0.36000003162272654])
    np.testing.assert_allclose(
        optimizer.get_slot(w, "velocity").numpy(), [0.0072360011384182635]
    )


def test_amsgrad_keeps_the_largest_velocity():
    w = tf.Variable([1.0])
    optimizer = optimizers.Adam(learning_rate=0.1, amsgrad=True, beta_2=0.5)
    optimizer.apply_gradients([(tf.constant([4.0]), w)])  # v = 8
    optimizer.apply_gradients([(tf.constant([0.0]), w)])  # v = 4, v_hat stays 8
    assert float(optimizer.get_slot(w, "velocity")[0]) == pytest.approx(4.0)
    assert float(optimizer.get_slot(w, "velocity_hat")[0]) == pytest.approx(8.0)


def test_keras_defaults():
    config = optimizers.Adam().get_config()
    assert config["learning_rate"] == 0.001
    assert (config["beta_1"], config["beta_2"], config["epsilon"]) == (0.9, 0.999, 1e-7)
    assert config["amsgrad"] is False


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"beta_1": 1.0}, "beta_1 must be a float in [0, 1). Received: beta_1=1.0"),
        ({"beta_2": -0.5}, "beta_2 must be a float in [0, 1). Received: beta_2=-0.5"),
        ({"epsilon": -1e-7}, "epsilon must be a float >= 0. Received: epsilon=-1e-07"),
        ({"amsgrad": "yes"}, "amsgrad must be a bool. Received: amsgrad='yes'"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError) as error:
        optimizers.Adam(**kwargs)
    assert message in str(error.value)
