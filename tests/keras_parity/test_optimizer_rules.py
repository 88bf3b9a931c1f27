"""Keras's update rules in graphfit: each optimizer next to the same `keras.optimizers` class
on the same least-squares problem, step by step, in float32 and float64; and the goldens of
Keras's own `test_correctness_with_golden` (keras/src/optimizers/<name>_test.py), which hold
without running Keras.

On a CPU the float32 runs are bitwise equal to Keras (same operations in the same order); the
comparison allows 1e-6. In float64 Keras rounds some hyperparameters through float32
(`ops.cast(self.beta_1, "float64")`); graphfit keeps them exact, so the float64 runs use
betas that float32 holds exactly, where the two must agree to 1e-6 (they do to ~1e-8).
"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from graphfit import optimizers
from graphfit.testing import assert_matches_keras

# label -> (class name, arguments), the same for graphfit and Keras.
CASES = {
    "AdamW": ("AdamW", {"learning_rate": 0.05}),
    "AdamW-amsgrad": ("AdamW", {"learning_rate": 0.05, "weight_decay": 0.1, "amsgrad": True}),
    "Adam-amsgrad": ("Adam", {"learning_rate": 0.05, "amsgrad": True}),
    "RMSprop": ("RMSprop", {"learning_rate": 0.01}),
    "RMSprop-momentum-centered": ("RMSprop", {"learning_rate": 0.01, "rho": 0.8,
                                              "momentum": 0.9, "centered": True}),
    "RMSprop-momentum": ("RMSprop", {"learning_rate": 0.01, "momentum": 0.5,
                                     "weight_decay": 0.1}),
    "Adagrad": ("Adagrad", {"learning_rate": 0.1, "initial_accumulator_value": 0.3}),
    "Adadelta": ("Adadelta", {"learning_rate": 1.0, "rho": 0.8, "epsilon": 1e-6}),
    "Adamax": ("Adamax", {"learning_rate": 0.05, "beta_1": 0.85, "clipnorm": 1.0}),
    "Nadam": ("Nadam", {"learning_rate": 0.05}),
    "Nadam-clipped": ("Nadam", {"learning_rate": 0.05, "beta_2": 0.9, "global_clipnorm": 0.7,
                                "weight_decay": 0.05}),
    "Ftrl": ("Ftrl", {"learning_rate": 0.1}),
    "Ftrl-regularized": ("Ftrl", {"learning_rate": 0.1, "learning_rate_power": -0.3,
                                  "initial_accumulator_value": 0.4,
                                  "l1_regularization_strength": 0.05,
                                  "l2_regularization_strength": 0.15,
                                  "l2_shrinkage_regularization_strength": 0.01, "beta": 0.3}),
    "Lion": ("Lion", {"learning_rate": 0.01}),
    "Lion-decayed": ("Lion", {"learning_rate": 0.01, "beta_1": 0.5, "weight_decay": 0.5}),
    "Lamb": ("Lamb", {"learning_rate": 0.05}),
    "Lamb-schedule": ("Lamb", {"learning_rate": keras.optimizers.schedules.ExponentialDecay(
        0.1, 3, 0.5), "weight_decay": 0.1, "clipvalue": 0.2}),
}
# Betas float32 holds exactly, for the float64 runs of the classes whose Keras twin casts its
# betas through float32 (graphfit keeps 0.9 and 0.999 exact; Keras's 0.999 becomes
# 0.99900001287..., which moves Adam's float64 result by ~3e-6 in 10 steps).
_FLOAT32_EXACT_BETAS = {"beta_1": 0.875, "beta_2": 0.9990234375}
_CASTS_BETAS = {"Adam", "AdamW", "Adamax", "Nadam", "Lamb"}


def _arguments(label: str, dtype) -> dict:
    name, arguments = CASES[label]
    if dtype == tf.float64 and name in _CASTS_BETAS:
        arguments = {**arguments, **_FLOAT32_EXACT_BETAS}
    return dict(arguments)


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("label", sorted(CASES))
def test_matches_keras_step_by_step(label, dtype):
    name = CASES[label][0]
    assert_matches_keras(
        lambda: getattr(optimizers, name)(**_arguments(label, dtype)),
        lambda: getattr(keras.optimizers, name)(**_arguments(label, dtype)),
        steps=10, dtype=dtype, tolerance=1e-6)


# -------------------------------------------------- goldens of Keras's own unit tests
# keras/src/optimizers/<name>_test.py, test_correctness_with_golden: a float32 variable of ten
# ones, one step with gradient 0.01 everywhere, then five with gradient 0.1, 0.2, ..., 1.0,
# checked before each of those five (rtol = atol = 5e-4, Keras's tolerance).

def _tiled(*column):
    return np.tile(np.array(column)[:, None], (1, 10))


GOLDENS = {
    "Adam": ({"amsgrad": True}, _tiled(0.999, 0.9982, 0.9974, 0.9965, 0.9955)),
    "AdamW": ({"learning_rate": 1.0, "weight_decay": 0.5, "epsilon": 2}, np.array([
        [0.4998, 0.4998, 0.4998, 0.4998, 0.4998, 0.4998, 0.4998, 0.4998, 0.4998, 0.4998],
        [0.2486, 0.2475, 0.2463, 0.2451, 0.244, 0.2428, 0.2417, 0.2405, 0.2394, 0.2382],
        [0.1223, 0.1198, 0.1174, 0.1149, 0.1124, 0.11, 0.1075, 0.1051, 0.1027, 0.1003],
        [0.0586, 0.0549, 0.0512, 0.0475, 0.0439, 0.0402, 0.0366, 0.033, 0.0294, 0.0258],
        [0.0263, 0.0215, 0.0167, 0.012, 0.0073, 0.0026, -0.0021, -0.0067, -0.0113, -0.0159]])),
    "RMSprop": ({"centered": True}, _tiled(0.9967, 0.9933, 0.9908, 0.9885, 0.9864)),
    "Adagrad": ({"learning_rate": 0.2, "initial_accumulator_value": 0.3, "epsilon": 1e-6},
                np.array([
        [0.9963, 0.9963, 0.9963, 0.9963, 0.9963, 0.9963, 0.9963, 0.9963, 0.9963, 0.9963],
        [0.9604, 0.9278, 0.9003, 0.8784, 0.8615, 0.8487, 0.8388, 0.8313, 0.8255, 0.8209],
        [0.9251, 0.8629, 0.8137, 0.7768, 0.7497, 0.7298, 0.7151, 0.704, 0.6956, 0.6891],
        [0.8903, 0.8012, 0.7342, 0.6862, 0.6521, 0.6277, 0.6099, 0.5967, 0.5867, 0.579],
        [0.856, 0.7422, 0.6604, 0.6037, 0.5644, 0.5367, 0.5168, 0.5021, 0.491, 0.4825]])),
    "Adadelta": ({"learning_rate": 1.0, "rho": 0.8, "epsilon": 1e-6},
                 _tiled(0.9978, 0.9947, 0.9915, 0.9882, 0.9849)),
    "Adamax": ({"learning_rate": 0.2, "beta_1": 0.85, "beta_2": 0.95, "epsilon": 1e-6},
               np.array([
        [0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8],
        [0.6827, 0.6873, 0.6888, 0.6896, 0.6901, 0.6904, 0.6906, 0.6908, 0.6909, 0.691],
        [0.5333, 0.5407, 0.5431, 0.5444, 0.5451, 0.5456, 0.546, 0.5462, 0.5464, 0.5466],
        [0.368, 0.3773, 0.3804, 0.382, 0.3829, 0.3835, 0.384, 0.3843, 0.3846, 0.3848],
        [0.1933, 0.204, 0.2076, 0.2094, 0.2105, 0.2112, 0.2117, 0.2121, 0.2124, 0.2126]])),
    "Nadam": ({"learning_rate": 0.5, "beta_1": 0.5, "beta_2": 0.67, "epsilon": 1e-5},
              np.array([
        [0.4281, 0.4281, 0.4281, 0.4281, 0.4281, 0.4281, 0.4281, 0.4281, 0.4281, 0.4281],
        [-0.1738, -0.1731, -0.1726, -0.1723, -0.1721, -0.172, -0.1719, -0.1718, -0.1718, -0.1717],
        [-0.7115, -0.7103, -0.7096, -0.7092, -0.709, -0.7088, -0.7086, -0.7085, -0.7085, -0.7084],
        [-1.2335, -1.2322, -1.2313, -1.2309, -1.2306, -1.2304, -1.2302, -1.2301, -1.23, -1.2299],
        [-1.7492, -1.7478, -1.7469, -1.7464, -1.7461, -1.7459, -1.7457, -1.7456, -1.7455, -1.7454],
    ])),
    "Ftrl": ({"learning_rate": 0.05, "learning_rate_power": -0.2,
              "initial_accumulator_value": 0.4, "l1_regularization_strength": 0.05,
              "l2_regularization_strength": 0.15, "l2_shrinkage_regularization_strength": 0.01,
              "beta": 0.3}, np.array([
        [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        [-0.0034, -0.0077, -0.0118, -0.0157, -0.0194, -0.023, -0.0263, -0.0294, -0.0325, -0.0354],
        [-0.0078, -0.0162, -0.0242, -0.0317, -0.0387, -0.0454, -0.0516, -0.0575, -0.0631, -0.0685],
        [-0.0121, -0.0246, -0.0363, -0.0472, -0.0573, -0.0668, -0.0757, -0.0842, -0.0922, -0.0999],
        [-0.0164, -0.0328, -0.0481, -0.0623, -0.0753, -0.0875, -0.099, -0.1098, -0.1201, -0.1299],
    ])),
    "Lion": ({}, _tiled(0.999, 0.998, 0.997, 0.996, 0.995)),
    "Lamb": ({}, _tiled(0.999, 0.9982, 0.9974, 0.9965, 0.9955)),
}


@pytest.mark.parametrize("name", sorted(GOLDENS))
def test_keras_golden(name):
    arguments, golden = GOLDENS[name]
    optimizer = getattr(optimizers, name)(**arguments)
    x = tf.Variable(np.ones(10), dtype=tf.float32)
    grads = tf.constant(np.arange(0.1, 1.1, 0.1), tf.float32)
    optimizer.apply_gradients([(tf.fill([10], 0.01), x)])
    for step in range(5):
        np.testing.assert_allclose(x.numpy(), golden[step], rtol=5e-4, atol=5e-4,
                                   err_msg=f"{name} after step {step + 1}")
        optimizer.apply_gradients([(grads, x)])


# ------------------------------------------- float64: exact hyperparameters, unlike Keras

def _numpy_adamw(w, grads, lr=0.1, weight_decay=0.004, beta_1=0.9, beta_2=0.999, epsilon=1e-7):
    m = v = np.zeros_like(w)
    for t, g in enumerate(grads, 1):
        w = w - w * weight_decay * lr
        m, v = m + (g - m) * (1 - beta_1), v + (g * g - v) * (1 - beta_2)
        w = w - m * (lr * np.sqrt(1 - beta_2**t) / (1 - beta_1**t)) / (np.sqrt(v) + epsilon)
    return w


def _numpy_nadam(w, grads, lr=0.1, beta_1=0.9, beta_2=0.999, epsilon=1e-7):
    m = v = np.zeros_like(w)
    product = 1.0
    for t, g in enumerate(grads, 1):
        u_t, u_next = (beta_1 * (1 - 0.5 * 0.96**s) for s in (t, t + 1))
        product = product * beta_1 * (1 - 0.5 * 0.96**t)
        m, v = m + (g - m) * (1 - beta_1), v + (g * g - v) * (1 - beta_2)
        m_hat = u_next * m / (1 - product * u_next) + (1 - u_t) * g / (1 - product)
        w = w - m_hat * lr / (np.sqrt(v / (1 - beta_2**t)) + epsilon)
    return w


@pytest.mark.parametrize("name, reference", [("AdamW", _numpy_adamw), ("Nadam", _numpy_nadam)])
def test_float64_keeps_the_default_betas_exact(name, reference):
    grads = [np.full(10, 0.01)] + [np.arange(1, 11) / 10.0] * 5
    want = reference(np.ones(10), grads)
    results = {}
    for library in (optimizers, keras.optimizers):
        x = tf.Variable(np.ones(10), dtype=tf.float64)
        optimizer = getattr(library, name)(learning_rate=0.1)
        for g in grads:
            optimizer.apply_gradients([(tf.constant(g), x)])
        results[library] = x.numpy()
    np.testing.assert_allclose(results[optimizers], want, rtol=1e-13, atol=0)
    # Keras casts 0.9 and 0.999 through float32 (0.99900001287...): off by far more.
    assert np.abs(results[keras.optimizers] - want).max() > 1e-9
