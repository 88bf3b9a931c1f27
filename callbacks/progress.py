"""`ProgressBar`: Keras-style progress output for `fit`, `evaluate` and `predict`.

Written by hand rather than wrapping `keras.utils.Progbar`, which always prints to
`sys.stdout`, decides on its own whether the display is dynamic, and knows nothing of stages.
"""

from __future__ import annotations

import io
import math
import sys
import time
from typing import Any, Callable, TextIO

import numpy as np

from graphfit.callbacks.callback import Callback
from graphfit.callbacks.chief import is_chief
from graphfit.core import validation
from graphfit.core.registry import CALLBACKS

__all__ = ["ProgressBar"]

_BAR_WIDTH = 20
_DONE, _TODO = "━", "─"


def format_value(value: Any) -> str:
    """A metric as Keras prints it: 4 decimals, scientific notation at or below 1e-3."""
    if isinstance(value, str):
        return value
    if isinstance(value, np.ndarray) and value.ndim:  # one value per threshold or class
        return "[" + " ".join(format_value(v) for v in value.reshape(-1)) + "]"
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    return f"{number:.4f}" if abs(number) > 1e-3 else f"{number:.4e}"


def format_logs(logs: dict[str, Any] | None) -> str:
    """'loss: 0.1234 - accuracy: 0.9688', in the order of the logs."""
    return " - ".join(f"{key}: {format_value(value)}" for key, value in (logs or {}).items())


def _format_eta(seconds: float) -> str:
    if seconds > 3600:
        return "%d:%02d:%02d" % (seconds // 3600, (seconds % 3600) // 60, seconds % 60)
    if seconds > 60:
        return "%d:%02d" % (seconds // 60, seconds % 60)
    return "%ds" % seconds


def _format_step_time(seconds: float) -> str:
    if seconds >= 1 or seconds == 0:
        return f"{seconds:.0f}s/step"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.0f}ms/step"
    return f"{seconds * 1e6:.0f}us/step"


def _join(*parts: str) -> str:
    return " - ".join(part for part in parts if part)


class _Run:
    """The timing and drawing state of one epoch, evaluation or prediction."""

    def __init__(self, target, stream, interactive: bool, clock: Callable[[], float]):
        self.target = target
        self.stream = stream
        self.interactive = interactive
        self.clock = clock
        self.start = clock()
        self.seen = 0
        self._first: tuple[float, int] | None = None  # (time, steps) at the first update
        self._last: tuple[float, int] | None = None
        self._last_draw: float | None = None
        self._drawn_width = 0

    def update(self, seen: int, logs) -> None:
        now = self.clock()
        self.seen = seen
        self._last = (now, seen)
        if self._first is None:
            self._first = self._last
        # Only a terminal can redraw a line; elsewhere only the final line is printed.
        if not self.interactive:
            return
        if self._last_draw is not None and now - self._last_draw < ProgressBar.REDRAW_INTERVAL:
            return
        self._last_draw = now
        self._write("\r" + self._padded(self.line(now, logs, final=False)))

    def finish(self, logs) -> None:
        now = self.clock()
        if self.target is None and self.seen:
            self.target = self.seen
        line = self.line(now, logs, final=True)
        self._write(("\r" + self._padded(line) if self.interactive else line) + "\n")

    def elapsed(self, now: float | None = None) -> float:
        return (self.clock() if now is None else now) - self.start

    def step_time(self, now: float) -> float:
        # The first execution includes tracing; leave it out once there is a later one.
        if self._first and self._last and self._last[1] > self._first[1]:
            return (self._last[0] - self._first[0]) / (self._last[1] - self._first[1])
        if self._last and self._last[1]:
            return (self._last[0] - self.start) / self._last[1]
        return (now - self.start) / self.target if self.target else 0.0

    def count(self, final: bool) -> str:
        done = self.target if final and self.target else self.seen
        if self.target:
            return f"{done:>{int(math.log10(self.target)) + 1}d}/{self.target}"
        return f"{done:>7d}/Unknown" if done or not final else ""

    def line(self, now: float, logs, final: bool) -> str:
        head = self.count(final)
        if self.target:
            done = self.target if final else min(self.seen, self.target)
            filled = int(_BAR_WIDTH * done / self.target)
            head += " " + _DONE * filled + _TODO * (_BAR_WIDTH - filled)
        step_time = self.step_time(now)
        if self.target and not final:
            timing = _format_eta(step_time * max(self.target - self.seen, 0))
        else:
            timing = f"{now - self.start:.0f}s"
        head = f"{head} {timing} {_format_step_time(step_time)}".lstrip()
        return _join(head, format_logs(logs))

    def _padded(self, line: str) -> str:
        # Blank out the tail of a longer line drawn before.
        padding = max(self._drawn_width - len(line), 0)
        self._drawn_width = len(line)
        return line + " " * padding

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()



class _Nowhere(io.StringIO):
    def write(self, text: str) -> int:
        return len(text)  # dropped: nothing accumulates


_NOWHERE = _Nowhere()

@CALLBACKS.register
class ProgressBar(Callback):
    """Prints training progress like Keras: a bar per epoch, or one line per epoch.

    With `verbose=1`, each epoch prints "Epoch 3/5", then a line with the steps done out of
    the total, a bar, the time left and the running metrics ("loss: 0.1234 - accuracy:
    0.9688"); it ends with the elapsed time, the time per step and the validation metrics.
    On a terminal the line is redrawn in place (at most every 0.05 s; the final state is
    always drawn); on any other stream (CI logs, pipes, files) only the final line is
    printed. When the number of steps is unknown the line shows the count without a bar or
    time left, and the first epoch's count becomes the total of the later ones. With
    `verbose=2` each epoch prints one line ("Epoch 3/5 - 2s - loss: ... - val_loss: ...").

    During `fit` the validation and test stages draw nothing; a test stage prints one line,
    "Test: loss: ... - accuracy: ...", after the line of the epoch it ran in (or at once
    when it runs after the last epoch). A standalone `evaluate` (an evaluation outside
    `on_train_begin`/`on_train_end`) or `predict` draws a bar over `params["steps"]` and
    ends with its metrics. The constructor's `verbose` wins over `params["verbose"]`, so a
    bar the user passes explicitly is always drawn.

    Args:
        verbose: 0 (silent), 1 (progress bar), 2 (one line per epoch) or "auto" (1).
        stream: where to write; None means `sys.stdout` at the time of writing.
        interactive: whether lines may be redrawn with "\\r"; None detects it
            (`stream.isatty()`, or a Jupyter kernel for the standard streams).

    Raises:
        ValueError: if `verbose` or `interactive` is not one of the values above.

    Example:

        >>> import io
        >>> import graphfit as gf
        >>> out = io.StringIO()
        >>> bar = gf.callbacks.ProgressBar(verbose=2, stream=out)
        >>> bar.set_params({"epochs": 5, "steps": 10, "verbose": 2})
        >>> bar.on_train_begin()
        >>> bar.on_epoch_begin(2)
        >>> bar.on_epoch_end(2, {"loss": 0.12345, "val_loss": 0.00012})
        >>> print(out.getvalue(), end="")
        Epoch 3/5 - 0s - loss: 0.1235 - val_loss: 1.2000e-04
    """

    REDRAW_INTERVAL = 0.05
    """Seconds between two redraws of the bar in a terminal."""
    _clock = staticmethod(time.monotonic)

    def __init__(
        self,
        verbose: int | str = 1,
        stream: TextIO | None = None,
        interactive: bool | None = None,
    ):
        super().__init__()
        verbose = validation.verbosity(verbose, allow_auto=True)
        if interactive is not None and not isinstance(interactive, bool):
            raise ValueError(
                f"interactive must be True, False or None. Received: interactive={interactive!r}"
            )
        self.verbose = verbose
        self._stream = stream
        self._interactive = interactive
        self._run: _Run | None = None
        self._in_fit = False
        self._in_epoch = False
        self._learned_steps: int | None = None  # the first epoch's count when steps is None
        self._pending: list[str] = []  # test lines waiting for their epoch's line

    @property
    def stream(self) -> TextIO:
        """The stream written to (nowhere on a worker other than the chief, which prints
        for the whole cluster)."""
        if self.model is not None and not is_chief(self.model):
            return _NOWHERE
        return self._stream if self._stream is not None else sys.stdout

    @property
    def interactive(self) -> bool:
        """Whether lines are redrawn in place."""
        if self._interactive is not None:
            return self._interactive
        stream = self.stream
        try:
            if stream.isatty():
                return True
        except (AttributeError, ValueError):
            return False
        return stream in (sys.stdout, sys.stderr) and "ipykernel" in sys.modules

    # The loop may skip batch hooks (and reading metrics) when nothing is drawn from them.
    def _needs_batches(self, steps) -> bool:
        return self.verbose == 1 and (steps is None or self.interactive)

    def implements_train_batch_hooks(self) -> bool:
        return self._needs_batches(self._train_steps())

    def implements_test_batch_hooks(self) -> bool:
        return not self._in_fit and self._needs_batches(self.params.get("steps"))

    def implements_predict_batch_hooks(self) -> bool:
        return self._needs_batches(self.params.get("steps"))

    def _train_steps(self):
        steps = self.params.get("steps")
        return steps if steps is not None else self._learned_steps

    def _start(self, target) -> None:
        self._run = _Run(target, self.stream, self.interactive, self._clock)

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()

    # fit
    def on_train_begin(self, logs=None):
        self._in_fit = True
        self._learned_steps = None
        self._pending = []

    def on_train_end(self, logs=None):
        self._flush_pending()
        reason = getattr(self.model, "stop_reason", None)
        if self.verbose and reason:
            self._write(f"Stopped: {reason}\n")  # early stopping, NaN, convergence: say why
        self._in_fit = self._in_epoch = False
        self._run = None

    def on_epoch_begin(self, epoch, logs=None):
        self._in_epoch = True
        if not self.verbose:
            return
        self._start(self._train_steps())
        if self.verbose == 1:
            self._write(self._epoch_title(epoch) + "\n")

    def on_train_batch_end(self, batch, logs=None):
        if self.verbose and self._run is not None:
            self._run.update(batch + 1, logs)

    def on_epoch_end(self, epoch, logs=None):
        self._in_epoch = False
        if not self.verbose:
            return
        if self._run is None:  # on_epoch_begin was not called
            self._start(self._train_steps())
        shown = {k: v for k, v in (logs or {}).items() if not k.startswith("test_")}
        if self.params.get("steps") is None and self._run.seen:
            self._learned_steps = self._run.seen
        if self.verbose == 1:
            self._run.finish(shown)
        else:
            elapsed = f"{self._run.elapsed():.0f}s"
            self._write(_join(self._epoch_title(epoch), elapsed, format_logs(shown)) + "\n")
        self._run = None
        self._flush_pending()

    def _epoch_title(self, epoch: int) -> str:
        epochs = self.params.get("epochs")
        return f"Epoch {epoch + 1}/{epochs}" if epochs else f"Epoch {epoch + 1}"

    def _flush_pending(self) -> None:
        for line in self._pending:
            self._write(line)
        self._pending = []

    # evaluate, and the val/test stages of fit
    def on_test_begin(self, logs=None, stage="test"):
        if self.verbose and not self._in_fit:
            self._start(self.params.get("steps"))

    def on_test_batch_end(self, batch, logs=None, stage="test"):
        if self.verbose and not self._in_fit and self._run is not None:
            self._run.update(batch + 1, logs)

    def on_test_end(self, logs=None, stage="test"):
        if not self.verbose:
            return
        if self._in_fit:
            if stage == "test":
                line = f"Test: {format_logs(logs)}\n"
                # Inside an epoch the bar's line is still open: print after it.
                if self._in_epoch:
                    self._pending.append(line)
                else:
                    self._write(line)
            return
        self._finish_run(logs)

    # predict
    def on_predict_begin(self, logs=None):
        if self.verbose:
            self._start(self.params.get("steps"))

    def on_predict_batch_end(self, batch, logs=None):
        if self.verbose and self._run is not None:
            self._run.update(batch + 1, None)  # predictions are not metrics

    def on_predict_end(self, logs=None):
        if self.verbose:
            self._finish_run(logs)

    def _finish_run(self, logs) -> None:
        if self._run is None:
            self._start(self.params.get("steps"))
        if self.verbose == 1:
            self._run.finish(logs)
        else:
            run = self._run
            count = run.count(final=True).strip()
            self._write(_join(count, f"{run.elapsed():.0f}s", format_logs(logs)) + "\n")
        self._run = None
