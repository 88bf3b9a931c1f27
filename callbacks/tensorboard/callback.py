"""`TensorBoard`: train, validation and test curves that overlay, plus what Keras leaves out.

What `log_dir` holds after `fit` (every run is a folder TensorBoard lists on its own):

    log_dir/            hyperparameters (HParams tab) and the recipe text (Text tab)
    log_dir/train/      per-epoch metrics, `learning_rate`, `batch_*` scalars, weight and
                        gradient histograms, gradient taps (`gradient_taps/<node>/<variable>`),
                        activation gradient taps (`activation_gradient_taps/<layer>[/norm]`),
                        the graph of the compiled training step, a profile
    log_dir/val/        per-epoch validation metrics
    log_dir/test/       test metrics, each time test data is evaluated

The three stages use the same tag names (`loss`, `accuracy`, `auc`, ...: the `val_` / `test_`
prefixes of the logs are stripped), so TensorBoard draws a metric's train, val and test curves
on one chart. Keras 3 writes `epoch_loss`; graphfit writes `loss` on purpose, because the
stages share tags rather than the tags naming the stage.

Step axis: per-epoch scalars and histograms use the epoch index (0-based, as Keras) in all
three runs, so curves line up; a test result evaluated by `fit` is written at the epoch it ran
in, one from `model.evaluate(..., callbacks=[board])` at `evaluation_step` (see the class).
`batch_*` scalars use the global step, `optimizer.iterations`.

`learning_rate` (train run, every epoch) is the "learning_rate" of the epoch logs when a
callback listed earlier put it there (`LearningRateScheduler`, `ReduceLROnPlateau`: the rate
the epoch trained with), else the optimizer's rate at the end of the epoch (under a
`LearningRateSchedule`, the rate of the next step), as Keras 3 reads it.

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

import math
import os
import shutil
import tempfile
import warnings

import tensorflow as tf

from graphfit.callbacks.callback import Callback
from graphfit.callbacks.chief import is_chief
from graphfit.callbacks.tensorboard import taps as tensorboard_taps
from graphfit.callbacks.tensorboard import writers as tbw
from graphfit.core import validation
from graphfit.core.registry import CALLBACKS
from graphfit.training.recorders import GradientTaps

__all__ = ["TensorBoard"]

_STAGES = ("val", "test")


@CALLBACKS.register
class TensorBoard(Callback):
    """Writes TensorBoard logs: `log_dir/train`, `log_dir/val`, `log_dir/test` and more.

    Args:
        log_dir: the folder that holds the runs. For the HParams tab, start TensorBoard on a
            folder above it (`tensorboard --logdir runs` for recipe runs): TensorBoard
            matches a session's metrics to the runs below the session's folder, which a
            session at the top of `--logdir` itself cannot have.
        histogram_freq: every that many epochs (0: never), histograms of every model
            variable (`weights/dense/kernel`) and of the gradient of every trainable one
            (`gradients/dense/kernel`) in the train run. The gradients are recorded inside
            the compiled training step (not recomputed): the raw gradients of the loss of
            the epoch's last training step, before clipping and weight decay. An optimizer
            whose `minimize` does not report gradients (see
            `graphfit.core.step_context.record_gradients`) gets weight histograms only,
            with a warning.
        write_graph: write the graph of the compiled training step (Graphs tab) after the
            first epoch; nothing is written when the model runs eagerly.
        write_images: accepted for Keras compatibility; only False is supported.
        update_freq: "epoch", or "batch" / an integer n: also write the running training
            metrics (epoch to date) as `batch_loss`, ... every n training steps, at the
            global step. Only then does the callback listen to training batches, which makes
            `steps_per_execution="auto"` run one step per call (as in Keras); with a fixed
            `steps_per_execution`, they are written after each call that reaches a multiple
            of n.
        profile_batch: 0 (off), n, or the range "start,stop" / [start, stop] of training
            steps to profile with `tf.profiler` (steps count from 1 at the start of `fit`),
            written to `log_dir/train/plugins/profile`.
        hparams: a flat dict {name: number, string or bool} for TensorBoard's HParams tab;
            the metrics shown with them are the last values of the train, val and test
            scalars.
        recipe_text: text (the resolved recipe) shown in the Text tab, tag `recipe`.
        gradient_taps: layer names ("output" for the model's output, "loss" for the loss)
            whose gradient norms to record: `gradient_taps/<node>/<variable tag>` in the
            train run is ‖∂(sum of the node's output over the batch)/∂(variable)‖₂, what
            `tf.gradients(node, variables)` gives, for every trainable variable the node
            depends on (text `gradient_taps` lists the others). Computed inside the compiled
            training step from the step's own forward pass, at the weights before its update
            (see `graphfit.training.node_taps`), and written at that step's global step.
            Listening to
            batches, like `update_freq`.
        gradient_tap_freq: record the taps in the training steps whose global step is a
            multiple of this.
        activation_gradient_taps: layer names whose activation gradient to record:
            ∂loss/∂(the layer's output), the gradient of the training loss with respect to
            every element of the layer's output on the step's batch, as the scalar
            `activation_gradient_taps/<layer>/norm` (its L2 norm) and the histogram
            `activation_gradient_taps/<layer>` in the train run, at the step's global step.
            Read from the compiled step's own backward pass (no second forward or backward
            pass; the weight updates are unchanged; see `graphfit.training.activation_taps`).
            Listening to batches, like `update_freq`.
        activation_gradient_tap_freq: record them in the training steps whose global step is
            a multiple of this.
        trial_id: the HParams session's name (recipe runs give the run's name); None lets
            TensorBoard use a hash of `hparams`, which says nothing to a reader.

    Attributes:
        runs_written: the runs ("", "train", "val", "test") written to so far.
        evaluation_step: the step of results from `model.evaluate(..., callbacks=[board])`
            (test, or val outside `fit`). None (the default) means the index of the model's
            last completed epoch, so the point sits above the epoch whose weights it
            measures, where `fit`'s own final test point is: the epochs completed (the
            model's `graphfit.saving.checkpoints.fit_state`, which training checkpoints restore)
            minus one, or 0 for a model never trained. Set it to override.

    Raises:
        ValueError: for a bad argument (named, with the value received).

    Example:

        >>> import tempfile
        >>> import numpy as np
        >>> import graphfit as gf
        >>> model = gf.Sequential([gf.layers.Dense(1)])
        >>> model.compile(optimizer="sgd", loss="mse")
        >>> board = gf.callbacks.TensorBoard(tempfile.mkdtemp(), histogram_freq=1,
        ...                                  hparams={"units": 1, "optimizer": "sgd"})
        >>> _ = model.fit(np.ones((8, 2)), np.ones((8, 1)), epochs=2, verbose=0,
        ...               validation_data=(np.ones((4, 2)), np.zeros((4, 1))),
        ...               callbacks=[board])
        >>> sorted(board.runs_written)
        ['', 'train', 'val']
    """

    def __init__(
        self,
        log_dir: str = "logs",
        histogram_freq: int = 0,
        write_graph: bool = True,
        write_images: bool = False,
        update_freq: str | int = "epoch",
        profile_batch: int | str | list | tuple = 0,
        hparams: dict | None = None,
        recipe_text: str | None = None,
        gradient_taps: list[str] | None = None,
        gradient_tap_freq: int = 1,
        trial_id: str | None = None,
        activation_gradient_taps: list[str] | None = None,
        activation_gradient_tap_freq: int = 1,
    ):
        super().__init__()
        if isinstance(log_dir, os.PathLike):
            log_dir = os.fspath(log_dir)
        if not isinstance(log_dir, str) or not log_dir:
            raise ValueError(f"log_dir must be a folder path. Received: log_dir={log_dir!r}")
        if not validation.is_integer(histogram_freq) or histogram_freq < 0:
            raise validation.invalid("histogram_freq", histogram_freq,
                                     "a non-negative integer (0: no histograms)")
        for name, value in (("write_graph", write_graph), ("write_images", write_images)):
            if not isinstance(value, bool):
                raise ValueError(f"{name} must be True or False. Received: {name}={value!r}")
        if write_images:
            raise ValueError("write_images=True is not supported: use histogram_freq for "
                             "weight histograms. Received: write_images=True")
        if recipe_text is not None and not isinstance(recipe_text, str):
            raise ValueError(f"recipe_text must be a string or None. "
                             f"Received: recipe_text={recipe_text!r}")
        self.log_dir = log_dir
        self.histogram_freq = histogram_freq
        self.write_graph = write_graph
        self.write_images = write_images
        self.update_freq = update_freq
        self.profile_batch = profile_batch
        self.hparams = tbw.check_hparams(hparams)
        if trial_id is not None and (not isinstance(trial_id, str) or not trial_id):
            raise ValueError(f"trial_id must be a non-empty string or None. "
                             f"Received: trial_id={trial_id!r}")
        self.trial_id = trial_id
        self.recipe_text = recipe_text
        self.gradient_taps = tensorboard_taps.check_gradient_taps(gradient_taps,
                                                                  gradient_tap_freq)
        self.gradient_tap_freq = gradient_tap_freq
        self._taps = None if self.gradient_taps is None else tensorboard_taps.TapWriter(
            self.gradient_taps, gradient_tap_freq)
        self.activation_gradient_taps = tensorboard_taps.check_activation_gradient_taps(
            activation_gradient_taps, activation_gradient_tap_freq)
        self.activation_gradient_tap_freq = activation_gradient_tap_freq
        self._activation_taps = None if self.activation_gradient_taps is None else \
            tensorboard_taps.ActivationTapWriter(self.activation_gradient_taps,
                                                 activation_gradient_tap_freq)
        self._batch_every = tbw.check_update_freq(update_freq)
        self._profile_range = tbw.check_profile_batch(profile_batch)
        self.evaluation_step: int | None = None
        # No file is touched before a hook runs: recipe checks build trial callbacks.
        self._runs = tbw.RunWriters(log_dir)
        self._epoch = 0
        self._training = False
        self._first_step = 0  # the global step when this fit began
        self._last_batch_step = 0
        self._graph_pending = False
        self._profiling = False
        self._profile_done = False
        self._session_written = False
        self._last_loss_finite = True  # the HParams session of a diverged run is a FAILURE
        self._warned_no_gradients = False
        self._gradients: GradientTaps | None = None  # histogram_freq: the gradient taps

    @property
    def runs_written(self) -> set[str]:
        """The runs written to so far: "" (log_dir itself), "train", "val", "test"."""
        return self._runs.written

    # ------------------------------------------------------------------ whole runs
    def on_train_begin(self, logs=None):
        self._training = True
        self._last_loss_finite = True
        self._write_here_if_chief()
        self._first_step = self._last_batch_step = self._global_step()
        self._graph_pending = self.write_graph
        self._profile_done = False
        if self.histogram_freq and self.model.compiled:
            if self._gradients is None or self._gradients not in self.model.step_recorders:
                self._gradients = GradientTaps(self.model)  # before the first step is traced
                self.model.add_step_recorder(self._gradients)
        if self._taps is not None:
            self._taps.begin(self.model)
        if self._activation_taps is not None:
            self._activation_taps.begin(self.model)
        if not self._session_written and (self.hparams or self.recipe_text is not None):
            with self._runs.writer(tbw.ROOT).as_default():
                if self.recipe_text is not None:
                    tbw.write_text("recipe", self.recipe_text, step=0)
                if self.hparams:
                    tbw.write_hparams(self.hparams, self.trial_id)
            self._runs.flush(tbw.ROOT)
            self._session_written = True

    def on_train_end(self, logs=None):
        self._stop_profiler()
        self._training = False
        if self.hparams and self._session_written:
            from graphfit.callbacks.stop_reasons import UnsuccessfulStop

            reason = getattr(self.model, "stop_reason", None)
            success = self._last_loss_finite and not isinstance(reason, UnsuccessfulStop)
            with self._runs.writer(tbw.ROOT).as_default():
                tbw.write_session_end(success=success)
        self._runs.close()
        self._drop_scratch()

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_epoch_end(self, epoch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None:
            self._last_loss_finite = math.isfinite(float(loss))
        by_stage: dict[str, dict] = {"train": {}, "val": {}}
        for key, value in (logs or {}).items():
            stage = next((s for s in _STAGES if key.startswith(s + "_")), "train")
            if stage == "test":
                continue  # written by on_test_end, once
            by_stage[stage][key[len(stage) + 1:] if stage != "train" else key] = value
        train_logs = by_stage["train"]
        if self.model is not None and train_logs and not any(
                key.startswith("learning_rate") for key in train_logs):
            train_logs.update(self._learning_rates())
        for stage, values in by_stage.items():
            self._runs.scalars(stage, values, epoch)
        if self.histogram_freq and epoch % self.histogram_freq == 0 and self.model is not None:
            self._write_histograms(epoch)
        if self._graph_pending:
            self._write_graph()
        self._runs.flush()  # one flush per epoch: curves appear while training runs

    def on_test_end(self, logs=None, stage="test"):
        if stage == "val" and self._training:
            return  # fit's validation results arrive prefixed in on_epoch_end
        step = self._epoch if self._training else self._evaluation_step()
        if not self._training:
            self._write_here_if_chief()
        self._runs.scalars(stage, logs or {}, step)
        if not self._training:
            self._runs.flush(stage)  # evaluate() has no on_train_end
            self._drop_scratch()

    # ------------------------------------------------------------------ several workers
    def _write_here_if_chief(self) -> None:
        """A worker other than the chief writes the same summaries into a scratch folder,
        deleted at the end: only the chief's reach log_dir."""
        if is_chief(self.model) or self._runs.log_dir != self.log_dir:
            return
        self._runs.close()
        self._runs = tbw.RunWriters(tempfile.mkdtemp(prefix="graphfit-worker-logs-"))

    def _drop_scratch(self) -> None:
        if self._runs.log_dir != self.log_dir:
            self._runs.close()
            shutil.rmtree(self._runs.log_dir, ignore_errors=True)
            self._runs = tbw.RunWriters(self.log_dir)

    # ------------------------------------------------------------------ batches
    def implements_train_batch_hooks(self) -> bool:
        # Asked at the start of every training epoch: batch hooks (and one step per call
        # under steps_per_execution="auto") only for batch scalars or a pending profile.
        return self._batch_every is not None or self._taps is not None or (
            self._activation_taps is not None) or (
            self._profile_range is not None and not self._profile_done)

    def on_train_batch_begin(self, batch, logs=None):
        if self._profile_range is None or self._profile_done or self._profiling:
            return
        if self._global_step() - self._first_step + 1 >= self._profile_range[0]:
            self._start_profiler()

    def on_train_batch_end(self, batch, logs=None):
        step = self._global_step()
        every = self._batch_every
        if every is not None and logs and step // every > self._last_batch_step // every:
            self._runs.scalars("train", {f"batch_{k}": v for k, v in logs.items()}, step)
        self._last_batch_step = step
        if self._taps is not None:
            self._taps.write(self._runs, self.model)
        if self._activation_taps is not None:
            self._activation_taps.write(self._runs)
        if self._profiling and step - self._first_step >= self._profile_range[1]:
            self._stop_profiler()

    # ------------------------------------------------------------------ helpers
    def _global_step(self) -> int:
        iterations = getattr(getattr(self.model, "optimizer", None), "iterations", None)
        return 0 if iterations is None else int(iterations.numpy())

    def _learning_rates(self) -> dict:
        """{"learning_rate": rate}; for a MultiOptimizer (also under a LossScaleOptimizer)
        {"learning_rate_<name>": rate} of each of its optimizers, as Keras; {} for none."""
        optimizer = getattr(self.model, "optimizer", None)
        inner = getattr(getattr(optimizer, "inner_optimizer", optimizer), "optimizers", None)
        named = ({f"learning_rate_{each.name}": each for each in inner} if inner
                 else {"learning_rate": optimizer})
        rates = {}
        for key, each in named.items():
            try:
                rates[key] = float(tf.convert_to_tensor(each.learning_rate))
            except (AttributeError, TypeError, ValueError):
                pass
        return rates

    def _evaluation_step(self) -> int:
        if self.evaluation_step is not None:
            return int(self.evaluation_step)
        if self.model is None:
            return 0
        from graphfit.saving.checkpoints import fit_state  # graphfit imports the callbacks

        return max(int(fit_state(self.model).epoch.numpy()) - 1, 0)

    def _write_histograms(self, epoch: int) -> None:
        gradients = [] if self._gradients is None else self._gradients.recorded_gradients()
        with self._runs.writer("train").as_default():
            tbw.write_histograms(self.model, [(v, v) for v in self.model.variables],
                                 "weights", epoch)
            tbw.write_histograms(self.model, gradients, "gradients", epoch)
        if not gradients and self.model.trainable_variables and not self._warned_no_gradients:
            self._warned_no_gradients = True
            from graphfit.training.compiled_steps import overrides_step  # imports callbacks

            if overrides_step(self.model, "train_step"):
                who = (f"model {self.model.name!r}'s own train_step reported no gradients "
                       f"(optimizer.minimize() reports them, apply_gradients() does not)")
                how = ("Call graphfit.core.step_context.record_gradients(gradients, "
                       "variables) in the step, or use self.optimizer.minimize(...)")
            else:
                who = (f"the optimizer {type(self.model.optimizer).__name__} reported no "
                       f"gradients")
                how = ("An optimizer that overrides minimize() can report its gradient with "
                       "graphfit.core.step_context.record_gradients(gradients, variables)")
            warnings.warn(f"TensorBoard: {who}, so only weight histograms are written. {how}.",
                          stacklevel=2)

    def _write_graph(self) -> None:
        graph = self.model.train_step_graph()
        self._graph_pending = False
        if graph is not None:
            with self._runs.writer("train").as_default():
                tf.summary.graph(graph)

    def _start_profiler(self) -> None:
        if not is_chief(self.model):  # the chief profiles
            self._profile_done = True
            return
        try:
            tf.profiler.experimental.start(os.path.join(self.log_dir, "train"))
        except Exception as error:  # another profiler running: not worth stopping training
            warnings.warn(f"TensorBoard: could not start the profiler: {error}", stacklevel=2)
            self._profile_done = True
            return
        self._profiling = True

    def _stop_profiler(self) -> None:
        if not self._profiling:
            return
        self._profiling = False
        self._profile_done = True
        try:
            tf.profiler.experimental.stop()
        except Exception as error:
            warnings.warn(f"TensorBoard: could not save the profile: {error}", stacklevel=2)
