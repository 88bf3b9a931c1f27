"""The checks a batch must pass before its step runs, collected from the loss and the layers.

Two kinds of requirement meet here, each a list of `(ok, message)` (`core.data_checks`):

- the compiled loss's, on a dataset's labels (class ids inside the model's classes, binary
  targets in [0, 1]; in-memory labels are checked whole before training, `input_checks`);
- every layer's `Layer.batch_checks`, collected generically: the model's forward pass runs in
  inference mode inside `step_context.checking`, where each layer called reports its checks
  on the inputs it really receives. The pass's own outputs are never used, so the compiled
  loop computes only what the checks read (the pruned graph; XLA removes the rest).

The loops evaluate them in the compiled loop before each step (`first_failure`), skip the
step of a batch that fails, stop, and raise a `DataCheckError` with the first failing message.
For in-memory arrays the error also names the first row that fails the check on its own, and
its values when they are few ("rows 0 to 74 of x; row 40 fails it alone: x[40] = [0.5, 3.0]").
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from graphfit.core import step_context, update_hooks
from graphfit.core.autograph_scope import traced_function
from graphfit.core.data_checks import DataCheckError
from graphfit.core.step_types import unpack_data
from graphfit.training import input_checks
from graphfit.training.array_data import gather_batch, relaxed_specs, step_data

__all__ = ["BatchChecks", "overrides_batch_checks"]


def overrides_batch_checks(layer) -> bool:
    """Whether `layer` states requirements of its batches (`Layer.checks_batches`; a layer
    that is not graphfit's states none)."""
    return bool(getattr(layer, "checks_batches", False))


class BatchChecks:
    """The batch checks of one model's compiled loops, per stage.

    Args:
        model: the built model.

    Attributes:
        label_checks: {stage: {output: (name, spec, LossKind)}}: the loss's checks of a
            dataset's labels, set when the stage's data is prepared.
    """

    def __init__(self, model):
        self.model = model
        self.layer_checks = any(overrides_batch_checks(l) for l in model.flatten_layers())
        self.label_checks: dict[str, dict] = {}
        # (stage, with labels) -> [(layer or None, message)], in the order traced.
        self._found: dict[tuple, list] = {}
        self._array_loops: dict = {}  # (stage, data specs) -> the traced check loop

    def needed(self, stage: str, with_labels: bool) -> bool:
        """Whether batches of `stage` have anything to check (`with_labels`: the loss's
        label checks count, as for a dataset)."""
        return self.layer_checks or (with_labels and bool(self.label_checks.get(stage)))

    def first_failure(self, stage: str, data, with_labels: bool = True) -> tf.Tensor:
        """The index of the first check `data` fails, or -1 (an int32 scalar; traced)."""
        x, y, _ = unpack_data(data)
        found = []
        if with_labels and y is not None:
            found = [(None, ok, message) for ok, message
                     in input_checks.label_checks(y, self.label_checks.get(stage, {}))]
        if self.layer_checks:
            with step_context.checking(y, training=stage == "train") as context, \
                    update_hooks.collect_updates():  # listed by the pass, never applied
                self.model(x, training=False)
            found += context.checks
        self._found[stage, with_labels] = [(layer, message) for layer, _, message in found]
        if not found:
            return tf.constant(-1)
        passed = tf.stack([tf.reduce_all(tf.cast(ok, tf.bool)) for _, ok, _ in found])
        first = tf.cast(tf.argmin(tf.cast(passed, tf.int32)), tf.int32)
        return tf.where(tf.reduce_all(passed), tf.constant(-1), first)

    def check_arrays(self, stage: str, data: tuple, batches, name: str,
                     eagerly: bool = False) -> None:
        """Checks every batch of in-memory data against the layers' `batch_checks`, before
        the first step (the loss's label checks ran on the whole arrays already).

        Args:
            stage: "train", "val", "test" or "predict".
            data: the arrays, as tensors: (x,), (x, y) or (x, y, sample_weight).
            batches: matrices of sample indices, one row per batch, in the data's order.
            name: what the inputs are called in messages ("x", "validation_data[0]").
            eagerly: run the checks eagerly (`run_eagerly`).

        Raises:
            DataCheckError: naming the check and the rows of the first batch that fails.
        """
        if not self.needed(stage, with_labels=False):
            return
        key = (stage, str(relaxed_specs(data)))
        if key not in self._array_loops:
            loop = self._array_loop(stage)
            self._array_loops[key] = loop if eagerly else traced_function(
                loop, input_signature=[relaxed_specs(data), tf.TensorSpec([None, None], tf.int32)],
                autograph=False)
        for index_batches in batches:
            batch, failed = self._array_loops[key](data, tf.constant(index_batches, tf.int32))
            if int(failed) >= 0:
                rows = index_batches[int(batch)]
                where = f"rows {int(rows.min())} to {int(rows.max())} of {name}"
                row = None if len(rows) < 2 else self._failing_row(
                    self._array_loops[key], data, rows, int(failed))
                if row is not None:
                    where += f"; row {row} fails it alone{_row_values(data, row, name)}"
                raise self.error(stage, int(failed), where, with_labels=False)

    @staticmethod
    def _failing_row(loop, data, rows, failed: int) -> int | None:
        """The first row of a failing batch that fails the same check on its own (halving
        the batch: a few more passes, on failure only), or None when no single row does (a
        check of the batch as a whole)."""
        rows = np.asarray(rows)
        low, high = 0, len(rows)
        while high - low > 1:
            middle = (low + high) // 2
            _, first_half = loop(data, tf.constant(rows[None, low:middle], tf.int32))
            low, high = (low, middle) if int(first_half) >= 0 else (middle, high)
        _, alone = loop(data, tf.constant(rows[None, low:low + 1], tf.int32))
        return int(rows[low]) if int(alone) == failed else None

    def _array_loop(self, stage: str):
        def loop(data, index_batches):
            def check(i, _):
                batch = step_data(gather_batch(data, index_batches[i]))
                return i + 1, self.first_failure(stage, batch, with_labels=False)

            count = tf.shape(index_batches)[0]
            checked, failed = tf.while_loop(lambda i, failed: (i < count) & (failed < 0),
                                            check, (tf.constant(0), tf.constant(-1)))
            return checked - 1, failed

        return loop

    def error(self, stage: str, index: int, where: str,
              with_labels: bool = True) -> DataCheckError:
        """The `DataCheckError` of check `index` of `stage`, found `where`."""
        layer, message = self._found[stage, with_labels][index]
        return DataCheckError(message, layer, where)


def _row_values(data: tuple, row: int, name: str) -> str:
    """": x[17] = [0.0, 3.0]" for inputs held in one array with a short row, else ""."""
    x = data[0]
    if not isinstance(x, (tf.Tensor, np.ndarray)) or np.prod(x.shape[1:]) > 10:
        return ""
    values = np.asarray(x[row])
    shown = ", ".join(f"{v:.8g}" if isinstance(v, float) else repr(v)
                      for v in values.ravel().tolist())
    return f": {name}[{row}] = {f'[{shown}]' if values.ndim else shown}"
