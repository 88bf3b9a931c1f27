"""A user layer with a batch check and a user gradient transform, written only against
graphfit's public API (docs/guides/architecture.md), for the tests that run them under XLA,
`steps_per_execution` and MirroredStrategy."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers
from graphfit.optimizers import after_update, transforms


class SquareRoot(gf.Layer):
    """sqrt of its inputs, which must not be negative (checked on every batch)."""

    def batch_checks(self, inputs, training):
        return [(tf.reduce_all(inputs >= 0),
                 f"SquareRoot {self.name!r}: inputs must be >= 0; take the absolute value "
                 f"or shift the features")]

    def call(self, x, training=False):
        return tf.sqrt(x)


class HalveAndCount(transforms.GradientTransform):
    """Halves every gradient, and counts the steps it saw in a variable of its own."""

    def build(self, optimizer):
        self.steps = optimizer.add_variable("halve_and_count_steps", 0, dtype=tf.int64)

    def __call__(self, grads):
        self.steps.assign_add(1)
        return [0.5 * g for g in grads]


LEARNING_RATE = 0.1
X = np.random.default_rng(0).uniform(0.0, 4.0, size=(64, 3))
Y = np.sum(np.sqrt(X), axis=1, keepdims=True) + 0.1


def model(dtype="float64"):
    """The same weights on every call (seeded), built now."""
    gf.set_seed(7)
    built = gf.Sequential([SquareRoot(name="root"), layers.Dense(4, activation="tanh"),
                           layers.Dense(1)], dtype=dtype)
    built.build_for(tf.TensorSpec([None, 3], tf.as_dtype(dtype)), "x")
    return built


def compiled(transform: HalveAndCount | None, **compile_arguments):
    """`model()` with SGD: `transform` halving its gradients, or (None) a half learning rate,
    the same updates, for the reference."""
    optimizer = (optimizers.SGD(LEARNING_RATE, gradient_transforms=[transform])
                 if transform is not None else optimizers.SGD(LEARNING_RATE / 2))
    built = model()
    built.compile(optimizer=optimizer, loss="mse", **compile_arguments)
    return built


def with_negative_row(row: int) -> np.ndarray:
    x = X.copy()
    x[row, 1] = -1.0
    return x


def max_difference(a, b) -> float:
    return max(float(np.max(np.abs(u - v))) for u, v in zip(a, b))


class WeightAverage(after_update.AfterUpdate):
    """An exponential moving average of the weights, updated after every step."""

    def __init__(self, decay: float):
        self.decay = decay
        self.averages: dict = {}

    def build(self, optimizer, variables):
        for variable in variables:
            self.averages[variable.ref()] = optimizer.add_variable(
                f"average_{len(self.averages)}", variable, dtype=variable.dtype)

    def __call__(self, variables, step):
        for variable in variables:
            average = self.averages[variable.ref()]
            average.assign(self.decay * average + (1 - self.decay) * variable)
