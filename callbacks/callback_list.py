"""`CallbackList`: holds a model's callbacks and calls each hook on all of them."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Iterable

from graphfit.callbacks.callback import STAGES, Callback
from graphfit.core import validation
from graphfit.core.keras_objects import is_keras_object, keras_object_hint

__all__ = ["CallbackList"]


@functools.lru_cache(maxsize=None)
def _takes_stage(function) -> bool:
    """Whether a hook accepts `stage=` (hooks written for Keras do not)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(
        p.name == "stage" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters
    )


def _call_staged(method, *args, stage: str) -> None:
    if _takes_stage(getattr(method, "__func__", method)):
        method(*args, stage=stage)
    else:
        method(*args)


def _flatten(callbacks) -> list:
    if callbacks is None:
        return []
    if isinstance(callbacks, (list, tuple)):
        return [c for item in callbacks for c in _flatten(item)]
    return [callbacks]


def _check_callback(callback) -> Callback:
    if isinstance(callback, Callback):
        return callback
    if isinstance(callback, type) and issubclass(callback, Callback):
        raise TypeError(
            f"callbacks must hold Callback instances, not classes. Received the class "
            f"{callback.__name__}; pass {callback.__name__}() instead."
        )
    if is_keras_object(callback):
        raise TypeError(keras_object_hint(callback, "callbacks received"))
    kind = type(callback)
    raise TypeError(
        f"callbacks must be graphfit.callbacks.Callback instances (or a list of them). "
        f"Received an object of type {kind.__module__}.{kind.__qualname__}: {callback!r}. "
        f"Subclass graphfit.callbacks.Callback to write your own."
    )



class CallbackList(Callback):
    """Holds a model's callbacks and calls each hook on all of them, in order.

    The order is Keras': the user's callbacks, then the `History`, then the `ProgressBar`,
    so both see any key a user callback adds to the logs. A `History` or `ProgressBar`
    already among the user's callbacks is used instead of adding a second one.

    Args:
        callbacks: a `Callback`, a list of them, or None.
        model: the model to hand to every callback (see `set_model`).
        add_history: add a `History` unless the user passed one.
        add_progress_bar: add a `ProgressBar(verbose=verbose)` unless the user passed one;
            nothing is added when `verbose` is 0.
        verbose: 0 (silent), 1 (progress bar), 2 (one line per epoch) or "auto" (1).
        params: the run parameters to hand to every callback (see `set_params`).

    Raises:
        TypeError: if an element of `callbacks` is not a `Callback`.
        ValueError: if `verbose` is not one of 0, 1, 2, "auto".

    Example:

        >>> import graphfit as gf
        >>> callbacks = gf.callbacks.CallbackList(add_history=True, params={"epochs": 1})
        >>> callbacks.on_train_begin()
        >>> callbacks.on_epoch_begin(0)
        >>> callbacks.on_epoch_end(0, {"loss": 0.25, "val_loss": 0.5})
        >>> callbacks.history.history
        {'loss': [0.25], 'val_loss': [0.5]}
        >>> callbacks.needs_train_batch_hooks
        False
    """

    def __init__(
        self,
        callbacks: Callback | Iterable[Callback] | None = None,
        *,
        model=None,
        add_history: bool = False,
        add_progress_bar: bool = False,
        verbose: int | str = 1,
        params: dict[str, Any] | None = None,
    ):
        super().__init__()
        verbose = validation.verbosity(verbose, allow_auto=True)
        # Imported here: both modules subclass Callback from this one.
        from graphfit.callbacks.history import History
        from graphfit.callbacks.progress import ProgressBar

        self.callbacks: list[Callback] = [_check_callback(c) for c in _flatten(callbacks)]
        self._history = next((c for c in self.callbacks if isinstance(c, History)), None)
        self._progress_bar = next(
            (c for c in self.callbacks if isinstance(c, ProgressBar)), None
        )
        if self._history is None and add_history:
            self._history = History()
            self.callbacks.append(self._history)
        if self._progress_bar is None and add_progress_bar and verbose:
            self._progress_bar = ProgressBar(verbose=verbose)
            self.callbacks.append(self._progress_bar)
        if model is not None:
            self.set_model(model)
        if params is not None:
            self.set_params(params)

    @property
    def history(self):
        """The `History` among the callbacks, or None."""
        return self._history

    @property
    def progress_bar(self):
        """The `ProgressBar` among the callbacks, or None."""
        return self._progress_bar

    def append(self, callback: Callback) -> None:
        """Adds a callback at the end, handing it the current model and params."""
        callback = _check_callback(callback)
        if self.model is not None:
            callback.set_model(self.model)
        if self.params:
            callback.set_params(self.params)
        self.callbacks.append(callback)

    def __iter__(self):
        return iter(self.callbacks)

    def __len__(self) -> int:
        return len(self.callbacks)

    def set_model(self, model) -> None:
        super().set_model(model)
        if model is not None and self._history is not None:
            model.history = self._history  # Keras convention: model.history is the History.
        for callback in self.callbacks:
            callback.set_model(model)

    def set_params(self, params: dict[str, Any] | None) -> None:
        super().set_params(params)
        for callback in self.callbacks:
            callback.set_params(params)

    @property
    def needs_train_batch_hooks(self) -> bool:
        """Whether any callback listens to training batches (else the loop may skip them)."""
        return self.implements_train_batch_hooks()

    @property
    def wants_every_train_batch(self) -> bool:
        """`wants_every_batch("train")`."""
        return self.wants_every_batch("train")

    def wants_every_batch(self, kind: str) -> bool:
        """Whether a callback other than the progress bar listens to the batches of `kind`
        ("train", "test" or "predict"); then `steps_per_execution="auto"` runs one step per
        call so it hears every batch, as Keras (whose default is one step) calls it."""
        return any(getattr(c, f"implements_{kind}_batch_hooks")() for c in self.callbacks
                   if c is not self._progress_bar)

    @property
    def needs_test_batch_hooks(self) -> bool:
        """Whether any callback listens to evaluation batches."""
        return self.implements_test_batch_hooks()

    @property
    def needs_predict_batch_hooks(self) -> bool:
        """Whether any callback listens to prediction batches."""
        return self.implements_predict_batch_hooks()

    def implements_train_batch_hooks(self) -> bool:
        return any(c.implements_train_batch_hooks() for c in self.callbacks)

    def implements_test_batch_hooks(self) -> bool:
        return any(c.implements_test_batch_hooks() for c in self.callbacks)

    def implements_predict_batch_hooks(self) -> bool:
        return any(c.implements_predict_batch_hooks() for c in self.callbacks)

    # Dispatch. One shallow copy of the logs per event, shared by all callbacks as in
    # Keras: a key a callback adds is seen by the later ones, never by the loop.
    def on_train_begin(self, logs=None):
        logs = dict(logs or {})
        for callback in self.callbacks:
            callback.on_train_begin(logs)

    def on_train_end(self, logs=None):
        logs = dict(logs or {})
        for callback in self.callbacks:
            callback.on_train_end(logs)

    @property
    def restores_weights(self) -> bool:
        return any(callback.restores_weights for callback in self.callbacks)

    def restore_final_weights(self) -> bool:
        changed = False
        for callback in self.callbacks:
            changed = callback.restore_final_weights() or changed
        return changed

    def on_epoch_begin(self, epoch, logs=None):
        logs = dict(logs or {})
        for callback in self.callbacks:
            callback.on_epoch_begin(epoch, logs)

    def on_epoch_end(self, epoch, logs=None):
        logs = dict(logs or {})
        for callback in self.callbacks:
            callback.on_epoch_end(epoch, logs)

    def on_test_begin(self, logs=None, stage="test"):
        _check_stage(stage)
        logs = dict(logs or {})
        for callback in self.callbacks:
            _call_staged(callback.on_test_begin, logs, stage=stage)

    def on_test_end(self, logs=None, stage="test"):
        _check_stage(stage)
        logs = dict(logs or {})
        for callback in self.callbacks:
            _call_staged(callback.on_test_end, logs, stage=stage)

    def on_predict_begin(self, logs=None):
        logs = dict(logs or {})
        for callback in self.callbacks:
            callback.on_predict_begin(logs)

    def on_predict_end(self, logs=None):
        logs = dict(logs or {})
        for callback in self.callbacks:
            callback.on_predict_end(logs)

    def on_train_batch_begin(self, batch, logs=None):
        logs = dict(logs or {})
        for callback in self.callbacks:
            callback.on_train_batch_begin(batch, logs=logs)

    def on_train_batch_end(self, batch, logs=None):
        logs = dict(logs or {})
        for callback in self.callbacks:
            callback.on_train_batch_end(batch, logs=logs)

    def on_batch_begin(self, batch, logs=None):
        self.on_train_batch_begin(batch, logs)

    def on_batch_end(self, batch, logs=None):
        self.on_train_batch_end(batch, logs)

    def on_test_batch_begin(self, batch, logs=None, stage="test"):
        logs = dict(logs or {})
        for callback in self.callbacks:
            _call_staged(callback.on_test_batch_begin, batch, logs, stage=stage)

    def on_test_batch_end(self, batch, logs=None, stage="test"):
        logs = dict(logs or {})
        for callback in self.callbacks:
            _call_staged(callback.on_test_batch_end, batch, logs, stage=stage)

    def on_predict_batch_begin(self, batch, logs=None):
        logs = dict(logs or {})
        for callback in self.callbacks:
            callback.on_predict_batch_begin(batch, logs=logs)

    def on_predict_batch_end(self, batch, logs=None):
        logs = dict(logs or {})
        for callback in self.callbacks:
            callback.on_predict_batch_end(batch, logs=logs)


def _check_stage(stage) -> None:
    if stage not in STAGES:
        raise ValueError(f"stage must be 'val' or 'test'. Received: stage={stage!r}")
