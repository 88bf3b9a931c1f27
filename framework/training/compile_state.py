"""What `Model.compile` sets up: optimizer, loss, per-stage metrics and compiled steps.

Kept in a plain object, outside TensorFlow's attribute tracking, so that `save_weights` writes
the model's weights only; the optimizer's slots belong to training checkpoints.
"""

from __future__ import annotations

import numbers

from graphfit.core.graph_rewrites import check_rewrites
from graphfit.training import distribution, input_checks
from graphfit.training.compiled_steps import CompiledSteps
from graphfit.training.execution_sizer import ExecutionSizer
from graphfit.training.losses import LossSet
from graphfit.training.stage_metrics import STAGES, StageMetrics, check_metric_identifier
from graphfit.training.xla_support import resolve_jit_compile

__all__ = ["CompileState"]


def _check_metrics(metrics, argument: str):
    metrics = metrics or []
    if not isinstance(metrics, (list, tuple, dict)):
        raise ValueError(
            f"{argument} must be a list, or a dict by output name. Received: {argument}={metrics!r}"
        )
    # Keras's list of lists, one per output, may give an output None (no metrics).
    nested = not isinstance(metrics, dict) and any(isinstance(i, (list, tuple)) for i in metrics)
    for item in metrics.values() if isinstance(metrics, dict) else metrics:
        if item is None and nested:
            continue
        for identifier in item if isinstance(item, (list, tuple)) else [item]:
            check_metric_identifier(identifier)
    return metrics


def _check_graph_rewrites(optimizer) -> None:
    """A bad Grappler setting of the optimizer refused at compile, not at the first fit.

    Settings that depend on the built variables (LM's) are checked again when the loops run.
    """
    settings = optimizer.graph_rewrites
    if not settings:
        return
    try:
        check_rewrites(settings)
    except ValueError as error:
        raise ValueError(f"{type(optimizer).__name__}.graph_rewrites: {error}") from None


def _check_distributed_model(strategy, model) -> None:
    from graphfit.training.compiled_steps import overrides_step

    for step in ("train_step", "test_step", "predict_step"):
        if overrides_step(model, step):
            raise ValueError(
                f"{type(model).__name__} overrides {step}, which is not supported under a "
                f"tf.distribute strategy: the distributed engine runs the default steps. Use "
                f"the default {step}, or train on one device.")
    distribution.check_created_in_scope(strategy, model.variables, f"Model {model.name!r}'s")


def _check_settings(jit_compile, steps_per_execution, auto_scale_loss) -> None:
    if jit_compile not in (True, False, "auto"):
        raise ValueError(
            f"jit_compile must be True, False or 'auto'. Received: jit_compile={jit_compile!r}")
    if steps_per_execution != "auto" and not (
            isinstance(steps_per_execution, numbers.Integral) and steps_per_execution >= 1):
        raise ValueError(
            f"steps_per_execution must be a positive integer or 'auto'. Received: "
            f"steps_per_execution={steps_per_execution!r}")
    if auto_scale_loss not in (True, False):
        raise ValueError(
            f"auto_scale_loss must be True or False. Received: "
            f"auto_scale_loss={auto_scale_loss!r}")


class CompileState:
    """The result of `compile`: validated settings, built lazily against the data."""

    def __init__(self, optimizer, loss, metrics, loss_weights, jit_compile,
                 steps_per_execution, run_eagerly, weighted_metrics=None, dtype_policy=None,
                 auto_scale_loss=True):
        _check_settings(jit_compile, steps_per_execution, auto_scale_loss)
        from graphfit import optimizers  # the optimizers package imports graphfit

        # Compiled inside `strategy.scope()`: the steps run on every replica of it.
        self.strategy = distribution.current_strategy()
        if self.strategy is not None:
            distribution.check_strategy(self.strategy)
            if jit_compile is True:
                raise ValueError(
                    "jit_compile=True is not supported under a tf.distribute strategy: compile "
                    "with jit_compile='auto' or False (the distributed steps run without XLA).")
        # auto_scale_loss=False: no LossScaleOptimizer under mixed_float16, as in Keras.
        scaling_policy = dtype_policy if auto_scale_loss else None
        self.optimizer = None if optimizer is None else optimizers.get(optimizer, scaling_policy)
        self.dtype_policy = dtype_policy
        if self.strategy is not None and self.optimizer is not None:
            self.optimizer.check_training({}, distributed=True)
            distribution.check_created_in_scope(self.strategy, self.optimizer.variables,
                                                f"Optimizer {self.optimizer.name!r}'s")
        if self.optimizer is not None:
            _check_graph_rewrites(self.optimizer)
        self.loss_set = LossSet(loss, loss_weights) if loss is not None else None
        self.metrics_spec = _check_metrics(metrics, "metrics")
        self.weighted_metrics_spec = _check_metrics(weighted_metrics, "weighted_metrics")
        self.jit_compile_setting = jit_compile
        self.run_eagerly = bool(run_eagerly)
        # What compile received, for `Model.get_compile_config` (a saved model's compile).
        self.arguments = dict(loss=loss, metrics=metrics, loss_weights=loss_weights,
                              weighted_metrics=weighted_metrics, jit_compile=jit_compile,
                              steps_per_execution=steps_per_execution,
                              run_eagerly=self.run_eagerly)
        # One per loop: each learns the time per step of its own stage.
        self.sizers = {name: ExecutionSizer(steps_per_execution)
                       for name in ("train", "val", "test", "predict")}
        self.stage_metrics: dict[str, StageMetrics] = {}
        self.recorders: list = []  # the training step's recorders (`Model.add_step_recorder`)
        self.steps: CompiledSteps | None = None
        self._steps_key = None
        self.jit_compile: bool | None = None

    def require_loss(self, caller: str) -> None:
        if self.loss_set is None:
            raise RuntimeError(
                f"{caller}() needs a loss: call model.compile(optimizer=..., loss=...) with a "
                f"loss first."
            )

    def outputs_needing_labels(self, output_names) -> list[str]:
        """The outputs with a loss or metrics: their labels must be given."""
        if output_names is None or self.loss_set is None:
            return []
        needed = set(self.loss_set.losses)
        for spec in (self.metrics_spec, self.weighted_metrics_spec):
            if isinstance(spec, dict):
                needed |= set(spec)
            elif spec:
                needed |= set(output_names)
        return [n for n in output_names if n in needed]

    def prepare(self, model, feed) -> None:
        """Builds the model for `feed`'s inputs, arranges its labels by output, and builds
        what the data needs: losses, metrics, optimizer slots and the compiled steps.

        Args:
            model: the model.
            feed: an `ArrayFeed`, `DatasetFeed` or `SpecFeed` (`graphfit.training.feeds`).

        Raises:
            ValueError: when the inputs do not fit the built model, or the labels do not fit
                its outputs.
        """
        # Under a tf.distribute strategy the weights are created mirrored, one per replica.
        with distribution.strategy_scope(self.strategy):
            try:
                model.build_for(feed.element_spec[0], feed.names[0])
            except ValueError as error:
                if type(error) is not ValueError or not getattr(feed, "is_dataset", False):
                    raise
                # Keras's usual slip: its error names shapes, and the fix is .batch().
                raise ValueError(
                    f"{error} ({feed.names[0]} is a tf.data.Dataset: if it yields single "
                    f"samples, not batches, batch it first: dataset.batch(32).)") from None
        names = model.output_names
        feed.arrange_targets(names, self.outputs_needing_labels(names))
        y_spec = feed.element_spec[1]
        if self.loss_set is not None and not self.loss_set.built:
            self.loss_set.build(model.output_names, model.dtype, y_spec, model.output_spec)
        # A predict-only state has neither loss nor optimizer: no stage needs metrics.
        trains = self.loss_set is not None or self.optimizer is not None
        if trains and not self.stage_metrics and (y_spec is not None or self.loss_set is None):
            stage_metrics = {
                stage: StageMetrics(stage, self.metrics_spec, self.weighted_metrics_spec,
                                    self.loss_set, model.dtype)
                for stage in STAGES
            }
            for metrics in stage_metrics.values():
                metrics.build(y_spec, model.output_spec)
            self.stage_metrics = stage_metrics  # only once every stage built
        variables = model.trainable_variables
        if self.strategy is not None:
            _check_distributed_model(self.strategy, model)
            if self.loss_set is not None:
                distribution.check_losses(self.loss_set)
        # Freezing or unfreezing changes the variables trained and the update hooks run.
        key = ([id(v) for v in variables], [(id(l), l.trainable) for l in model.flatten_layers()])
        if self.steps is None or key != self._steps_key:
            if self.optimizer is not None:
                with distribution.strategy_scope(self.strategy):  # mirrored slots
                    self.optimizer.build(variables)
            self.jit_compile = self.strategy is None and resolve_jit_compile(
                self.jit_compile_setting, model, self.optimizer, feed.varying_shapes)
            self.steps = CompiledSteps(model, self.loss_set, self.optimizer, self.stage_metrics,
                                       self.jit_compile, self.run_eagerly,
                                       strategy=self.strategy)
            self._steps_key = key
        self.steps.stage_metrics = self.stage_metrics
        self.steps.set_recorders(self.recorders)

    def set_recorders(self, recorders) -> None:
        """The training step's recorders from now on (traced again when they change)."""
        self.recorders = list(recorders)
        if self.steps is not None:
            self.steps.set_recorders(self.recorders)

    def check_labels(self, model, feed, stage: str) -> None:
        """Labels fit the loss and the model's outputs: all of them for in-memory data, and
        batch by batch inside the compiled loop for a dataset."""
        if self.loss_set is None or feed.element_spec[1] is None:
            return
        names = model.output_names
        outputs = [None] if names is None else [n for n in names if n in self.loss_set.losses]
        label_name = f"{feed.names[1]}" if not feed.is_dataset else f"labels of {feed.names[0]}"
        checks = {}
        for output in outputs:
            spec = model.output_spec if output is None else model.output_spec[output]
            kind = self.loss_set.kind(output)
            name = label_name if output is None else f"{label_name}[{output!r}]"
            if feed.is_dataset:
                checks[output] = (name, spec, kind)
            else:
                y = feed.y if output is None else feed.y[output]
                input_checks.check_labels(name, y, spec, kind)
        if feed.is_dataset:
            self.steps.checks.label_checks[stage] = checks
