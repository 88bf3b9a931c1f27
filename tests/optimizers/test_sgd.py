"""SGD: Keras as the reference, and a hand-computed golden value. The optimizer contract
(plain and Nesterov) runs from graphfit.testing's examples (tests/test_conformance.py)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from graphfit import optimizers
from graphfit.testing import assert_matches_keras

VARIANTS = {
    "plain": {"learning_rate": 0.02},
    "momentum": {"learning_rate": 0.02, "momentum": 0.9},
    "nesterov": {"learning_rate": 0.02, "momentum": 0.9, "nesterov": True},
}
EXTRAS = {
    "none": dict,
    "clipnorm": lambda: {"clipnorm": 0.5},
    "clipvalue": lambda: {"clipvalue": 0.2},
    "global_clipnorm": lambda: {"global_clipnorm": 0.7},
    "weight_decay": lambda: {"weight_decay": 0.1},
    "schedule": lambda: {
        "learning_rate": keras.optimizers.schedules.ExponentialDecay(0.05, 5, 0.5)
    },
}


@pytest.mark.parametrize("extra", sorted(EXTRAS))
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_matches_keras(variant, extra):
    def arguments():
        return {**VARIANTS[variant], **EXTRAS[extra]()}

    assert_matches_keras(
        lambda: optimizers.SGD(**arguments()), lambda: keras.optimizers.SGD(**arguments())
    )


def test_matches_keras_in_float64():
    arguments = {"learning_rate": 0.02, "momentum": 0.9, "nesterov": True, "weight_decay": 0.1}
    assert_matches_keras(
        lambda: optimizers.SGD(**arguments),
        lambda: keras.optimizers.SGD(**arguments),
        dtype=tf.float64,
    )


def test_nesterov_golden_two_steps():
    # loss = 0.5 * sum(w^2), so g = w. lr = 0.1, momentum = 0.9, w0 = [1, -2]:
    # step 1: g = [1, -2];       m = 0.9*0 - 0.1*g = [-0.1, 0.2]
    #         w = w + (0.9*m - 0.1*g) = [1 - 0.09 - 0.1, -2 + 0.18 + 0.2] = [0.81, -1.62]
    # step 2: g = [0.81, -1.62]; m = 0.9*[-0.1, 0.2] - 0.1*g = [-0.171, 0.342]
    #         w = [0.81 - 0.1539 - 0.081, -1.62 + 0.3078 + 0.162] = [0.5751, -1.1502]
    w = tf.Variable([1.0, -2.0], dtype=tf.float64)
    optimizer = optimizers.SGD(learning_rate=0.1, momentum=0.9, nesterov=True)
    for _ in range(2):
        optimizer.minimize(lambda: (0.5 * tf.reduce_sum(w * w), None), [w])
    np.testing.assert_allclose(w.numpy(), [0.5751, -1.1502], rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        optimizer.get_slot(w, "momentum").numpy(), [-0.171, 0.342], rtol=0, atol=1e-12
    )


def test_plain_sgd_keeps_no_slot_like_keras():
    optimizer, reference = optimizers.SGD(), keras.optimizers.SGD()
    w = tf.Variable([1.0])
    optimizer.build([w])
    reference.build([w])
    assert len(optimizer.variables) == len(reference.variables) == 2  # iterations, rate
    with pytest.raises(ValueError, match="has no slot 'momentum'"):
        optimizer.get_slot(w, "momentum")


def test_keras_defaults():
    config = optimizers.SGD().get_config()
    assert (config["learning_rate"], config["momentum"], config["nesterov"]) == (0.01, 0.0, False)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"momentum": 1.5}, "momentum must be a float in [0, 1]. Received: momentum=1.5"),
        ({"momentum": -0.1}, "Received: momentum=-0.1"),
        ({"momentum": "0.9"}, "Received: momentum='0.9'"),
        ({"nesterov": 1}, "nesterov must be a bool. Received: nesterov=1"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError) as error:
        optimizers.SGD(**kwargs)
    assert message in str(error.value)
