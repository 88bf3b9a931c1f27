"""Callbacks that change the optimizer's learning rate between epochs.

`ReduceLROnPlateau` lowers it when a monitored quantity stops improving; `LearningRateScheduler`
sets it at the start of every epoch from a schedule. Both follow Keras 3: they write the rate
through `model.optimizer.learning_rate = value` (a graphfit optimizer assigns its learning-rate
variable, which the compiled training step reads at every execution, so nothing is retraced)
and put the rate the epoch trained with into the epoch logs as "learning_rate", where `History`,
`CSVLogger` and the progress bar listed after them see it.

An optimizer created with a `LearningRateSchedule` computes its rate from the step count, so
these callbacks refuse it at the start of training with a clear error rather than silently
doing nothing. A `MultiOptimizer` has no rate of its own: as Keras 3.15's, they set each of
its `optimizers`' rate and log it as "learning_rate_<name of the optimizer>".
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Callable

import numpy as np

from graphfit.callbacks.callback import Callback
from graphfit.callbacks.early_stopping import MonitorCallback
from graphfit.core import validation
from graphfit.core.registry import CALLBACKS

__all__ = ["LearningRateScheduler", "ReduceLROnPlateau"]


def _optimizer(callback: Callback):
    optimizer = getattr(callback.model, "optimizer", None)
    if optimizer is None:
        raise ValueError(
            f"{type(callback).__name__} needs a compiled model whose optimizer has a "
            f"'learning_rate' attribute. Received optimizer: {optimizer!r}"
        )
    if not hasattr(optimizer, "learning_rate") and not _inner_optimizers(optimizer):
        stepper = getattr(optimizer, "inner_optimizer", optimizer)  # a LossScaleOptimizer's
        raise ValueError(
            f"{type(callback).__name__} would change nothing: {type(stepper).__name__} has "
            f"no learning rate (a second-order optimizer solves for the length of each "
            f"step). Remove the callback.")
    return optimizer


def _inner_optimizers(optimizer) -> list:
    """A MultiOptimizer's `optimizers` (also under a LossScaleOptimizer), else []."""
    return list(getattr(getattr(optimizer, "inner_optimizer", optimizer), "optimizers", ()))


def rated_optimizers(callback: Callback) -> dict:
    """{log key: optimizer} of the rates the callback sets: {"learning_rate": the model's
    optimizer}, or, for a MultiOptimizer, {"learning_rate_<name>": each of its optimizers}."""
    optimizer = _optimizer(callback)
    inner = _inner_optimizers(optimizer)
    if not inner:
        return {"learning_rate": optimizer}
    return {f"learning_rate_{each.name}": each for each in inner}


def read_learning_rate(optimizer) -> float:
    """The optimizer's current learning rate as a Python float."""
    return float(np.asarray(optimizer.learning_rate))


def set_learning_rate(optimizer, value: float, who: str) -> None:
    """`optimizer.learning_rate = value`, with a clear error for a schedule-driven optimizer.

    Raises:
        TypeError: when the optimizer follows a `LearningRateSchedule`.
    """
    try:
        optimizer.learning_rate = value
    except TypeError as error:
        raise TypeError(
            f"{who} cannot change a learning rate that follows a schedule: the optimizer "
            f"{getattr(optimizer, 'name', '')!r} was created with a LearningRateSchedule as "
            f"its learning_rate. Give the optimizer a float learning_rate, or use the schedule "
            f"alone. ({error})"
        ) from None


def _check_settable(callback: Callback) -> None:
    # Assigning the current value changes nothing but fails at once on a schedule, before
    # any epoch is spent.
    for optimizer in rated_optimizers(callback).values():
        set_learning_rate(optimizer, read_learning_rate(optimizer), type(callback).__name__)


_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _as_rate(value, where: str) -> float:
    """A learning rate from user data: a finite number >= 0 that fits the optimizer's float32
    variable (a NumPy scalar or 0-d tensor is fine; a string such as "0.1" is not a number)."""
    try:
        array = None if isinstance(value, (str, bytes)) else np.asarray(value)
    except Exception:  # an object NumPy cannot read is not a number either
        array = None
    if array is None or array.ndim != 0 or array.dtype.kind not in "iuf":
        raise ValueError(f"{where} must be a learning rate (a number >= 0, without quotes). "
                         f"Received: {where}={value!r}")
    rate = float(array)
    if not math.isfinite(rate) or rate < 0:
        raise ValueError(f"{where} must be a learning rate (a finite number >= 0). "
                         f"Received: {where}={value!r}")
    if rate > _FLOAT32_MAX:
        raise ValueError(f"{where} is too large: {rate!r} overflows float32 (largest about "
                         f"3.4e+38), the learning rate's type. Received: {where}={value!r}")
    return rate


@CALLBACKS.register
class ReduceLROnPlateau(MonitorCallback):
    """Multiplies the learning rate by `factor` when `monitor` stops improving (Keras).

    At each epoch end, a value better than the best by more than `min_delta` resets the count
    of epochs without improvement; after `patience` such epochs the rate becomes
    `max(lr * factor, min_lr)` and, for `cooldown` epochs, no count is kept. A rate already at
    `min_lr` (compared in float32, as Keras does) is left alone. The rate the epoch used is
    logged as "learning_rate".

    Args:
        monitor: the log key to watch.
        factor: the multiplier, in (0, 1).
        patience: epochs without improvement before reducing (>= 0).
        verbose: 0 silent; 1 or 2 print each reduction.
        mode: "auto", "min" or "max" (see `MonitorCallback`).
        min_delta: the smallest change that counts as an improvement (>= 0).
        cooldown: epochs to wait after a reduction before counting again (>= 0).
        min_lr: the lowest rate (>= 0).

    Raises:
        ValueError: for a bad argument (named, with the value received).
        TypeError: at the start of training, if the optimizer follows a schedule.

    Example:

        >>> import graphfit as gf
        >>> x, y = gf.datasets.make_moons(n_samples=64)
        >>> model = gf.Sequential([gf.layers.Dense(1)])
        >>> model.compile(optimizer=gf.optimizers.SGD(0.1), loss="mse", jit_compile=False)
        >>> reduce = gf.callbacks.ReduceLROnPlateau("loss", factor=0.5, patience=0,
        ...                                         min_delta=10.0)
        >>> history = model.fit(x, y, epochs=4, verbose=0, callbacks=[reduce])
        >>> [round(lr, 4) for lr in history.history["learning_rate"]]
        [0.1, 0.1, 0.05, 0.025]
    """

    def __init__(
        self,
        monitor: str = "val_loss",
        factor: float = 0.1,
        patience: int = 10,
        verbose: int = 0,
        mode: str = "auto",
        min_delta: float = 1e-4,
        cooldown: int = 0,
        min_lr: float = 0.0,
    ):
        super().__init__(monitor, mode, min_delta)
        validation.finite_number("factor", factor)
        if not 0.0 < factor < 1.0:
            raise ValueError("ReduceLROnPlateau needs a factor in (0, 1): new_lr = lr * factor. "
                             f"Received: factor={factor!r}")
        validation.non_negative_int("patience", patience)
        validation.verbosity(verbose)
        validation.non_negative_int("cooldown", cooldown)
        validation.finite_number("min_lr", min_lr, minimum=0.0)
        self.factor = float(factor)
        self.patience = int(patience)
        self.verbose = verbose
        self.cooldown = int(cooldown)
        self.min_lr = float(min_lr)
        self._reset()

    def _reset(self) -> None:
        self.best: float | None = None
        self.cooldown_counter = 0
        self.wait = 0

    def in_cooldown(self) -> bool:
        """Whether the epochs after a reduction are still being skipped."""
        return self.cooldown_counter > 0

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._reset()
        _check_settable(self)

    def on_epoch_end(self, epoch, logs=None):
        logs = logs if logs is not None else {}
        rated = rated_optimizers(self)
        logs.update({key: read_learning_rate(each) for key, each in rated.items()})
        self.resolve_direction(logs)  # as Keras 3 (and EarlyStopping): before the value
        current = self.monitored_value(logs, "Learning rate reduction")
        if current is None:
            return
        current = float(current)
        if self.in_cooldown():
            self.cooldown_counter -= 1
            self.wait = 0
        if self.is_improvement(current, self.best):
            self.best = current
            self.wait = 0
        elif not self.in_cooldown():
            self.wait += 1
            if self.wait >= self.patience and any(  # a list: every optimizer reduces
                    [self._reduce(each, epoch) for each in rated.values()]):
                self.cooldown_counter = self.cooldown
                self.wait = 0

    def _reduce(self, optimizer, epoch: int) -> bool:
        old_lr = read_learning_rate(optimizer)
        if not np.float32(old_lr) > np.float32(self.min_lr):
            return False
        new_lr = max(old_lr * self.factor, self.min_lr)
        set_learning_rate(optimizer, new_lr, "ReduceLROnPlateau")
        if self.verbose:
            print(f"\nEpoch {epoch + 1}: ReduceLROnPlateau reducing learning rate to {new_lr}.")
        return True


def _check_schedule(schedule) -> Callable[[int, float], Any] | list[float] | dict[int, float]:
    """The schedule in a canonical form; ValueError naming what is wrong."""
    if callable(schedule):
        return schedule
    if isinstance(schedule, (list, tuple)):
        if not schedule:
            raise ValueError("schedule must not be an empty list. Received: schedule=[]")
        return [_as_rate(v, f"schedule[{i}]") for i, v in enumerate(schedule)]
    if isinstance(schedule, dict):
        if not schedule:
            raise ValueError("schedule must not be an empty dict. Received: schedule={}")
        points = {}
        for key, value in schedule.items():
            epoch = key
            if isinstance(key, str) and key.strip().isdigit():
                epoch = int(key)  # JSON and some YAML writers quote mapping keys
            if isinstance(epoch, bool) or not isinstance(epoch, numbers.Integral) or epoch < 0:
                raise ValueError(
                    "schedule keys must be epoch indices (integers >= 0, counted from 0). "
                    f"Received: schedule[{key!r}]={value!r}")
            points[int(epoch)] = _as_rate(value, f"schedule[{key!r}]")
        return dict(sorted(points.items()))
    raise ValueError(
        "schedule must be a function (epoch, lr) -> lr, a list of learning rates (one per "
        "epoch, the last one repeats) or a dict {epoch: lr} of change points. "
        f"Received: schedule={schedule!r}")


@CALLBACKS.register
class LearningRateScheduler(Callback):
    """Sets the learning rate at the start of each epoch from a schedule (Keras, extended).

    The schedule is one of:

    - a function `(epoch, lr) -> new_lr` (Keras's form; a function of `epoch` alone works
      too), where `epoch` counts from 0 and `lr` is the current rate;
    - a list of rates, one per epoch, the last repeating (`[0.1, 0.1, 0.01]`);
    - a dict of change points `{epoch: rate}` (`{0: 0.1, 10: 0.01}`): from each key on, its
      rate; epochs before the first key use the rate the optimizer had when training began.

    The two data forms are plain YAML, so a recipe can write
    `{type: LearningRateScheduler, schedule: {0: 0.1, 10: 0.01}}`. Epoch numbers are those of
    `fit` (`initial_epoch` included). The rate the epoch used is logged as "learning_rate".

    Args:
        schedule: the function, list or dict described above.
        verbose: 0 silent; 1 or 2 print the rate set at each epoch.

    Raises:
        ValueError: for a bad schedule, or when the function returns something that is not a
            number >= 0.
        TypeError: at the first epoch, if the optimizer follows a schedule of its own.

    Example:

        >>> import graphfit as gf
        >>> x, y = gf.datasets.make_moons(n_samples=64)
        >>> model = gf.Sequential([gf.layers.Dense(1)])
        >>> model.compile(optimizer=gf.optimizers.SGD(0.1), loss="mse", jit_compile=False)
        >>> scheduler = gf.callbacks.LearningRateScheduler({0: 0.1, 2: 0.01})
        >>> history = model.fit(x, y, epochs=3, verbose=0, callbacks=[scheduler])
        >>> [round(lr, 4) for lr in history.history["learning_rate"]]
        [0.1, 0.1, 0.01]
    """

    def __init__(self, schedule, verbose: int = 0):
        super().__init__()
        validation.verbosity(verbose)
        self.schedule = schedule
        self._schedule = _check_schedule(schedule)
        self.verbose = verbose
        self._initial_lrs: dict[str, float] = {}

    def on_train_begin(self, logs=None):
        self._initial_lrs = {key: read_learning_rate(each)
                             for key, each in rated_optimizers(self).items()}

    def rate_for(self, epoch: int, current_lr: float, initial_lr: float | None = None) -> float:
        """The learning rate the schedule gives epoch `epoch` (0-based), for an optimizer at
        `current_lr` that began training at `initial_lr` (default: the model's optimizer's)."""
        schedule = self._schedule
        if isinstance(schedule, list):
            return schedule[min(epoch, len(schedule) - 1)]
        if isinstance(schedule, dict):
            if initial_lr is None:
                initial_lr = self._initial_lrs.get("learning_rate")
            rate = initial_lr if initial_lr is not None else current_lr
            for start, value in schedule.items():
                if start > epoch:
                    break
                rate = value
            return rate
        try:
            value = schedule(epoch, current_lr)
        except TypeError:  # Keras's older form: schedule(epoch)
            value = schedule(epoch)
        return _as_rate(value, "The output of the schedule function")

    def on_epoch_begin(self, epoch, logs=None):
        rated = rated_optimizers(self)
        for key, optimizer in rated.items():
            rate = self.rate_for(epoch, read_learning_rate(optimizer), self._initial_lrs.get(key))
            set_learning_rate(optimizer, rate, "LearningRateScheduler")
            if self.verbose:
                whose = f"{optimizer.name} " if len(rated) > 1 else ""
                print(f"\nEpoch {epoch + 1}: LearningRateScheduler setting {whose}learning rate "
                      f"to {rate}.")

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs.update({key: read_learning_rate(each)
                         for key, each in rated_optimizers(self).items()})
