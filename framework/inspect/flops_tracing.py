"""The graphs `graphfit.inspect.flops` counts: the training step traced with a probe, or the
compiled train step's own graph, recorded while it was traced (`StepTrace`).

`count_flops` needs more of the training step than its graph: where each phase starts in the
graph's op order (a `StepProbe` the default `train_step` calls), which layer created each op
(`flops_graph.LayerOwners`, an op callback) and the gradients `minimize` reports (the backward
pass is what they depend on). All three are known only while the step is traced. Alone,
`count_flops` traces a copy of the step for them (`trace_training_step`). `graphfit inspect`
traces the model's compiled train step anyway; a `StepTrace` open around that trace records
them there, and `count_flops(..., step=trace)` counts on that graph: the step is traced once.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Iterator

import tensorflow as tf

from graphfit.core import step_context, update_hooks
from graphfit.core.step_types import StepResult, unpack_data
from graphfit.inspect import flops_graph
from graphfit.training import steps
from graphfit.training.compiled_steps import overrides_step

__all__ = ["StepTrace", "at_batch", "trace", "trace_training_step", "trace_output_gradient"]


def at_batch(spec, batch_size: int, model, what: str):
    """The spec structure with the batch axis set to `batch_size`; every shape static."""

    def fix(s):
        if s is None:
            return None
        shape = [batch_size, *s.shape.as_list()[1:]]
        if None in shape:
            raise ValueError(
                f"FLOPs are counted from static shapes, but model {model.name!r} has {what} of "
                f"shape {tuple(s.shape.as_list())} with unknown dimensions besides the batch "
                f"axis. Build it for a fixed shape, e.g. model.build((None, 28, 28, 1))."
            )
        return tf.TensorSpec(shape, s.dtype)

    return tf.nest.map_structure(fix, spec)


def trace(fn, *specs) -> tf.Graph:
    """The graph of `fn` traced (never run) for `specs`."""
    return tf.function(fn).get_concrete_function(*specs).graph


def _op_count() -> int:
    return len(tf.compat.v1.get_default_graph().get_operations())


class _OpCountProbe(steps.StepProbe):
    """Records the op count of the graph being traced where each phase starts, and what a
    `StepTrace` checks: the graphs marked in, a phase marked twice, a step with recorders;
    as a step's observer (`step_context.observing`), the gradients `minimize` reports."""

    def __init__(self, marks: dict):
        self.marks = marks
        self.gradients: dict = {}
        self.graphs: list[tf.Graph] = []
        self.repeated = False
        self.recorders = False

    def mark(self, phase: str) -> None:
        self.repeated = self.repeated or phase in self.marks
        self.marks[phase] = _op_count()
        graph = tf.compat.v1.get_default_graph()
        if not any(g is graph for g in self.graphs):
            self.graphs.append(graph)
        context = step_context.current()
        self.recorders = self.recorders or bool(context is not None and context.recorders)


def trace_training_step(model, state, x_spec, batch_size: int, owners):
    """The compiled training step's computation, traced with a probe (on copies of an unbuilt
    loss and of an optimizer without slots, which are left as they were): (graph, marks of
    where each part starts in the graph's op order, "gradients" the reported gradients)."""
    variables = list(model.trainable_variables)
    loss_set = state.loss_set
    if not loss_set.built:  # build a copy: the compiled LossSet is left as it was
        loss_set = copy.copy(loss_set)
        loss_set.build(model.output_names, model.dtype)
    y_spec, weight_spec = _label_specs(model, state, loss_set, batch_size)
    optimizer = _optimizer_for_tracing(state.optimizer, variables)
    marks: dict = {}

    probe = _OpCountProbe(marks)

    def step(x, y, sample_weight):
        with step_context.training_step(None, record_gradients=True) as context:
            gradients = context.gradients  # what minimize reports
            result = steps.train_step(model, (x, y, sample_weight), probe=probe,
                                      loss_set=loss_set, optimizer=optimizer)
        marks["gradients"] = list(gradients.values())
        return result.loss

    with owners.recording():
        return trace(step, x_spec, y_spec, weight_spec), marks


def trace_output_gradient(model, x_spec, owners):
    """An uncompiled model's stand-in step: the gradient of the sum of its outputs."""
    variables = list(model.trainable_variables)
    marks: dict = {}

    def step(x):
        with tf.GradientTape(watch_accessed_variables=False) as tape:
            tape.watch(variables)
            marks["forward"] = _op_count()
            with update_hooks.collect_updates():  # dropped: nothing is assigned
                outputs = model(x, training=True)
            marks["loss"] = _op_count()
            total = tf.add_n([tf.reduce_sum(o) for o in tf.nest.flatten(outputs)])
        marks["minimize"] = _op_count()
        gradients = tape.gradient(total, variables) if variables else []
        marks["gradients"] = gradients
        marks["update_hooks"] = _op_count()
        return total, gradients

    with owners.recording():
        return trace(step, x_spec), marks


def _label_specs(model, state, loss_set, batch_size: int):
    """Label and sample-weight specs: those of the traced train step when fit ran, else
    labels like the outputs (integer class ids for a sparse categorical loss)."""
    signature = state.steps.train_data_spec if state.steps else None
    if signature is not None:
        _, y_spec, weight_spec = unpack_data(signature)
        return (at_batch(y_spec, batch_size, model, "labels"),
                at_batch(weight_spec, batch_size, model, "sample weights"))

    def label(output_spec, output):
        shape = [batch_size, *output_spec.shape.as_list()[1:]]
        if loss_set.kind(output).labels == "sparse_categorical":
            return tf.TensorSpec(shape[:-1], tf.int32)
        return tf.TensorSpec(shape, output_spec.dtype)

    names, spec = model.output_names, model.output_spec
    if names is None:
        return label(spec, None), None
    return {name: label(spec[name], name) for name in names if name in loss_set.losses}, None


def _optimizer_for_tracing(optimizer, variables):
    """The optimizer when it already has its state for `variables` (tracing creates
    nothing); else a fresh copy from its config, so the user's optimizer gets no slots from
    us."""
    if optimizer.built_for(variables):
        return optimizer
    try:
        return type(optimizer).from_config(optimizer.get_config())
    except (AttributeError, NotImplementedError, TypeError, ValueError):
        return optimizer  # builds its slots (zeros) as the first fit would


class StepTrace:
    """A model's compiled training step, recorded while it is traced, to count its FLOPs on
    its own graph (`count_flops(model, ..., step=trace)`) instead of tracing the step again.

    Open `recording()` around the first trace of the compiled train step (that is what
    `graphfit.inspect.step_graph` does): as the step's observer (`step_context.observing`) it
    gets the default `train_step`'s phase marks and the gradients `minimize` reports, without
    asking for any, so the graph stays the one `fit` runs; an op callback notes which layer
    creates each op. The graph is that of the copy `count_flops` would trace, and counts the
    same, unless `unusable_for` says why not; `count_flops` then traces the copy instead.

    Args:
        model: the built model whose compiled train step is traced inside `recording()`.
    """

    def __init__(self, model):
        self.model = model
        self.owners = flops_graph.LayerOwners(model)
        self.marks: dict = {}
        self._probe = _OpCountProbe(self.marks)

    @contextlib.contextmanager
    def recording(self) -> Iterator["StepTrace"]:
        """Records the training step traced inside the block; yields this trace."""
        with self.owners.recording(), step_context.observing(self._probe):
            yield self
        self.marks["gradients"] = list(self.gradients.values())

    @property
    def gradients(self) -> dict:
        """{variable.ref(): gradient} that `minimize` reported in the recorded step."""
        return self._probe.gradients

    @property
    def graph(self) -> tf.Graph | None:
        """The graph the default train step was traced in, or None (nothing was traced)."""
        return self._probe.graphs[0] if len(self._probe.graphs) == 1 else None

    @property
    def loss(self) -> tf.Tensor | None:
        """The step's loss, as the graph returns it (a `StepResult`'s), or None."""
        outputs = getattr(self.graph, "structured_outputs", None)
        return outputs.loss if isinstance(outputs, StepResult) else None

    def wrapper_ops(self) -> list[str]:
        """Names of the ops the compiled step made before the default train_step began,
        besides its inputs: its own, which the copy `count_flops` traces has not."""
        operations = self.graph.get_operations()[:self.marks["step"]]
        return [op.name for op in operations if op.type != "Placeholder"]

    def unusable_for(self, x_spec) -> str | None:
        """Why the recorded graph is not the one `count_flops` would trace for inputs of
        `x_spec`, or None when it is."""
        if "update_hooks" not in self.marks:
            return "no training step was traced while recording (it was traced before)"
        if self._probe.repeated or self.graph is None or self.loss is None:
            return "the default train_step was not traced exactly once while recording"
        if overrides_step(self.model, "train_step"):
            return "the model overrides train_step; count_flops counts the default step"
        if self._probe.recorders:
            return "the step has recorders (taps), which count_flops's step has not"
        if not self.gradients:
            # Levenberg-Marquardt computes the loss gradient only when asked to record it,
            # as count_flops's copy of the step asks: that copy would be another graph.
            return "minimize reported no gradients unless asked to record them"
        shapes = [s.shape for s in tf.nest.flatten(x_spec)]
        traced = [t.shape for t in self.graph.inputs[:len(shapes)]]
        if shapes != traced:
            return f"the step was traced for inputs of shapes {traced}, not {shapes}"
        return None
