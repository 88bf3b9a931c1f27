"""`LambdaCallback`: a callback made of plain functions, with Keras's arguments."""

from __future__ import annotations

import inspect

from graphfit.callbacks.callback import Callback
from graphfit.core.registry import did_you_mean

__all__ = ["LambdaCallback"]

#: The hooks a function can be given for, with the arguments Keras calls it with.
HOOK_ARGUMENTS = {
    "on_train_begin": "logs", "on_train_end": "logs",
    "on_epoch_begin": "epoch, logs", "on_epoch_end": "epoch, logs",
    "on_test_begin": "logs", "on_test_end": "logs",
    "on_predict_begin": "logs", "on_predict_end": "logs",
    "on_train_batch_begin": "batch, logs", "on_train_batch_end": "batch, logs",
    "on_batch_begin": "batch, logs", "on_batch_end": "batch, logs",
    "on_test_batch_begin": "batch, logs", "on_test_batch_end": "batch, logs",
    "on_predict_batch_begin": "batch, logs", "on_predict_batch_end": "batch, logs",
}


def _check_hook(name: str, function) -> None:
    if name not in HOOK_ARGUMENTS:
        raise ValueError(
            f"LambdaCallback has no hook {name!r}.{did_you_mean(name, HOOK_ARGUMENTS)} The "
            f"hooks are: {', '.join(HOOK_ARGUMENTS)}. (Keras keeps any other keyword as an "
            f"attribute that is never called; graphfit refuses it, so a misspelt hook is not "
            f"silently ignored.)")
    if not callable(function):
        raise TypeError(f"LambdaCallback's {name} must be a function of "
                        f"({HOOK_ARGUMENTS[name]}). Received: {name}={function!r}")
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return  # a builtin without a signature: it is called as it is
    arguments = HOOK_ARGUMENTS[name].split(", ")
    try:
        signature.bind(*arguments)  # the loops pass a batch hook's logs by keyword, too
        if arguments[0] == "batch":
            signature.bind("batch", logs="logs")
    except TypeError:
        raise TypeError(
            f"LambdaCallback's {name} is called with ({HOOK_ARGUMENTS[name]}), as in Keras, "
            f"but the function given takes {signature}. Write it as "
            f"lambda {HOOK_ARGUMENTS[name]}: ...") from None


class LambdaCallback(Callback):
    """A callback whose hooks are the functions given (Keras's `LambdaCallback`).

    Each function is called as Keras calls it: `on_epoch_begin` / `on_epoch_end` with
    `(epoch, logs)`; `on_train_begin` / `on_train_end` (and the test and predict ones) with
    `(logs)`; the batch hooks with `(batch, logs)`. The six named arguments are Keras's; any
    other hook of `Callback` may be given by its name (`on_test_begin=...`,
    `on_predict_batch_end=...`). Hooks not given do nothing.

    Unlike Keras, a keyword that names no hook is refused (Keras stores it as an attribute
    that nothing calls), and so is a function that cannot take the hook's arguments.

    Args:
        on_epoch_begin: a function, or None; so are on_epoch_end, on_train_begin,
            on_train_end, on_train_batch_begin and on_train_batch_end.
        **hooks: functions for other hooks, by the hook's name.

    Raises:
        ValueError: for a keyword that is not a hook (with the closest hook's name).
        TypeError: for a value that is not a function of the hook's arguments.

    Example:

        >>> import numpy as np, graphfit as gf
        >>> losses = []
        >>> record = LambdaCallback(on_epoch_end=lambda epoch, logs: losses.append(logs["loss"]))
        >>> model = gf.Sequential([gf.layers.Dense(1)])
        >>> model.compile(optimizer="sgd", loss="mse")
        >>> _ = model.fit(np.ones((8, 2)), np.ones((8, 1)), epochs=3, verbose=0,
        ...               callbacks=[record])
        >>> len(losses)
        3
    """

    def __init__(self, on_epoch_begin=None, on_epoch_end=None, on_train_begin=None,
                 on_train_end=None, on_train_batch_begin=None, on_train_batch_end=None,
                 **hooks):
        super().__init__()
        functions = dict(on_epoch_begin=on_epoch_begin, on_epoch_end=on_epoch_end,
                         on_train_begin=on_train_begin, on_train_end=on_train_end,
                         on_train_batch_begin=on_train_batch_begin,
                         on_train_batch_end=on_train_batch_end, **hooks)
        for name, function in functions.items():
            if function is None and name in HOOK_ARGUMENTS:
                continue
            _check_hook(name, function)
            setattr(self, name, function)  # an instance's function: an override (Keras)
