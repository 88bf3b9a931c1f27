"""The default train, test and predict steps, behind `Model.train_step` and its siblings.

One training step (traced once, optionally compiled by XLA):

    forward pass (training=True), update hooks collected, not applied; the batch's labels
        published to the layers that read them (`step_context`), whose added losses join
    loss; optimizer.minimize(loss_fn, variables, batch): gradients of the trainable variables,
        gradient transforms on the whole list, then the update (a second-order optimizer runs
        its own minimize on the `StepBatch`)
    update hooks applied, once, after the optimizer's update

`fit`, `graphfit.inspect` and `model.flops()` all trace this one function: `inspect` through
the compiled steps, `flops` with a `StepProbe` that marks where each phase begins.
"""

from __future__ import annotations

import tensorflow as tf

from graphfit.core import autograph_scope, step_context, update_hooks
from graphfit.core.step_types import ForwardPass, StepBatch, StepResult, unpack_data
from graphfit.training import cross_replica, distribution

__all__ = ["StepProbe", "train_step", "test_step", "predict_step"]


class StepProbe:
    """Called where each phase of the training step begins; does nothing by default.

    `graphfit.inspect.flops` subclasses it to count the ops of each phase. The phases, in
    order: "forward", "loss", "minimize" (the first forward pass only: a second-order
    optimizer runs more), then "update_hooks".
    """

    def mark(self, phase: str) -> None:
        """Marks the start of `phase` in the graph being traced."""
        del phase


_NO_PROBE = StepProbe()


def _compiled_loss(model, caller: str):
    state = model.compiled_for(caller)
    state.require_loss(caller)
    return state.loss_set


def train_step(model, data, *, probe: StepProbe = _NO_PROBE, loss_set=None,
               optimizer=None) -> StepResult:
    """The default `Model.train_step`: one optimizer step on `data`.

    The open step's recorders (`graphfit.training.recorders`) wrap its loss function, and
    its batch bound reaches the optimizer in the `StepBatch`.

    Args:
        model: the compiled model.
        data: (x,), (x, y) or (x, y, sample_weight).
        probe: marks the phases of the step (for FLOP counts).
        loss_set, optimizer: stand-ins for the compiled ones (FLOP counts trace with copies,
            so that counting creates no optimizer slots and builds no loss).

    Returns:
        The `StepResult` with the loss and outputs before the update.
    """
    loss_set = loss_set or _compiled_loss(model, "fit")
    loss_set.bind(model)
    optimizer = optimizer or model.optimizer
    x, y, sample_weight = unpack_data(data)
    first_pass = []
    added_logs: dict = {}  # {name: loss} that layers added, from the first forward pass

    def loss_fn_for(x, y, sample_weight):
        def loss_fn():
            if not first_pass:
                probe.mark("forward")
            with update_hooks.collect_updates() as pending, \
                    step_context.training_step(y) as context:
                y_pred = model(x, training=True)
            if not first_pass:
                probe.mark("loss")
            loss, output_losses = distribution.undo_keras_scaling(
                *loss_set(y, y_pred, sample_weight))
            added = context.total_added_loss(loss.dtype)
            if added is not None:  # losses layers add (a ClassMeans's center loss)
                loss = loss + added
                if not first_pass:  # logged from the first pass (LM's trials run in loops)
                    added_logs.update(context.added_losses)
            if not first_pass:  # a second-order optimizer calls it again: its trial passes
                first_pass.append(True)
                probe.mark("minimize")
            return loss, ForwardPass(y_pred, output_losses, pending)

        return loss_fn

    context = step_context.current()
    bound, per_pass = (None, None) if context is None else (context.bound, context.steps_per_pass)
    strategy = cross_replica.cross_replica_strategy()
    if strategy is None:
        batch = StepBatch(model, loss_set, x, y, sample_weight, bound=bound,
                          steps_per_pass=per_pass)
        loss_fn = loss_fn_for(x, y, sample_weight)
    else:  # an optimizer that runs its step for all replicas at once (LevenbergMarquardt)
        def local_step(local_data):
            local = unpack_data(local_data)
            return StepBatch(model, loss_set, *local), loss_fn_for(*local)

        replicas = cross_replica.Replicas(strategy, data, local_step)
        batch = StepBatch(model, loss_set, x, y, sample_weight, replicas=replicas,
                          steps_per_pass=per_pass)
        loss_fn = replicas.combined_loss
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
    return StepResult(loss, forward.y_pred, forward.output_losses, added_logs)


def test_step(model, data) -> StepResult:
    """The default `Model.test_step`: the loss and outputs of `data`, in inference mode."""
    loss_set = _compiled_loss(model, "evaluate")
    loss_set.bind(model)
    x, y, sample_weight = unpack_data(data)
    y_pred = model(x, training=False)
    loss, output_losses = distribution.undo_keras_scaling(*loss_set(y, y_pred, sample_weight))
    return StepResult(loss, y_pred, output_losses)


def predict_step(model, data):
    """The default `Model.predict_step`: the outputs of the inputs in `data`."""
    x, _, _ = unpack_data(data)
    return model(x, training=False)


def batch_size_of(result: StepResult, data) -> tf.Tensor:
    """The number of examples a step ran on: from its outputs, else from its inputs."""
    source = result.y_pred if result.y_pred is not None else unpack_data(data)[0]
    return tf.shape(tf.nest.flatten(source)[0])[0]
