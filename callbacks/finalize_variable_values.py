"""`FinalizeVariableValues`: the end of `fit` for an optimizer whose weights need it.

Keras's `fit` calls `optimizer.finalize_variable_values(model.trainable_weights)` once its
epochs end, before `on_train_end`: with `use_ema=True` that puts the moving average of the
weights into the model. graphfit does it through this callback, which such an optimizer adds
to `fit` (`optimizer.fit_callbacks()`); it runs at `fit`'s end-of-training seam
(`restore_final_weights`), ahead of the user's callbacks, so `fit`'s last test evaluation
sees the final weights and `EarlyStopping(restore_best_weights=True)` still has the last word,
as in Keras (whose EarlyStopping restores in `on_train_end`, after the finalization).
"""

from __future__ import annotations

from graphfit.callbacks.callback import Callback

__all__ = ["FinalizeVariableValues"]


class FinalizeVariableValues(Callback):
    """Calls `model.optimizer.finalize_variable_values(model.trainable_variables)` when `fit`
    ends, if an epoch ran (see the module docstring). `fit` adds it for an optimizer with
    `use_ema=True`; a custom training loop may call it, or the optimizer's method, itself.

    Example:

        >>> import numpy as np, graphfit as gf
        >>> from graphfit import layers, optimizers
        >>> model = gf.Sequential([layers.Dense(1)], input_shape=(2,))
        >>> model.compile(optimizer=optimizers.SGD(0.1, use_ema=True), loss="mse")
        >>> [type(c).__name__ for c in model.optimizer.fit_callbacks()]
        ['FinalizeVariableValues']
        >>> _ = model.fit(np.ones((4, 2)), np.ones((4, 1)), epochs=2, verbose=0)
        >>> average = model.optimizer.moving_average.average_of(model.trainable_variables[0])
        >>> bool(np.array_equal(model.trainable_variables[0].numpy(), average.numpy()))
        True
    """

    restores_weights = True

    def __init__(self):
        super().__init__()
        self._epochs_run = 0
        self._done = False

    def on_train_begin(self, logs=None):
        self._epochs_run, self._done = 0, False

    def on_epoch_begin(self, epoch, logs=None):
        self._epochs_run += 1

    def restore_final_weights(self) -> bool:
        """Finalizes once per `fit`, after at least one epoch; returns whether the weights
        changed."""
        if self._done or not self._epochs_run or self.model is None:
            return False
        self._done = True
        optimizer = self.model.optimizer
        return bool(optimizer.finalize_variable_values(self.model.trainable_variables))

    def on_train_end(self, logs=None):
        self.restore_final_weights()  # fit has called it already; a custom loop may not
