"""What `Model.compile` sets up: optimizer, loss, per-stage metrics and compiled steps.

Kept in a plain object, outside TensorFlow's attribute tracking, so that `save_weights` writes
the model's weights only; the optimizer's slots belong to training checkpoints.
"""

from __future__ import annotations

import numbers
import warnings

import tensorflow as tf

from graphfit import input_checks
from graphfit.compiled_steps import CompiledSteps
from graphfit.execution_sizer import ExecutionSizer
from graphfit.losses import LossSet
from graphfit.stage_metrics import STAGES, StageMetrics, check_metric_identifier

__all__ = ["CompileState", "resolve_jit_compile"]


def resolve_jit_compile(setting, model) -> bool:
    """True when the steps should be compiled with XLA.

    "auto" compiles with XLA when every layer supports it and, on a CPU-only machine, when no
    layer is known to run slower under XLA there: measured on a 2-core CPU, XLA speeds up a
    dense MLP step a little but makes a small convolutional net about twice as slow, because
    TensorFlow's own CPU convolutions (oneDNN) beat XLA's.
    """
    layers = list(model._flatten_layers())
    unsupported = [l.name for l in layers if not getattr(l, "supports_jit", True)]
    if setting is True:
        if unsupported:
            warnings.warn(
                f"jit_compile=True, but layers {unsupported} do not support XLA; compiling "
                f"without it.",
                stacklevel=3,
            )
            return False
        return True
    if setting is False or unsupported:
        return False
    if tf.config.list_physical_devices("GPU"):
        return True
    return all(getattr(l, "xla_friendly_on_cpu", True) for l in layers)


class CompileState:
    """The result of `compile`: validated settings, built lazily against the data."""

    def __init__(self, optimizer, loss, metrics, loss_weights, jit_compile,
                 steps_per_execution, run_eagerly):
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

        self.optimizer = None if optimizer is None else optimizers.get(optimizer)
        self.loss_set = LossSet(loss, loss_weights) if loss is not None else None
        metrics = metrics or []
        for item in metrics.values() if isinstance(metrics, dict) else metrics:
            for identifier in item if isinstance(item, (list, tuple)) else [item]:
                check_metric_identifier(identifier)
        self.metrics_spec = metrics
        self.jit_compile_setting = jit_compile
        self.run_eagerly = bool(run_eagerly)
        self.sizers = {
            "train": ExecutionSizer(steps_per_execution),
            "eval": ExecutionSizer(steps_per_execution),
        }
        self.stage_metrics: dict[str, StageMetrics] = {}
        self.steps: CompiledSteps | None = None
        self.jit_compile: bool | None = None

    def require_loss(self, caller: str) -> None:
        if self.loss_set is None:
            raise RuntimeError(
                f"{caller}() needs a loss: call model.compile(optimizer=..., loss=...) with a "
                f"loss first."
            )

    def prepare(self, model, feed) -> None:
        """Builds what the data needs: the model, losses, metrics, optimizer slots, steps."""
        x_spec, y_spec, _ = feed.element_spec
        model._build_for(x_spec)
        output_spec = model.output_spec
        if self.loss_set is not None:
            if not self.loss_set.built:
                self.loss_set.build(model.output_names, model.dtype)
            if not self.stage_metrics and y_spec is not None:
                self.stage_metrics = {
                    stage: StageMetrics(stage, self.metrics_spec, self.loss_set) for stage in STAGES
                }
                for metrics in self.stage_metrics.values():
                    metrics.build(y_spec, output_spec)
        variables = model.trainable_variables
        if self.steps is None or [id(v) for v in self.steps.variables] != [id(v) for v in variables]:
            # First use, or layers were frozen or unfrozen since: trace new steps.
            if self.optimizer is not None:
                self.optimizer.build(variables)
            self.jit_compile = resolve_jit_compile(self.jit_compile_setting, model)
            self.steps = CompiledSteps(model, self.loss_set, self.optimizer, self.stage_metrics,
                                       self.jit_compile, self.run_eagerly)
        self.steps.stage_metrics = self.stage_metrics

    def check_labels(self, model, feed, name: str) -> None:
        """Labels of in-memory data fit the loss and the model's outputs."""
        if feed.is_dataset or feed.y is None or self.loss_set is None:
            return
        names = model.output_names
        if names is None:
            input_checks.check_labels(name, feed.y, model.output_spec, self.loss_set.kind())
            return
        for output in names:
            if output in self.loss_set.losses:
                input_checks.check_labels(f"{name}[{output!r}]", feed.y[output],
                                          model.output_spec[output], self.loss_set.kind(output))
