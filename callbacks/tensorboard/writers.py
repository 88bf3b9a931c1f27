"""The pieces of `TensorBoard` that are not hooks: argument checks, the per-run summary writers,
and the writing of histograms, the step graph, the recipe text and the hyperparameters.

Everything here is plain TensorFlow / TensorBoard API (`tf.summary`, the HParams plugin's
`tensorboard.plugins.hparams.api`); the callback decides when each piece is written.
"""

from __future__ import annotations

import numbers
import os
from typing import Any

import tensorflow as tf

from graphfit.core import validation
from graphfit.core.log_values import scalar_logs

__all__ = [
    "RunWriters",
    "check_hparams",
    "check_profile_batch",
    "check_update_freq",
    "variable_tag",
    "write_histograms",
    "write_hparams",
    "write_session_end",
    "write_text",
]

ROOT = ""  # the run of log_dir itself: hyperparameters and recipe text


def check_update_freq(update_freq) -> int | None:
    """'epoch' -> None; 'batch' -> 1; a positive integer -> itself.

    Raises:
        ValueError: for anything else.
    """
    if update_freq == "epoch":
        return None
    if update_freq == "batch":
        return 1
    if validation.is_integer(update_freq) and update_freq >= 1:
        return int(update_freq)
    raise ValueError(
        "update_freq must be 'epoch', 'batch' or a positive integer (write every that many "
        f"training steps). Received: update_freq={update_freq!r}"
    )


def check_profile_batch(profile_batch) -> tuple[int, int] | None:
    """Keras's forms: 0 (off), n (step n only), (start, stop), [start, stop] or "start,stop".

    Steps count from 1 at the start of each `fit`, as in Keras.

    Returns:
        (start, stop), or None when profiling is off.

    Raises:
        ValueError: for any other value, or start > stop.
    """
    error = ValueError(
        "profile_batch must be 0 (off), a positive integer n (profile step n), or a pair of "
        "positive integers start <= stop as [start, stop] or 'start,stop' (steps count from 1 "
        f"at the start of fit). Received: profile_batch={profile_batch!r}"
    )
    value = profile_batch
    if isinstance(value, str):
        try:
            value = [int(part) for part in value.split(",")]
        except ValueError:
            raise error from None
        value = value[0] if len(value) == 1 else value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = (value, value)
    if not isinstance(value, (list, tuple)) or len(value) != 2 or not all(
            isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in value):
        raise error
    start, stop = int(value[0]), int(value[1])
    if (start, stop) == (0, 0):
        return None
    if start < 1 or stop < start:
        raise error
    return start, stop


def check_hparams(hparams) -> dict[str, bool | int | float | str] | None:
    """A flat dict {name: number, string or bool}, or None.

    Raises:
        ValueError: for a non-dict, a non-string name, or a value of another type.
    """
    if hparams is None:
        return None
    if not isinstance(hparams, dict):
        raise ValueError(
            "hparams must be a flat dict {name: number, string or bool}. "
            f"Received: hparams={hparams!r}"
        )
    for name, value in hparams.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"hparams names must be non-empty strings. Received the name {name!r} "
                             f"in hparams={hparams!r}")
        if not isinstance(value, (bool, numbers.Real, str)):
            raise ValueError(
                f"hparams values must be numbers, strings or bools (TensorBoard's HParams "
                f"plugin shows nothing else). Received: hparams[{name!r}]={value!r}"
            )
    return dict(hparams)


class RunWriters:
    """One `tf.summary` file writer per run folder under `log_dir`, created on first use.

    Args:
        log_dir: the folder holding the runs; `ROOT` ("") names the folder itself.
    """

    def __init__(self, log_dir: str):
        self.log_dir = log_dir
        self._writers: dict[str, Any] = {}
        self.written: set[str] = set()

    def writer(self, run: str):
        if run not in self._writers:
            self._writers[run] = tf.summary.create_file_writer(os.path.join(self.log_dir, run))
        self.written.add(run)
        return self._writers[run]

    def scalars(self, run: str, values: dict, step: int) -> None:
        """Writes each `name: value` as a scalar of `run` at `step`."""
        if not values:
            return
        with self.writer(run).as_default():
            for name, value in scalar_logs(values).items():  # an array: one tag per element
                tf.summary.scalar(name, float(value), step=step)

    def flush(self, run: str | None = None) -> None:
        for name, writer in self._writers.items():
            if run is None or name == run:
                writer.flush()

    def close(self) -> None:
        """Flushes and closes every writer; later writes open new event files."""
        for writer in self._writers.values():
            writer.close()
        self._writers = {}


def variable_tag(model, variable) -> str:
    """'sequential/dense/kernel:0' -> 'dense/kernel' (the model's own name dropped)."""
    name = variable.name.split(":")[0]
    prefix = f"{getattr(model, 'name', '')}/"
    return name[len(prefix):] if name.startswith(prefix) else name


def write_histograms(model, pairs, prefix: str, step: int) -> None:
    """Writes `prefix/<variable tag>` histograms of the values in (variable, values) pairs
    (under the default writer); non-numeric variables are skipped."""
    for variable, values in pairs:
        if not (variable.dtype.is_floating or variable.dtype.is_integer):
            continue
        tf.summary.histogram(f"{prefix}/{variable_tag(model, variable)}", values, step=step)


def write_text(name: str, text: str, step: int = 0) -> None:
    """Writes `text` as a fenced code block, so TensorBoard's Text tab keeps its layout."""
    tf.summary.text(name, f"```\n{text}\n```", step=step)


def write_hparams(hparams: dict, trial_id: str | None = None) -> None:
    """Starts an HParams session in the default writer's run (the plugin's `hp.hparams`),
    named `trial_id` (None: the plugin's hash of the values). The plugin finds the session's
    metrics by itself: every scalar tag of a run below the session's folder is a metric,
    grouped by that subfolder (`train`, `val`, `test`), and its last value is the one the
    table shows."""
    from tensorboard.plugins.hparams import api as hp

    hp.hparams(hparams, trial_id=trial_id)


def write_session_end(success: bool = True) -> None:
    """Marks the HParams session of the default writer's run as finished: SUCCESS, or
    FAILURE for a run stopped as not worth finishing (`UnsuccessfulStop`: a pruned trial, a
    loss that turned NaN under `TerminateOnNaN`) or whose last training loss is not finite;
    a run that crashed keeps the status "unknown")."""
    from tensorboard.plugins.hparams import api_pb2
    from tensorboard.plugins.hparams import summary as hparams_summary

    proto = hparams_summary.session_end_pb(api_pb2.STATUS_SUCCESS if success else
                                           api_pb2.STATUS_FAILURE)
    tf.summary.experimental.write_raw_pb(proto.SerializeToString(), step=0)
