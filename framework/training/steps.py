"""The default train, test and predict steps, behind `Model.train_step` and its siblings.

One training step (traced once, optionally compiled by XLA):

    forward pass (training=True), update hooks collected, not applied; the batch's labels
        in the step's context for the layers that read them (`step_context.labels_for`),
        whose added losses join
    loss; optimizer.minimize(loss_fn, variables, batch): gradients of the trainable variables,
        gradient transforms on the whole list, then the update (a second-order optimizer runs
        its own minimize on the `StepBatch`)
    update hooks applied, once, after the optimizer's update

`fit`, `graphfit.inspect` and `model.flops()` all trace this one function: `inspect` through
the compiled steps, `flops` with a `StepProbe` that marks where each phase begins: passed to
a copy of the step it traces, or, where `inspect` traces the compiled step anyway, opened
around that trace as the step's observer (`core.step_context.observing`), so that the step
is traced once.
"""

from __future__ import annotations

import tensorflow as tf

from graphfit.core import autograph_scope, step_context, update_hooks
from graphfit.core.step_types import ForwardPass, StepBatch, StepResult, unpack_data
from graphfit.training import cross_replica, distribution
from graphfit.training.losses import AddedLossesOnly, no_loss_to_compute

__all__ = ["StepProbe", "train_step", "test_step", "predict_step", "compute_loss",
           "added_by_name"]


class StepProbe:
    """Called where each phase of the training step begins; does nothing by default.

    `graphfit.inspect.flops` subclasses it to count the ops of each phase, on a copy of the
    step it traces or as the observer of a compiled step (`step_context.observing`, which
    also hands it the gradients `minimize` reports in `gradients`). The phases, in
    order: "step" (the default `train_step` begins), "forward", "loss", "minimize" (the first
    forward pass only: a second-order optimizer runs more), then "update_hooks".
    """

    def mark(self, phase: str) -> None:
        """Marks the start of `phase` in the graph being traced."""
        del phase


_NO_PROBE = StepProbe()


def _compiled_loss(model, caller: str):
    """The compiled `LossSet`; compiled with `loss=None`, the added losses only."""
    state = model.compiled_for(caller)
    return state.loss_set if state.loss_set is not None else AddedLossesOnly()


def _with_added(loss, added, loss_set, model, caller: str):
    """The compiled loss plus the losses layers added (`added`, or None for none)."""
    if added is None:
        if not loss_set.losses:
            raise no_loss_to_compute(model.name, caller)
        return loss
    return loss + added


class _TrainingLoss:
    """The training step's loss functions, one per (slice of the) batch: a forward pass in
    training mode inside the step's context, its update hooks collected (not applied), the
    compiled loss plus the losses layers added (by name in the `ForwardPass`, for the logs).
    The first pass marks the step's phases for the probe; a second-order optimizer calls it
    again (its trial passes)."""

    def __init__(self, model, loss_set, probe: StepProbe):
        self.model, self.loss_set, self.probe = model, loss_set, probe
        self.first_pass = True

    def loss_fn(self, x, y, sample_weight):
        def loss_fn():
            first = self.first_pass
            if first:
                self.probe.mark("forward")
            with update_hooks.collect_updates() as pending, \
                    step_context.training_step(y) as context:
                y_pred = self.model(x, training=True)
            if first:
                self.probe.mark("loss")
            loss, output_losses = distribution.undo_keras_scaling(
                *self.loss_set(y, y_pred, sample_weight))
            added = context.total_added_loss(loss.dtype)
            loss = _with_added(loss, added, self.loss_set, self.model, "fit")
            named = {} if added is None else added_by_name(context, loss.dtype)
            if first:
                self.first_pass = False
                self.probe.mark("minimize")
            return loss, ForwardPass(y_pred, output_losses, pending, added_losses=named)

        return loss_fn


def _step_batch(model, loss_set, data, losses: _TrainingLoss, context):
    """The `StepBatch` for the optimizer and the loss function it minimises; under a strategy
    whose optimizer runs its step for all replicas at once (LevenbergMarquardt), over the
    replicas' slices."""
    x, y, sample_weight = unpack_data(data)
    bound, per_pass = (None, None) if context is None else (context.bound, context.steps_per_pass)
    strategy = cross_replica.cross_replica_strategy()
    if strategy is None:
        batch = StepBatch(model, loss_set, x, y, sample_weight, bound=bound,
                          steps_per_pass=per_pass)
        return batch, losses.loss_fn(x, y, sample_weight)

    def local_step(local_data):
        local = unpack_data(local_data)
        return StepBatch(model, loss_set, *local), losses.loss_fn(*local)

    replicas = cross_replica.Replicas(strategy, data, local_step)
    batch = StepBatch(model, loss_set, x, y, sample_weight, replicas=replicas,
                      steps_per_pass=per_pass)
    return batch, replicas.combined_loss


def train_step(model, data, *, probe: StepProbe | None = None, loss_set=None,
               optimizer=None) -> StepResult:
    """The default `Model.train_step`: one optimizer step on `data`.

    The open step's recorders (`graphfit.training.recorders`) wrap its loss function, and
    what `fit` knows of the step (its batch bound, the steps per pass) reaches the optimizer
    in the `StepBatch`, which a gradient transform finds in the step's context.

    Args:
        model: the compiled model.
        data: (x,), (x, y) or (x, y, sample_weight).
        probe: marks the phases of the step (for FLOP counts); None: the observer of an
            open `step_context.observing` block, if any.
        loss_set, optimizer: stand-ins for the compiled ones (FLOP counts trace with copies,
            so that counting creates no optimizer slots and builds no loss).

    Returns:
        The `StepResult` with the loss and outputs before the update.
    """
    probe = probe or step_context.current_observer() or _NO_PROBE
    probe.mark("step")
    loss_set = loss_set or _compiled_loss(model, "fit")
    loss_set.bind(model)
    optimizer = optimizer or model.optimizer
    losses = _TrainingLoss(model, loss_set, probe)
    context = step_context.current()
    batch, loss_fn = _step_batch(model, loss_set, data, losses, context)
    if context is not None:  # for a gradient transform that needs it (PerExampleClipping)
        context.batch = batch
    for recorder in () if context is None else context.recorders:
        loss_fn = recorder.wrap_loss_fn(loss_fn, model)
    minimize = autograph_scope.convert_user_code(optimizer.minimize)
    loss, forward = minimize(loss_fn, model.trainable_variables, batch)
    probe.mark("update_hooks")
    # UPDATE_OPS: after the optimizer's update, once per step, in the same compiled step.
    # Under a tf.distribute strategy: the replicas' share-weighted mean (one all-reduce).
    # A step the optimizer skipped (a loss-scale overflow) moves no hook either.
    update_hooks.apply_updates(forward.updates, distribution.replica_share(tf.float64),
                               skip=forward.skip_updates)
    return StepResult(loss, forward.y_pred, forward.output_losses, dict(forward.added_losses))


def test_step(model, data) -> StepResult:
    """The default `Model.test_step`: the loss and outputs of `data`, in inference mode; the
    loss counts the losses layers add (weight and activity regularizers), as Keras's does.
    Their terms are not logged apart here (they are in training): `evaluate` then returns
    what Keras's returns, a scalar for a model without metrics."""
    loss_set = _compiled_loss(model, "evaluate")
    loss_set.bind(model)
    x, y, sample_weight = unpack_data(data)
    with step_context.training_step(y) as context:
        y_pred = model(x, training=False)
    loss, output_losses = distribution.undo_keras_scaling(*loss_set(y, y_pred, sample_weight))
    added = context.total_added_loss(loss.dtype)
    return StepResult(_with_added(loss, added, loss_set, model, "evaluate"), y_pred,
                      output_losses)


def predict_step(model, data):
    """The default `Model.predict_step`: the outputs of the inputs in `data`."""
    x, _, _ = unpack_data(data)
    return model(x, training=False)


def batch_size_of(result: StepResult, data) -> tf.Tensor:
    """The number of examples a step ran on: from its outputs, else from its inputs."""
    y_pred = getattr(result, "y_pred", None)  # a Keras-style step returns a dict of logs
    source = y_pred if y_pred is not None else unpack_data(data)[0]
    return tf.shape(tf.nest.flatten(source)[0])[0]


def compute_loss(model, y, y_pred, sample_weight=None):
    """`Model.compute_loss`: the compiled loss of `y_pred` against `y`, plus the losses the
    layers added in the open step (`step_context.add_loss`; Keras's `model.losses`).

    Raises:
        ValueError: when there is no loss to compute (none compiled and none added).
    """
    state = model.compiled_for("compute_loss")
    total = None
    if state.loss_set is not None:
        if not state.loss_set.built:  # called before fit or evaluate prepared the model
            state.loss_set.build(model.output_names, model.dtype)
        state.loss_set.bind(model)
        total, _ = distribution.undo_keras_scaling(*state.loss_set(y, y_pred, sample_weight))
    context = step_context.current()
    dtype = model.dtype if total is None else total.dtype
    added = None if context is None else context.total_added_loss(dtype)
    if added is not None:
        total = added if total is None else total + added
    if total is None:
        raise ValueError(
            f"Model {model.name!r} has no loss to compute: compile it with one "
            f"(model.compile(optimizer=..., loss=...)), or compute the loss in your step.")
    return total


def added_by_name(context, dtype) -> dict:
    """{name: sum} of the losses the layers added in `context`: several layers add under one
    name (every regularized layer's `regularization_loss`), logged as their sum."""
    sums: dict = {}
    for name, value in context.added_losses:
        value = tf.cast(value, dtype)
        sums[name] = value if name not in sums else sums[name] + value
    return sums
