"""`SwapEMAWeights`: evaluate with the optimizer's moving average of the weights (Keras's)."""

from __future__ import annotations

from graphfit.callbacks.callback import Callback
from graphfit.core.registry import CALLBACKS

__all__ = ["SwapEMAWeights"]


@CALLBACKS.register
class SwapEMAWeights(Callback):
    """Swaps the model's weights with the optimizer's moving average around evaluation.

    For an optimizer with `use_ema=True` (Keras's `keras.callbacks.SwapEMAWeights`): before
    each validation or test evaluation, and before `predict`, the model's trainable weights
    and their averages exchange values; afterwards they are exchanged back, so training goes
    on from its own weights while the validation metrics describe the average. With
    `swap_on_epoch=True` the average is also in the model between `on_epoch_end` and the next
    `on_epoch_begin`, so callbacks listed after this one (`ModelCheckpoint`) see it. A
    training checkpoint written then (`BackupAndRestore`, a recipe's run checkpoints) records
    that the averages are swapped in, so a fit resumed from it swaps back at its first epoch
    and goes on exactly as the uninterrupted fit (Keras's, with its `BackupAndRestore` after
    this callback, would train on from the average).

    The exchange is exact (a copy; Keras's TensorFlow version adds and subtracts, which can
    round). Differences from Keras: after `predict` the weights are swapped back (Keras
    leaves the average in the model); and when `fit` stops early with `swap_on_epoch`, the
    model keeps the average (Keras's `finalize` would then put the raw weights in it).

    Args:
        swap_on_epoch: also swap at the end of each epoch (and back at the next one's start).

    Raises:
        ValueError: at the first swap, when the optimizer has no moving average (Keras's
            message; `check_model`, which `graphfit validate` runs, says so before
            training), or if `swap_on_epoch` is not a bool.

    Example:

        >>> import numpy as np, graphfit as gf
        >>> from graphfit import layers, optimizers
        >>> model = gf.Sequential([layers.Dense(1)], input_shape=(2,))
        >>> model.compile(optimizer=optimizers.SGD(0.1, use_ema=True), loss="mse")
        >>> x, y = np.ones((4, 2)), np.ones((4, 1))
        >>> history = model.fit(x, y, epochs=2, validation_data=(x, y), verbose=0,
        ...                     callbacks=[gf.callbacks.SwapEMAWeights()])
        >>> sorted(history.history)
        ['loss', 'val_loss']
    """

    def __init__(self, swap_on_epoch: bool = False):
        super().__init__()
        if not isinstance(swap_on_epoch, bool):
            raise ValueError(f"swap_on_epoch must be a bool. Received: "
                             f"swap_on_epoch={swap_on_epoch!r}")
        self.swap_on_epoch = swap_on_epoch
        self._swapped_here = False  # for an evaluation or prediction, by this callback

    def check_model(self, model) -> None:
        """Refuses a model whose optimizer keeps no moving average (no `use_ema=True`, or a
        second-order optimizer), which the first swap would refuse (Keras's message)."""
        self._averages(model)

    def _averages(self, model=None) -> list:
        """The moving averages to swap: the optimizer's, or, for a MultiOptimizer (also under
        a LossScaleOptimizer), those of its optimizers with `use_ema=True`, as Keras."""
        optimizer = getattr(self.model if model is None else model, "optimizer", None)
        inner = getattr(getattr(optimizer, "inner_optimizer", optimizer), "optimizers", None)
        averages = [getattr(each, "moving_average", None) for each in (inner or [optimizer])]
        averages = [average for average in averages if average is not None]
        base = getattr(optimizer, "inner_optimizer", optimizer)
        if not averages and optimizer is not None and inner is None \
                and not hasattr(base, "use_ema"):  # Levenberg–Marquardt
            raise ValueError(
                "SwapEMAWeights must be used when `use_ema=True` is set on the optimizer. "
                f"{type(base).__name__} keeps no moving average: use_ema is an option of "
                "first-order optimizers. Use one with use_ema=True, or leave SwapEMAWeights "
                "out.")
        if not averages:
            raise ValueError(
                "SwapEMAWeights must be used when `use_ema=True` is set on the optimizer "
                f"(on at least one of a MultiOptimizer's). Received: "
                f"use_ema={getattr(optimizer, 'use_ema', False)} (optimizer {optimizer!r}).")
        return averages

    def _swap_in(self) -> bool:
        swapped = False
        for average in self._averages():
            if not average.swapped:
                average.swap()
                swapped = True
        return swapped

    def _swap_out(self) -> None:
        for average in self._averages():
            if average.swapped:
                average.swap()

    def on_epoch_begin(self, epoch, logs=None):
        if self.swap_on_epoch:
            self._swap_out()

    def on_epoch_end(self, epoch, logs=None):
        if self.swap_on_epoch:
            self._swap_in()

    def on_test_begin(self, logs=None, stage: str = "test"):
        self._swapped_here = self._swap_in()

    def on_test_end(self, logs=None, stage: str = "test"):
        if self._swapped_here:
            self._swap_out()
            self._swapped_here = False

    def on_predict_begin(self, logs=None):
        self._swapped_here = self._swap_in()

    def on_predict_end(self, logs=None):
        self.on_test_end()
