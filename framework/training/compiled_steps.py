"""The compiled train, test and predict steps, and the loops that run a chunk of them per call.

Each step is the model's own public step (`Model.train_step(data)`, `test_step`,
`predict_step`; the defaults are in `graphfit.training.steps`), traced once per input
signature and, when `compile` resolved `jit_compile` to True, compiled by XLA. Around the
model's train step the step here opens the step's context (`core.step_context`: the batch's
labels for the layers that read them) and applies, once, the update hooks an overridden step
left uncollected.

A loop runs a chunk of steps per call and updates the stage's metrics after each step from its
`StepResult`, so Python runs once per chunk, not once per batch. With XLA, a chunk over
in-memory arrays is one XLA program (gathers, steps and metric updates); shorter chunks call
the XLA-compiled step per batch, and a dataset's loop (a TensorFlow graph reading the
iterator, `dataset_loops`) one XLA program per batch of the step and its metric updates.
"""

from __future__ import annotations

import contextlib

import tensorflow as tf

from graphfit.core import autograph_scope, host_errors, step_context, update_hooks
from graphfit.core.graph_rewrites import graph_rewrites
from graphfit.core.step_types import BatchBound, StepResult, unpack_data
from graphfit.training import dataset_loops, distribution, predict_loops, steps, xla_support
from graphfit.training.array_data import gather_batch, pad_rows, relaxed_specs, step_data
from graphfit.training.batch_checks import BatchChecks

__all__ = ["CompiledSteps", "overrides_step", "pad_rows",
           "MAX_DATA_SIZES", "MIN_FUSED_STEPS"]

# The fewest steps per call worth compiling a whole chunk for: a shorter chunk (a small data
# set, a pass's last partial batch) runs the per-step XLA program, cheaper to compile.
MIN_FUSED_STEPS = 8

# Array lengths one stage's whole-chunk program is compiled for (XLA compiles per input
# shape); further lengths run the per-step programs, which compile per batch shape only.
MAX_DATA_SIZES = 4


def overrides_step(model, step: str = "train_step") -> bool:
    """Whether the model's class overrides `step` ("train_step", "test_step" or
    "predict_step"), Keras-style."""
    from graphfit.models.model import Model  # the models import the training package

    return getattr(type(model), step) is not getattr(Model, step)


def _checked_result(result, step: str):
    """A `StepResult`, or (Keras's form) a dict of the logs so far, {name: value}."""
    if not isinstance(result, (StepResult, dict)):
        raise TypeError(
            f"{step}(data) must return a graphfit.core.step_types.StepResult(loss, y_pred, "
            f"output_losses, logs), or as in Keras a dict {{name: metric result}}. "
            f"Received: {result!r}")
    return result


def _spec(tensor):
    return None if tensor is None else tf.TensorSpec(tensor.shape, tensor.dtype)


class CompiledSteps:
    """The traced steps of one compiled model, for one set of trainable variables.

    Args:
        model: the built model.
        loss_set: the compiled `LossSet` (None when only predicting).
        optimizer: the optimizer (built for `model.trainable_variables`).
        stage_metrics: {"train": StageMetrics, "val": ..., "test": ...}.
        jit_compile: compile each step with XLA (`xla_support.resolve_jit_compile`).
        run_eagerly: run everything eagerly, for debugging.
        strategy: the `tf.distribute` strategy the model was compiled under, or None. Each
            step then runs on every replica on its slice of the batch, without XLA, and the
            loop combines the replicas' results (`graphfit.training.distribution`).
    """

    def __init__(self, model, loss_set, optimizer, stage_metrics, jit_compile: bool,
                 run_eagerly: bool = False, strategy=None):
        if strategy is None:
            distribution.check_not_distributed(model)
        self.strategy = strategy
        self.model = model
        self.loss_set = loss_set
        self.optimizer = optimizer
        self.stage_metrics = stage_metrics
        self.jit_compile = jit_compile and not run_eagerly and strategy is None
        self.run_eagerly = run_eagerly
        self.variables = list(model.trainable_variables)
        # What the training step records (`graphfit.training.recorders`), set before tracing.
        self.recorders: tuple = ()
        # The specs the train step was last traced for; None before the first training step.
        self.train_data_spec = None
        # What each batch must pass before its step (the loss's and the layers' checks).
        self.checks = BatchChecks(model)
        # The largest training batch `fit` promised (`expect_fit`), and the batch size the
        # traced training step relied on (`BatchBound.relied_on`; None: none).
        self._largest_batch: int | None = None
        self._batch_limit: int | None = None
        with tf.init_scope():  # the steps of one pass over the data in this fit; 0: unknown
            self._steps_per_pass = tf.Variable(0, dtype=tf.int64, trainable=False,
                                               name="steps_per_pass")
        self.train_step = self._compile_step(self._train_step)
        # One test step for val and test; a test_step of the model's own, which may read
        # `model.metrics` (the stage's own objects), is traced for each (`_eval_step`).
        self.test_step = self._compile_step(self._test_step_of("test"))
        self._val_step = None
        # The stage whose step is being traced (Python runs it), or None.
        self.tracing_stage: str | None = None
        self.predict_step = self._compile_step(self._predict_step)
        self._loops: dict = {}
        self._fused_lengths: dict[str, set] = {}

    # ------------------------------------------------------------------ the single steps
    def _compile_step(self, fn):
        # Under a strategy the loop is the one tf.function: a nested one may not synchronize
        # replicas (all-reduce, mirrored assignments).
        if self.run_eagerly or self.strategy is not None:
            return fn
        # autograph=False: the step is graphfit's own code, with explicit control flow; the
        # user's code it calls still converts (`autograph_scope.convert_user_code`).
        return autograph_scope.traced_function(fn, jit_compile=self.jit_compile,
                                               reduce_retracing=True, autograph=False)

    def _train_step(self, data):
        self.train_data_spec = tf.nest.map_structure(_spec, data)
        bound = BatchBound(self._largest_batch)
        records = any(recorder.records_gradients for recorder in self.recorders)
        # Update hooks an overridden step did not collect itself run after it, once.
        with update_hooks.collect_updates() as pending, step_context.training_step(
                unpack_data(data)[1], record_gradients=records, recorders=self.recorders,
                bound=bound, steps_per_pass=self._steps_per_pass.read_value()) as context, \
                self._tracing("train"):
            result = autograph_scope.convert_user_code(self.model.train_step)(data)
        update_hooks.apply_updates(pending, distribution.replica_share(tf.float64))
        for recorder in self.recorders:
            recorder.after_step(context)
        # At trace time: what the traced step relied on (`expect_fit` reads it).
        if bound.relied_on is not None:
            self._batch_limit = min(bound.relied_on, self._batch_limit or bound.relied_on)
        return _checked_result(result, "train_step")

    def expect_fit(self, largest: int | None, steps_per_pass: int | None) -> None:
        """Told by `fit`, before its first epoch, how many examples its largest training
        batch holds (None: it cannot say, a dataset) and how many steps one pass over the
        training data takes (None: unknown, and again when the fit ends). The training step
        traced from now on is promised the batch bound (`core.step_types.BatchBound`); a
        step traced earlier that relied on smaller batches is traced again."""
        per_pass = steps_per_pass or 0
        if int(self._steps_per_pass.numpy()) != per_pass:  # no assign op when unchanged
            self._steps_per_pass.assign(per_pass)
        self._largest_batch = largest
        limit = self._batch_limit
        if limit is not None and (largest is None or largest > limit):
            self.retrace_training()

    def set_recorders(self, recorders) -> None:
        """Records `recorders` in the training step traced from now on."""
        if tuple(recorders) != self.recorders:
            self.recorders = tuple(recorders)
            self.retrace_training()

    @contextlib.contextmanager
    def _tracing(self, stage: str):
        outer, self.tracing_stage = self.tracing_stage, stage
        try:
            yield
        finally:
            self.tracing_stage = outer

    def _test_step_of(self, stage: str):
        def test_step(data):
            # The step's context: the loop has checked the batch (`Layer.batch_checks`).
            with step_context.training_step(unpack_data(data)[1]), self._tracing(stage):
                result = autograph_scope.convert_user_code(self.model.test_step)(data)
            return _checked_result(result, "test_step")

        return test_step

    def _eval_step(self, stage: str):
        if stage == "val" and overrides_step(self.model, "test_step"):
            if self._val_step is None:
                self._val_step = self._compile_step(self._test_step_of("val"))
            return self._val_step
        return self.test_step

    def _predict_step(self, data):
        with step_context.training_step(None):
            return autograph_scope.convert_user_code(self.model.predict_step)(data)

    # ------------------------------------------------------------------ one step in a loop
    def _run_and_record(self, stage: str, batch, per_worker: bool = False) -> None:
        data = step_data(batch)
        if per_worker:  # this worker's own batch: the global batch gathered from all
            data = distribution.gather_worker_batches(self.strategy, data)
        x, y, sample_weight = unpack_data(data)
        step = self.train_step if stage == "train" else self._eval_step(stage)
        if self.strategy is None:
            result = step(data)
        else:
            across = stage == "train" and self.optimizer.steps_across_replicas
            result = distribution.on_replicas(self.strategy, step, data, across)
        self.stage_metrics[stage].update(y, sample_weight, result,
                                         steps.batch_size_of(result, data))

    def _predict_batch(self, batch):
        if self.strategy is None:
            return self.predict_step(batch)
        return distribution.on_replicas(self.strategy, self.predict_step, batch)

    def _checked(self, stage: str, batch, run, skipped):
        """`run()` when the batch passes its checks, else `skipped()`; with the index of the
        first check it failed (-1: none). Traced, in a loop over a dataset."""
        if not self.checks.needed(stage, with_labels=True):
            return run(), tf.constant(-1)
        failed = self.checks.first_failure(stage, step_data(batch))
        if tf.get_static_value(failed) == -1:  # no check applies to this stage's batches
            return run(), failed
        return tf.cond(failed < 0, run, skipped), failed

    # ------------------------------------------------------------------ the loops
    @contextlib.contextmanager
    def _calling(self):
        """Around every loop call: the strategy's scope, the optimizer's Grappler settings,
        and a Python error a host callback recorded raised in place of TensorFlow's."""
        rewrites = None if self.optimizer is None else self.optimizer.graph_rewrites
        host_errors.clear()
        with distribution.strategy_scope(self.strategy), graph_rewrites(rewrites):
            try:
                yield
            except Exception as error:
                recorded = host_errors.take()
                if recorded is not None:  # keep the user's cause, hide TensorFlow's wrapper
                    raise recorded.with_traceback(None) from recorded.__cause__
                if self.jit_compile and isinstance(error, tf.errors.InvalidArgumentError) \
                        and hasattr(error, "add_note"):  # Python 3.11
                    error.add_note(
                        f"Model {self.model.name!r} runs with XLA (jit_compile resolved to "
                        f"True): if XLA cannot compile one of its ops (a metric's, or an "
                        f"overridden step's), compile with jit_compile=False.")
                raise

    def _loop(self, kind: str, stage: str, data, fused: bool = False, per_worker=False):
        """The traced loop of `stage` over "arrays" (for data of these specs) or a "dataset"
        (`per_worker`: of each worker's own batches, `distribution.per_worker`)."""
        key = (kind, stage, fused, str(relaxed_specs(data)) if kind != "dataset" else
               "per_worker" if per_worker else "")
        if key not in self._loops:
            index_spec = tf.TensorSpec([None, None], tf.int32)
            if kind == "dataset":
                signature = None
                fn = (predict_loops.dataset_loop(self.model, self._predict_batch,
                                                 self._checked)
                      if stage == "predict" else self._dataset_loop(stage, per_worker))
            elif stage == "predict":
                fn = predict_loops.array_loop(self.model, self._predict_batch)
                signature = [relaxed_specs(data), index_spec]
            else:
                fn = self._array_loop(stage)
                signature = [relaxed_specs(data), index_spec, tf.TensorSpec([], tf.int32)]
            self._loops[key] = fn if self.run_eagerly else autograph_scope.traced_function(
                fn, input_signature=signature, jit_compile=fused, autograph=False)
        return self._loops[key]

    def _array_loop(self, stage: str):
        def loop(data, index_batches, num_steps):
            def step(i):
                self._run_and_record(stage, gather_batch(data, index_batches[i]))
                return (i + 1,)

            tf.while_loop(lambda i: i < num_steps, step, (tf.constant(0),))
            return num_steps

        return loop

    def _batch_program(self, stage: str, per_worker: bool = False):
        """A dataset batch's step and metric updates: under XLA one program, as in a fused
        chunk (not the step's program, then the metrics' ops one by one), unless XLA has no
        kernel for one of their ops (a metric's): those then run beside the compiled step."""
        def record(batch):
            self._run_and_record(stage, batch, per_worker)

        if not self.jit_compile:
            return record
        program = autograph_scope.traced_function(record, jit_compile=True,
                                                  reduce_retracing=True, autograph=False)
        self._loops[("dataset_batch", stage, True, "")] = program  # for `tracing_counts`
        device = "XLA_GPU_JIT" if tf.config.list_physical_devices("GPU") else "XLA_CPU_JIT"

        def run(batch):  # decided when the loop is traced
            graph = program.get_concrete_function(batch).graph
            compiles = xla_support.op_without_xla_kernel(graph, self.model, device) is None
            (program if compiles else record)(batch)

        return run

    def _dataset_loop(self, stage: str, per_worker: bool = False):
        return dataset_loops.stage_loop(stage, self._batch_program(stage, per_worker),
                                        self._checked)

    def check_arrays(self, stage: str, data: tuple, batches, name: str) -> None:
        """`BatchChecks.check_arrays` of `stage`'s in-memory data, before its first step."""
        with self._calling():
            self.checks.check_arrays(stage, data, batches, name, self.run_eagerly)

    def fuses(self, stage: str, data, capacity: int) -> bool:
        """Whether `stage`'s chunks of up to `capacity` steps over `data` run as one XLA
        program each: with XLA, one device, chunks of at least `MIN_FUSED_STEPS`, and at most
        `MAX_DATA_SIZES` array lengths per stage."""
        if not self.jit_compile or capacity < MIN_FUSED_STEPS:
            return False
        lengths = self._fused_lengths.setdefault(stage, set())
        length = int(tf.nest.flatten(data)[0].shape[0])
        if length not in lengths and len(lengths) >= MAX_DATA_SIZES:
            return False
        lengths.add(length)
        return True

    def run_arrays(self, stage: str, data: tuple, index_batches, capacity: int = 1) -> int:
        """Runs one step per row of `index_batches` (sample indices into `data`); returns
        how many ran. `capacity`: the rows a whole-chunk XLA program's index matrix is
        padded to (the largest chunk of this stage), so that one program runs every chunk."""
        fused = self.fuses(stage, data, capacity)
        indices = pad_rows(index_batches, capacity) if fused else index_batches
        loop = self._loop("arrays", stage, data, fused)
        with self._calling():
            return int(loop(data, tf.constant(indices, tf.int32),
                            tf.constant(len(index_batches), tf.int32)))

    def run_dataset(self, stage: str, iterator, num_steps: int, first_batch: int = 0,
                    per_worker: bool = False) -> int:
        """Runs up to `num_steps` steps from `iterator` (`per_worker`: of this worker's own
        batches); returns how many ran.

        Raises:
            DataCheckError: for a batch that fails its checks (its step does not run);
                `first_batch` numbers the chunk's first batch for the message.
        """
        loop = self._loop("dataset", stage, None, per_worker=per_worker)
        with self._calling():
            done, failed = loop(iterator, tf.constant(num_steps, tf.int32))
        if int(failed) >= 0:
            raise self.checks.error(stage, int(failed), f"batch {first_batch + int(done)}")
        return int(done)

    def predict_arrays(self, x, index_batches):
        loop = self._loop("arrays", "predict", (x,))
        with self._calling():
            return loop((x,), tf.constant(index_batches, tf.int32))

    def predict_dataset(self, iterator, num_steps: int, first_batch: int = 0):
        """Runs up to `num_steps` predict steps from `iterator`; returns (how many ran,
        their outputs concatenated, flat). `first_batch` numbers the first for messages."""
        loop = self._loop("dataset", "predict", None)
        with self._calling():
            done, failed, outputs = loop(iterator, tf.constant(num_steps, tf.int32))
        if int(failed) >= 0:
            raise self.checks.error("predict", int(failed), f"batch {first_batch + int(done)}")
        return int(done), outputs

    def loop_kind(self, stage: str, capacity: int = MIN_FUSED_STEPS) -> str:
        """How `stage`'s array chunks of `capacity` steps run: "xla_chunk" (the chunk one XLA
        program), "xla_step" (each step an XLA program), "graph" or "eager"."""
        if self.run_eagerly:
            return "eager"
        if not self.jit_compile:
            return "graph"
        fused = stage != "predict" and capacity >= MIN_FUSED_STEPS
        return "xla_chunk" if fused else "xla_step"

    # ------------------------------------------------------------------ introspection
    def retrace_training(self) -> None:
        """Forgets the traced training step and loops: the next training call traces them
        again (new recorders, or an optimizer whose trace relied on smaller batches)."""
        self.train_step = self._compile_step(self._train_step)
        self._batch_limit = None
        self._loops = {k: f for k, f in self._loops.items() if k[1] != "train"}

    def train_step_graph(self) -> tf.Graph | None:
        """The traced graph of the training step (forward pass, gradients, update, update
        hooks; the graph XLA compiles under `jit_compile`), or None before the first
        training step, when running eagerly and under a strategy."""
        if self.run_eagerly or self.train_data_spec is None or self.strategy is not None:
            return None
        return self.train_step.get_concrete_function(self.train_data_spec).graph

    def tracing_counts(self) -> dict[str, int]:
        """How many times each traced function was traced (a retrace is a bug to report)."""
        counts = {}
        for name in ("train_step", "test_step", "predict_step"):
            fn = getattr(self, name)
            if hasattr(fn, "experimental_get_tracing_count"):
                counts[name] = fn.experimental_get_tracing_count()
        for (kind, stage, fused, _), fn in self._loops.items():
            if hasattr(fn, "experimental_get_tracing_count"):
                name = f"{stage}_{kind}" + ("_fused" if fused else "")
                counts[name] = counts.get(name, 0) + fn.experimental_get_tracing_count()
        return counts
