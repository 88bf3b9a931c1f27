"""The compiled train, test and predict steps, and the loops that run several per call.

Each step is the model's own public step (`Model.train_step(data)`, `test_step`,
`predict_step`; the defaults are in `graphfit.training.steps`), traced once per input
signature and optionally compiled by XLA. Around the model's train step this module adds:

    update hooks that an overridden step left uncollected: applied once, after the step
    with gradient taps on (TensorBoard's gradient histograms): the raw gradients that
        minimize reported are assigned to one tap variable per trainable variable
    with node / activation taps on (TensorBoard's gradient_taps / activation_gradient_taps),
        every N steps: d(sum of a node)/d(variables) norms from the same forward pass, or
        d(loss)/d(layer output) from the same backward pass (the default train step only)

A loop function runs a chunk of such steps per call and updates the stage's metrics after each
step from the step's `StepResult`, so Python runs once per chunk, not once per batch. With XLA
on, a chunk over in-memory arrays is one XLA program (`fused_loops`: gathers, steps and metric
updates); a dataset's loop (a `tf.function`, never XLA) calls the compiled step per batch and
updates the metrics outside XLA, as does an array loop whose metrics XLA cannot compile.
"""

# Just over 400 lines: one class owns the traced steps and the loops that run them (arrays,
# datasets, strategy); the fused array loops, predict's loops and the tap switches live in
# fused_loops.py, predict_loops.py and step_taps.py; the train/test loops could follow.
from __future__ import annotations

import warnings

import tensorflow as tf

from graphfit.core import autograph_scope, batch_bounds, host_errors, step_context, update_hooks
from graphfit.core.graph_rewrites import graph_rewrites
from graphfit.core.step_types import StepResult, unpack_data
from graphfit.training import (
    activation_taps,
    distribution,
    fused_loops,
    input_checks,
    node_taps,
    predict_loops,
    step_taps,
    steps,
    xla_support,
)
from graphfit.training.batches import as_tuple, gather_batch
from graphfit.training.per_model_functions import per_model_function

__all__ = ["CompiledSteps", "overrides_step"]


def _as_data(batch) -> tuple:
    """The batch as the model's step receives it: (x,), (x, y) or (x, y, sample_weight)."""
    batch = tuple(batch)
    while len(batch) > 1 and batch[-1] is None:
        batch = batch[:-1]
    return batch


def _loop_signature(data: tuple):
    """The relaxed signature of an array loop: any number of samples, rows and batch size."""
    data_spec = tf.nest.map_structure(
        lambda t: tf.TensorSpec([None, *t.shape[1:]], t.dtype), data
    )
    return [data_spec, tf.TensorSpec([None, None], tf.int32)]


def overrides_step(model, step: str = "train_step") -> bool:
    """Whether the model's class overrides `step` ("train_step", "test_step" or
    "predict_step"), Keras-style."""
    from graphfit.models.model import Model  # models import the training package

    return getattr(type(model), step) is not getattr(Model, step)


def _check_result(result, step: str) -> StepResult:
    if not isinstance(result, StepResult):
        raise TypeError(
            f"{step}(data) must return a graphfit.core.step_types.StepResult(loss, y_pred, "
            f"output_losses, logs). Received: {result!r}"
        )
    return result


class CompiledSteps(step_taps.TapSwitches):
    """The traced steps of one compiled model, for one set of trainable variables.

    Args:
        model: the built model.
        loss_set: the compiled `LossSet` (None when only predicting).
        optimizer: the optimizer (built for `model.trainable_variables`).
        stage_metrics: {"train": StageMetrics, "val": ..., "test": ...}.
        jit_compile: compile each step with XLA.
        run_eagerly: run everything eagerly, for debugging.
        jit_required: XLA was asked for explicitly (jit_compile=True): a step XLA cannot
            compile is an error. Otherwise ("auto") such a step, or a step fed more than
            `xla_support.MAX_XLA_SHAPES` input shapes, warns and runs without XLA.
        strategy: the `tf.distribute` strategy the model was compiled under, or None. Each
            step then runs on every replica on its slice of the batch, without XLA, and the
            loop combines the replicas' results (`graphfit.training.distribution`).
    """

    def __init__(self, model, loss_set, optimizer, stage_metrics, jit_compile: bool,
                 run_eagerly: bool = False, jit_required: bool = False, strategy=None):
        if strategy is None:
            distribution.check_not_distributed(model)
        self.strategy = strategy
        self.model = model
        self.loss_set = loss_set
        self.optimizer = optimizer
        self.stage_metrics = stage_metrics
        self.jit_compile = jit_compile and not run_eagerly
        self.run_eagerly = run_eagerly
        self.jit_required, self._xla_problem = jit_required, None  # see `_guarded`
        self._shape_logs = {name: xla_support.ShapeLog() for name in ("train", "test", "predict")}
        self.variables = list(model.trainable_variables)
        # Gradient taps: None until `enable_gradient_taps`; `_filled_taps`: those the step fills.
        self.gradient_taps: list[tf.Variable] | None = None
        self._filled_taps: list[int] = []
        self.node_taps: node_taps.NodeTaps | None = None  # enable_node_taps
        self.activation_taps: activation_taps.ActivationTaps | None = None  # enable_..._taps
        # The specs of the data the train step was last traced for ((x,), (x, y) or
        # (x, y, sample_weight)); None before the first training step.
        self.train_data_spec = None
        # {stage: {output: (name, spec, loss kind)}}: dataset labels are checked batch by batch.
        self.label_checks: dict[str, dict] = {}
        # The largest training batch `fit` promised (`expect_batches`), and the batch size the
        # traced training step relied on (`core.batch_bounds`; None: none).
        self._largest_batch: int | None = None
        self._batch_limit: int | None = None
        self.train_step = self._compile_step(self._train_step)
        self.test_step = self._compile_step(self._test_step)
        self.predict_step = self._compile_step(self._predict_step)
        self._array_loops: dict = {}
        self._dataset_loops: dict = {}
        self._fused = fused_loops.FusedArrayLoops(
            lambda stage, batch: self._run_and_record(stage, batch, record_shape=False),
            self._record_loop_shape)

    # ------------------------------------------------------------------ the single steps
    def _compile_step(self, fn):
        # Under a strategy the loop is the one tf.function: a nested one may not synchronize
        # replicas (all-reduce, mirrored assignments).
        if self.run_eagerly or self.strategy is not None:
            return fn
        # autograph=False: the step is graphfit's own code, whose control flow is explicit;
        # the user's code it calls (`train_step` overrides, layers' `call`) still converts
        # (`autograph_scope.convert_user_code`).
        if not self.jit_compile:
            return per_model_function(fn, jit_compile=False, reduce_retracing=True,
                                      autograph=False)

        def checked(data):
            result = fn(data)  # then, at trace time, name what XLA cannot compile
            problem = xla_support.find_unsupported_op(tf.compat.v1.get_default_graph(),
                                                      self.model)
            if problem is not None:
                self._xla_problem = problem
                raise problem
            return result

        return per_model_function(checked, jit_compile=True, reduce_retracing=True,
                                  autograph=False)

    def _guarded(self, run):
        """`run()`, then XLA dropped (with a warning) when the traced step holds an op XLA
        cannot compile (run again without it) or has seen too many input shapes."""
        self._xla_problem = None
        host_errors.clear()
        try:
            result = run()
        except Exception:
            problem = self._xla_problem
            if problem is None:
                _raise_host_error()
                raise
            if self.jit_required:
                raise problem from None
            self._drop_xla(f"{problem.layer} runs a {problem.op_type} op, which XLA cannot "
                           f"compile")
            result = run()
        self._check_shapes()
        return result

    def _check_shapes(self) -> None:
        counts = {name: log.count() for name, log in self._shape_logs.items()}
        worst = max(counts, key=counts.get)
        if self.jit_compile and counts[worst] > xla_support.MAX_XLA_SHAPES:
            self._drop_xla(
                f"the {worst} step was fed more than {xla_support.MAX_XLA_SHAPES} distinct "
                f"input shapes, and XLA compiles it again for each new one")

    def _drop_xla(self, reason: str) -> None:
        """Traces every step again without XLA, from the next call on."""
        warnings.warn(f"jit_compile='auto': {reason}; running model "
                      f"{self.model.name!r} without XLA.", stacklevel=4)
        self.jit_compile = False
        self.test_step = self._compile_step(self._test_step)
        self.predict_step = self._compile_step(self._predict_step)
        self._array_loops, self._dataset_loops = {}, {}
        self._fused.forget()
        self.retrace_training()

    def _prepare_shape_log(self, stage: str, data) -> None:
        if self.jit_compile:
            self._shape_logs[stage if stage in ("train", "predict") else "test"].prepare(
                _as_data(data))

    def _record_shape(self, step: str, data) -> None:
        if self.jit_compile:
            self._shape_logs[step].record(data)

    def _record_loop_shape(self, stage: str, data, rows) -> None:
        """The shape of the batches a fused loop gathers from `data`, `rows` at a time."""
        self._shape_logs["train" if stage == "train" else "test"].record(_as_data(data), rows)

    def _train_step(self, data):
        self.train_data_spec = tf.nest.map_structure(_spec, data)
        if self.node_taps is not None or self.activation_taps is not None:
            if overrides_step(self.model):
                raise ValueError(
                    f"TensorBoard's gradient_taps and activation_gradient_taps need the default "
                    f"train_step, but {type(self.model).__name__} overrides train_step: remove "
                    f"them, or return what you need from your train_step in StepResult.logs.")
            return steps.train_step(self.model, data, taps=self.node_taps,
                                    activation_taps=self.activation_taps)
        # Update hooks that an overridden step did not collect itself run after it, once;
        # label-reading layers (ClassMeans) see the batch's labels in it too.
        with update_hooks.collect_updates() as pending, \
                step_context.training_step(unpack_data(data)[1]), \
                batch_bounds.promised(self._largest_batch) as promise:
            result = autograph_scope.convert_user_code(self.model.train_step)(data)
        update_hooks.apply_updates(pending, distribution.replica_share(tf.float64))
        # At trace time: what the traced step relied on (`expect_batches` reads it).
        self._batch_limit = batch_bounds.tightest(self._batch_limit, promise.limit)
        return _check_result(result, "train_step")

    def expect_batches(self, largest: int | None) -> None:
        """Told by `fit`, before its first epoch, how many examples its largest training
        batch holds (None: it cannot say, a dataset). The training step traced from now on
        is promised that (`core.batch_bounds`: Levenberg–Marquardt then linearizes a batch
        that fits one Jacobian chunk without the loop over chunks); a step traced earlier
        that relied on smaller batches is traced again, so larger ones get the loop back
        and its bounded memory. Smaller batches keep the traced step."""
        self._largest_batch = largest
        limit = self._batch_limit
        if limit is not None and (largest is None or largest > limit):
            self.retrace_training()

    def _train_step_with_taps(self, data):
        from graphfit.optimizers.gradient_record import collect_gradients  # imports graphfit

        with collect_gradients() as gradients:
            result = self._train_step(data)
        # Runs at trace time: records which taps this trace fills (none when a minimize
        # override reports no gradients).
        self._filled_taps = [i for i, v in enumerate(self.variables) if v.ref() in gradients]
        for i in self._filled_taps:
            gradient = tf.convert_to_tensor(gradients[self.variables[i].ref()])  # IndexedSlices
            self.gradient_taps[i].assign(tf.cast(gradient, self.gradient_taps[i].dtype))
        return result

    def _test_step(self, data):
        step = autograph_scope.convert_user_code(self.model.test_step)
        return _check_result(step(data), "test_step")

    def _predict_step(self, data):
        return autograph_scope.convert_user_code(self.model.predict_step)(data)

    # ------------------------------------------------------------------ loops over chunks
    def _in_scope(self, run):
        # A model that only predicts was never compiled: no optimizer, TensorFlow's settings.
        rewrites = None if self.optimizer is None else self.optimizer.graph_rewrites
        with distribution.strategy_scope(self.strategy), graph_rewrites(rewrites):
            return self._guarded(run)

    def _run_and_record(self, stage: str, batch, check_labels: bool = False,
                        record_shape: bool = True) -> None:
        data = _as_data(batch)
        x, y, sample_weight = unpack_data(data)
        step = self.train_step if stage == "train" else self.test_step
        if record_shape:
            self._record_shape("train" if stage == "train" else "test", data)
        checks = []
        if check_labels:
            checks = input_checks.label_assertions(y, self.label_checks.get(stage, {}))
            if stage == "train":  # layers that read the labels in training (ClassMeans)
                checks += input_checks.layer_label_assertions(self.model, y)
            checks += input_checks.layer_input_assertions(self.model, x)  # a GINConv's ids
        with tf.control_dependencies(checks):  # a bad batch stops the loop before its step
            across = stage == "train" and self.optimizer.steps_across_replicas
            result = distribution.on_replicas(self.strategy, step, data, across)
        self.stage_metrics[stage].update(y, sample_weight, result,
                                         steps.batch_size_of(result, data))

    def run_arrays(self, stage: str, data: tuple, index_batches, capacity: int = 1) -> int:
        """Runs one step per row of `index_batches` (sample indices into `data`).

        Args:
            capacity: with XLA, the rows the fused loop's index matrix is padded to (the
                largest chunk of this stage), so that one compiled program runs every chunk.
        """
        self._prepare_shape_log(stage, data)

        def run():
            if self.loop_kind(stage) == "xla_chunk" and self._fused.accepts(stage, data,
                                                                            capacity):
                try:
                    return self._fused.run(stage, data, index_batches, capacity)
                except tf.errors.InvalidArgumentError as error:
                    if not fused_loops.is_unsupported_op_error(error):
                        raise
                    # An op XLA cannot compile (a metric function's, or the step's: then the
                    # step-by-step loop below raises it again); nothing ran.
                    self._fused.refused.add(stage)
            indices = tf.convert_to_tensor(index_batches, tf.int32)
            return self._array_loop(stage, data)(data, indices)

        return int(self._in_scope(run))

    def loop_kind(self, stage: str) -> str:
        """How `stage`'s array loop runs: "xla_chunk" (the whole chunk one XLA program, for
        chunks of at least `fused_loops.MIN_FUSED_STEPS` steps; shorter ones run per step),
        "xla_step" (each step an XLA program; metrics and gathers between them) or "graph"
        (a TensorFlow graph; "eager" with run_eagerly)."""
        if self.run_eagerly:
            return "eager"
        if not self.jit_compile:
            return "graph"
        fused = self.strategy is None and stage in ("train", "val", "test")
        return "xla_chunk" if fused and stage not in self._fused.refused else "xla_step"

    def run_dataset(self, stage: str, iterator, num_steps: int) -> int:
        """Runs up to `num_steps` steps from `iterator`; returns how many ran."""
        steps_wanted = tf.constant(num_steps, tf.int32)
        self._prepare_shape_log(stage, as_tuple(iterator.element_spec))
        return int(self._in_scope(lambda: self._dataset_loop(stage)(iterator, steps_wanted)))

    def predict_arrays(self, x, index_batches):
        indices = tf.convert_to_tensor(index_batches, tf.int32)
        self._prepare_shape_log("predict", (x,))
        return self._in_scope(lambda: self._array_loop("predict", (x,))((x,), indices))

    def predict_dataset(self, iterator, num_steps: int):
        steps_wanted = tf.constant(num_steps, tf.int32)
        self._prepare_shape_log("predict", as_tuple(iterator.element_spec))
        return self._in_scope(lambda: self._dataset_loop("predict")(iterator, steps_wanted))

    def _array_loop(self, stage: str, data: tuple):
        signature = _loop_signature(data)
        key = (stage, str(signature))
        if key not in self._array_loops:
            if stage == "predict":
                fn = predict_loops.array_loop(self.model, self._predict_batch)
            else:
                def fn(data, index_batches, stage=stage):
                    steps = tf.shape(index_batches)[0]

                    def step(i):
                        self._run_and_record(stage, gather_batch(data, index_batches[i]))
                        return (i + 1,)

                    tf.while_loop(lambda i: i < steps, step, (tf.constant(0),))
                    return steps
            # Explicit control flow, no AutoGraph: converting the loop's source cost a
            # tenth of a second on every model's first call.
            self._array_loops[key] = fn if self.run_eagerly else per_model_function(
                fn, input_signature=signature, autograph=stage == "predict")
        return self._array_loops[key]

    def _dataset_loop(self, stage: str):
        if stage not in self._dataset_loops:
            if stage == "predict":
                fn = predict_loops.dataset_loop(self.model, self._predict_batch)
            else:
                def fn(iterator, num_steps, stage=stage):
                    done = tf.constant(0, tf.int32)
                    for _ in tf.range(num_steps):
                        element = iterator.get_next_as_optional()
                        if not element.has_value():
                            break
                        self._run_and_record(stage, as_tuple(element.get_value()),
                                             check_labels=True)
                        done += 1
                    return done
            self._dataset_loops[stage] = fn if self.run_eagerly else per_model_function(fn)
        return self._dataset_loops[stage]

    def _predict_batch(self, batch):
        self._record_shape("predict", batch)
        # Outside the (XLA-)compiled step, which drops a layer's own asserts: a GINConv's ids.
        with tf.control_dependencies(input_checks.layer_input_assertions(self.model, batch[0])):
            return distribution.on_replicas(self.strategy, self.predict_step, batch)

    # ------------------------------------------------------------------ introspection
    def retrace_training(self) -> None:
        """Forgets the traced training step and loops: the next training call traces them
        again (new taps, or an optimizer whose trace relied on smaller batches)."""
        traced = self._train_step if self.gradient_taps is None else self._train_step_with_taps
        self.train_step = self._compile_step(traced)
        self._batch_limit = None  # nothing traced relies on a batch size yet
        self._array_loops = {k: f for k, f in self._array_loops.items() if k[0] != "train"}
        self._dataset_loops.pop("train", None)
        self._fused.forget(("train",))

    def train_step_graph(self) -> tf.Graph | None:
        """The traced graph of the training step (forward pass, gradients, update, update
        hooks; the graph XLA compiles under `jit_compile`), or None before the first
        training step and when running eagerly."""
        if self.run_eagerly or self.train_data_spec is None:
            return None
        if self.strategy is not None:  # the step is traced inside the loop, per replica
            return None
        return self.train_step.get_concrete_function(self.train_data_spec).graph

    def tracing_counts(self) -> dict[str, int]:
        """How many times each traced function was traced (a retrace is a bug to report)."""
        counts = {}
        for name in ("train_step", "test_step", "predict_step"):
            fn = getattr(self, name)
            if hasattr(fn, "experimental_get_tracing_count"):
                counts[name] = fn.experimental_get_tracing_count()
        for (stage, _), fn in self._array_loops.items():
            if hasattr(fn, "experimental_get_tracing_count"):
                counts[f"{stage}_arrays"] = counts.get(f"{stage}_arrays", 0) + (
                    fn.experimental_get_tracing_count()
                )
        for key, count in self._fused.tracing_counts().items():
            counts[key] = counts.get(key, 0) + count
        return counts


def _raise_host_error() -> None:
    """Raises, in place of TensorFlow's wrapper, the error Python code in the step recorded
    (a BlackBox function's bad result), so the user reads the layer's own message."""
    error = host_errors.take()
    if error is not None:
        # Keep its cause (the user's own exception and traceback), hide TensorFlow's.
        raise error.with_traceback(None) from error.__cause__


def _spec(tensor):
    return None if tensor is None else tf.TensorSpec(tensor.shape, tensor.dtype)
