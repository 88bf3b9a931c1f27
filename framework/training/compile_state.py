"""What `Model.compile` sets up: optimizer, loss, per-stage metrics and compiled steps.

Kept in a plain object, outside TensorFlow's attribute tracking, so that `save_weights` writes
the model's weights only; the optimizer's slots belong to training checkpoints.
"""

from __future__ import annotations

import numbers
import warnings
import weakref

import tensorflow as tf

from graphfit.core.graph_rewrites import check_rewrites
from graphfit.training import distribution, input_checks
from graphfit.training.compiled_steps import CompiledSteps
from graphfit.training.execution_sizer import ExecutionSizer
from graphfit.training.losses import LossSet
from graphfit.training.stage_metrics import STAGES, StageMetrics, check_metric_identifier

__all__ = ["CompileState", "resolve_jit_compile"]


_TOLD_NO_XLA: "weakref.WeakSet" = weakref.WeakSet()


def resolve_jit_compile(setting, model, optimizer=None) -> bool:
    """True when the steps should be compiled with XLA.

    "auto" compiles with XLA when every layer supports it (`Layer.supports_jit`; once per
    model, a warning names those that do not) and, on a CPU-only machine, when
    neither a layer nor the optimizer is known to run slower under XLA there (their
    `xla_friendly_on_cpu`): measured on a 2-core CPU, XLA (which then runs a whole chunk of
    steps as one program, `graphfit.training.fused_loops`) trains a dense MLP 1.3 to 1.4x
    faster than TensorFlow's graph, but a small convolutional net about ten times slower,
    because TensorFlow's own CPU convolutions (oneDNN) beat XLA's, and Levenberg–Marquardt's
    step compiles for seconds. The compute dtype does not change the choice: under
    "mixed_bfloat16" oneDNN's bfloat16 matmuls are about twice as fast as XLA's on a CPU with
    AMX, but on the MLP the graph's per-op cost outweighs that (XLA's fused loop was still
    1.1 to 1.3x faster; docs/performance.md). Once traced, the steps drop XLA themselves for
    ops it cannot compile and for inputs whose shape keeps changing
    (`graphfit.training.xla_support`).

    Raises:
        ValueError: jit_compile=True on a model with a layer whose `supports_jit` is False.
    """
    layers = list(model.flatten_layers())
    unsupported = [f"{l.name!r} ({type(l).__name__})" for l in layers if not l.supports_jit]
    if setting is False:
        return False
    if unsupported:
        if setting is True:
            raise ValueError(
                f"jit_compile=True, but layers {', '.join(unsupported)} of model "
                f"{model.name!r} do not support XLA (their supports_jit is False). Compile "
                f"with jit_compile='auto' or False.")
        if model not in _TOLD_NO_XLA:  # once per model: compile runs again on every fit
            _TOLD_NO_XLA.add(model)
            warnings.warn(
                f"jit_compile='auto': model {model.name!r} runs without XLA, because layers "
                f"{', '.join(unsupported)} cannot be XLA-compiled (supports_jit=False).",
                stacklevel=4)
        return False
    if setting is True:
        return True
    if tf.config.list_physical_devices("GPU"):
        return True
    friendly = [l.xla_friendly_on_cpu for l in layers]
    return all(friendly) and (optimizer is None or optimizer.xla_friendly_on_cpu)


def _check_metrics(metrics, argument: str):
    metrics = metrics or []
    if not isinstance(metrics, (list, tuple, dict)):
        raise ValueError(
            f"{argument} must be a list, or a dict by output name. Received: {argument}={metrics!r}"
        )
    for item in metrics.values() if isinstance(metrics, dict) else metrics:
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
    # A LossScaleOptimizer passes its inner optimizer's on: name the one that set them.
    owner = getattr(optimizer, "inner_optimizer", optimizer)
    try:
        check_rewrites(settings)
    except ValueError as error:
        raise ValueError(f"{type(owner).__name__}.graph_rewrites: {error}") from None


def _check_distributed_optimizer(strategy, optimizer) -> None:
    """Refuses what the distributed steps cannot run, before any step."""
    from graphfit.optimizers.optimizer import Optimizer  # the optimizers package imports graphfit

    # A LossScaleOptimizer's minimize is its inner optimizer's gradient step, scaled.
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    if type(inner).minimize is not Optimizer.minimize \
            and not optimizer.steps_across_replicas:
        raise ValueError(
            f"{type(optimizer).__name__} runs its own minimize (a second-order step), which is "
            f"not supported under a tf.distribute strategy yet: use a first-order optimizer "
            f"(SGD, Adam, ...) there, or train on one device.")
    distribution.check_created_in_scope(strategy, optimizer.variables,
                                        f"Optimizer {optimizer.name!r}'s")


def _check_distributed_model(strategy, model) -> None:
    from graphfit.layers import BlackBox  # layers import graphfit
    from graphfit.training.compiled_steps import overrides_step

    for step in ("train_step", "test_step", "predict_step"):
        if overrides_step(model, step):
            raise ValueError(
                f"{type(model).__name__} overrides {step}, which is not supported under a "
                f"tf.distribute strategy: the distributed engine runs the default steps. Use "
                f"the default {step}, or train on one device.")
    for layer in model.flatten_layers():
        if isinstance(layer, BlackBox):
            raise ValueError(
                f"Layer {layer.name!r} is a BlackBox (Python code run from the graph), which is "
                f"not supported under a tf.distribute strategy: train on one device.")
    distribution.check_created_in_scope(strategy, model.variables, f"Model {model.name!r}'s")


class CompileState:
    """The result of `compile`: validated settings, built lazily against the data."""

    def __init__(self, optimizer, loss, metrics, loss_weights, jit_compile,
                 steps_per_execution, run_eagerly, weighted_metrics=None, dtype_policy=None):
        if jit_compile not in (True, False, "auto"):
            raise ValueError(
                f"jit_compile must be True, False or 'auto'. Received: jit_compile={jit_compile!r}"
            )
        if steps_per_execution != "auto" and not (
            isinstance(steps_per_execution, numbers.Integral) and steps_per_execution >= 1
        ):
            raise ValueError(
                f"steps_per_execution must be a positive integer or 'auto'. Received: "
                f"steps_per_execution={steps_per_execution!r}"
            )
        from graphfit import optimizers  # the optimizers package imports graphfit

        # Compiled inside `strategy.scope()`: the steps run on every replica of it.
        self.strategy = distribution.current_strategy()
        if self.strategy is not None:
            distribution.check_strategy(self.strategy)
            if jit_compile is True:
                raise ValueError(
                    "jit_compile=True is not supported under a tf.distribute strategy: compile "
                    "with jit_compile='auto' or False (the distributed steps run without XLA).")
        self.optimizer = None if optimizer is None else optimizers.get(optimizer)
        self.dtype_policy = dtype_policy
        if (self.optimizer is not None and dtype_policy is not None
                and dtype_policy.needs_loss_scaling
                and not isinstance(self.optimizer, optimizers.LossScaleOptimizer)):
            # float16's range underflows small gradients: Keras's dynamic loss scaling.
            self.optimizer = optimizers.LossScaleOptimizer(self.optimizer)
        if self.strategy is not None and self.optimizer is not None:
            _check_distributed_optimizer(self.strategy, self.optimizer)
        if self.optimizer is not None:
            _check_graph_rewrites(self.optimizer)
        self.loss_set = LossSet(loss, loss_weights) if loss is not None else None
        self.metrics_spec = _check_metrics(metrics, "metrics")
        self.weighted_metrics_spec = _check_metrics(weighted_metrics, "weighted_metrics")
        self.jit_compile_setting = jit_compile
        self.run_eagerly = bool(run_eagerly)
        # One per loop: each learns the time per step of its own stage.
        self.sizers = {name: ExecutionSizer(steps_per_execution)
                       for name in ("train", "val", "test", "predict")}
        self.stage_metrics: dict[str, StageMetrics] = {}
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
        """Builds what the data needs: losses, metrics, optimizer slots, compiled steps.

        The model is built, and the feed's labels arranged by output, before this runs.
        """
        y_spec = feed.element_spec[1]
        if self.loss_set is not None and not self.loss_set.built:
            self.loss_set.build(model.output_names, model.dtype)
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
                self.jit_compile_setting, model, self.optimizer)
            self.steps = CompiledSteps(model, self.loss_set, self.optimizer, self.stage_metrics,
                                       self.jit_compile, self.run_eagerly,
                                       jit_required=self.jit_compile_setting is True,
                                       strategy=self.strategy)
            self._steps_key = key
        self.steps.stage_metrics = self.stage_metrics

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
            self.steps.label_checks[stage] = checks
