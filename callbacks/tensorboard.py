"""`TensorBoard`: per-epoch scalars of every stage, in separate train / val / test runs.

Each stage writes to its own subfolder of `log_dir` under the same tag names (`loss`,
`accuracy`, ...), so TensorBoard overlays the three curves of a metric on one chart. The step
axis is the epoch for all three.

Example:

    >>> import tempfile
    >>> import graphfit as gf
    >>> board = gf.callbacks.TensorBoard(tempfile.mkdtemp())
    >>> board.on_epoch_end(0, {"loss": 0.5, "val_loss": 0.7})
    >>> board.on_train_end()
    >>> sorted(board.runs_written)
    ['train', 'val']
"""

from __future__ import annotations

import os

from graphfit.callbacks.callback import Callback
from graphfit.registry import CALLBACKS

__all__ = ["TensorBoard"]

_STAGES = ("val", "test")


@CALLBACKS.register
class TensorBoard(Callback):
    """Writes TensorBoard event files: `log_dir/train`, `log_dir/val`, `log_dir/test`.

    Args:
        log_dir: the folder that holds the three runs.
    """

    def __init__(self, log_dir: str = "logs"):
        super().__init__()
        if not isinstance(log_dir, str) or not log_dir:
            raise ValueError(f"log_dir must be a folder path. Received: log_dir={log_dir!r}")
        self.log_dir = log_dir
        self._writers: dict = {}
        self._epoch = 0
        self.runs_written: set[str] = set()

    def _writer(self, stage: str):
        import tensorflow as tf

        if stage not in self._writers:
            self._writers[stage] = tf.summary.create_file_writer(
                os.path.join(self.log_dir, stage))
        return self._writers[stage]

    def _write(self, stage: str, logs: dict, step: int) -> None:
        import tensorflow as tf

        if not logs:
            return
        with self._writer(stage).as_default():
            for name, value in logs.items():
                tf.summary.scalar(name, float(value), step=step)
        self.runs_written.add(stage)

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        by_stage: dict[str, dict] = {"train": {}, "val": {}}
        for key, value in (logs or {}).items():
            stage = next((s for s in _STAGES if key.startswith(s + "_")), "train")
            if stage == "test":
                continue  # written by on_test_end, once
            by_stage[stage][key[len(stage) + 1:] if stage != "train" else key] = value
        for stage, values in by_stage.items():
            self._write(stage, values, epoch)

    def on_test_end(self, logs=None, stage="test"):
        if stage == "test":
            self._write("test", logs or {}, self._epoch)

    def on_train_end(self, logs=None):
        for writer in self._writers.values():
            writer.flush()
