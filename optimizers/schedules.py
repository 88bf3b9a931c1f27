"""Learning-rate schedules: Keras's own, accepted as they are.

A learning rate is a non-negative float, a `keras.optimizers.schedules`
`LearningRateSchedule`, which the optimizer evaluates at its step counter at every step (as
Keras does; under gradient accumulation, the counter of batches, not of updates), or a
zero-argument callable returning the rate, called at every step (Keras accepts one too: in a
compiled step it is called when the step is traced, so it should read a `tf.Variable` to
change between executions). graphfit writes no schedules of its own: the Keras classes are
re-exported here, and `get` also rebuilds one from a config, so a recipe can say

    learning_rate: {type: ExponentialDecay, initial_learning_rate: 0.1,
                    decay_steps: 100, decay_rate: 0.5}

or use the Keras form `{class_name: ExponentialDecay, config: {...}}`.

Example:

    >>> from graphfit.optimizers import schedules
    >>> schedule = schedules.get({"type": "ExponentialDecay", "initial_learning_rate": 0.1,
    ...                           "decay_steps": 10, "decay_rate": 0.5})
    >>> round(float(schedule(10)), 6)
    0.05
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import keras

from graphfit.core import registry

__all__ = [
    "LearningRateSchedule",
    "ExponentialDecay",
    "PiecewiseConstantDecay",
    "PolynomialDecay",
    "InverseTimeDecay",
    "CosineDecay",
    "CosineDecayRestarts",
    "get",
    "serialize",
    "deserialize",
    "BUILT_IN",
]

LearningRateSchedule = keras.optimizers.schedules.LearningRateSchedule
ExponentialDecay = keras.optimizers.schedules.ExponentialDecay
PiecewiseConstantDecay = keras.optimizers.schedules.PiecewiseConstantDecay
PolynomialDecay = keras.optimizers.schedules.PolynomialDecay
InverseTimeDecay = keras.optimizers.schedules.InverseTimeDecay
CosineDecay = keras.optimizers.schedules.CosineDecay
CosineDecayRestarts = keras.optimizers.schedules.CosineDecayRestarts
serialize = keras.optimizers.schedules.serialize

# The names of the Keras schedules a config may use (`type:` or `class_name:`).
BUILT_IN = (
    "ExponentialDecay",
    "PiecewiseConstantDecay",
    "PolynomialDecay",
    "InverseTimeDecay",
    "CosineDecay",
    "CosineDecayRestarts",
)


def deserialize(config: dict[str, Any]) -> LearningRateSchedule:
    """A schedule from `{"class_name": ..., "config": {...}}` or `{"type": ..., **args}`.

    Raises:
        ValueError: for an unknown schedule name (with the closest known name) or bad
            arguments.
    """
    config = dict(config)
    if "class_name" not in config:
        name = config.pop("type", None)
        config = {"class_name": name, "config": config}
    name = config["class_name"]
    try:
        schedule = keras.optimizers.schedules.deserialize(config)
        problem = None
    except (TypeError, ValueError) as error:
        schedule, problem = None, f" Keras said: {error}"
    if not isinstance(schedule, LearningRateSchedule):
        hint = registry.did_you_mean(str(name), BUILT_IN)
        raise ValueError(
            f"Could not build the learning-rate schedule {name!r}.{hint} Known schedules: "
            f"{', '.join(BUILT_IN)}.{problem or ''}"
        )
    return schedule


def get(learning_rate):
    """Resolves an optimizer's `learning_rate` argument.

    Args:
        learning_rate: a non-negative number, a `LearningRateSchedule`, a schedule config
            (see `deserialize`) or a zero-argument callable returning the rate.

    Returns:
        A Python float, a `LearningRateSchedule` or the callable.

    Raises:
        ValueError: if `learning_rate` is none of these, or a negative or non-finite number.
    """
    if isinstance(learning_rate, LearningRateSchedule):
        return learning_rate
    if isinstance(learning_rate, dict):
        return deserialize(learning_rate)
    if callable(learning_rate) and not isinstance(learning_rate, type):
        return learning_rate  # Keras: a callable with no arguments, called at each step
    if (
        isinstance(learning_rate, numbers.Real)
        and not isinstance(learning_rate, bool)
        and math.isfinite(learning_rate)
        and learning_rate >= 0
    ):
        return float(learning_rate)
    raise ValueError(
        "learning_rate must be a non-negative float, a "
        "keras.optimizers.schedules.LearningRateSchedule, a schedule config such as "
        "{'type': 'ExponentialDecay', ...}, or a callable with no arguments returning the "
        "rate. "
        f"Received: learning_rate={learning_rate!r}"
    )
