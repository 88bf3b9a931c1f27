"""A stage's data made ready for its first step: fed, checked and prepared.

`fit`, `evaluate` and `predict` (and `graphfit validate`, through `check_inputs`) turn what
the user passed into a feed (`feeds.make_feed`), then, before any step runs: build the model
and the compiled steps for it (`CompileState.prepare`), check in-memory labels against the
loss and the outputs, let the optimizer refuse what it cannot minimise, and run the layers'
checks over every batch of in-memory arrays (`Layer.batch_checks`).
"""

from __future__ import annotations

import tensorflow as tf

from graphfit.training.compiled_steps import overrides_step
from graphfit.training.feeds import make_feed
from graphfit.training.input_checks import OptimizerMismatch

__all__ = ["split_pair", "eval_feed", "first_batches", "prepare", "require_loss",
           "check_inputs", "stage_data"]


def split_pair(data, argument: str):
    """validation_data / test_data: a Dataset, (x, y) or (x, y, sample_weight)."""
    if data is None or isinstance(data, tf.data.Dataset):
        return data, None, None
    if isinstance(data, (list, tuple)) and len(data) in (2, 3):
        return data[0], data[1], data[2] if len(data) == 3 else None
    raise ValueError(
        f"{argument} must be a tf.data.Dataset, (x, y) or (x, y, sample_weight). Received a "
        f"{type(data).__name__}" + (f" of length {len(data)}" if hasattr(data, "__len__") else "")
        + "."
    )


def eval_feed(model, data, argument, batch_size, steps, check_finite):
    """The feed of `fit`'s validation_data or test_data (`argument`), or None."""
    x, y, sample_weight = split_pair(data, argument)
    if x is None:
        return None
    steps_argument = "validation_steps" if argument == "validation_data" else "test_steps"
    feed = make_feed(
        model, x, y, sample_weight,
        batch_size=None if isinstance(x, tf.data.Dataset) else batch_size,
        steps=steps, check_finite=check_finite, names=(f"{argument}[0]", f"{argument}[1]"),
        steps_argument=steps_argument,
    )
    return first_batches(feed, steps, steps_argument)


def first_batches(feed, steps, steps_argument):
    """An evaluation or a prediction runs the first `steps` batches of its data every time,
    as Keras does (its evaluation resets the iterator): of the arrays, or of a new pass over
    a dataset."""
    if feed.is_dataset:
        feed.cycles = False
    elif steps is not None:
        feed.keep_first_batches(steps, steps_argument)
    return feed


def stage_data(feed) -> tuple:
    """An array feed's tensors, as the compiled loops take them: (x,), (x, y) or
    (x, y, sample_weight)."""
    return tuple(t for t in feed.tensors() if t is not None)


def prepare(model, state, feed, stage: str) -> None:
    """Everything before `stage`'s first step: the model and steps built for `feed`, the
    labels checked against the outputs, the optimizer's refusals (training), and the layers'
    checks of every batch of in-memory data.

    Raises:
        ValueError: for data that does not fit (an `OptimizerMismatch` for what the optimizer
            cannot minimise, a `DataCheckError` for a batch a layer refuses).
    """
    state.prepare(model, feed)
    state.check_labels(model, feed, stage)
    if stage == "train" and state.optimizer is not None and not overrides_step(model):
        weights = None if feed.is_dataset else feed.sample_weight
        try:
            losses = {} if state.loss_set is None else state.loss_set.losses
            state.optimizer.check_training(losses, state.strategy is not None, weights)
            state.optimizer.check_model(model)
        except ValueError as error:
            raise OptimizerMismatch(str(error)) from None
    if not feed.is_dataset:
        state.steps.check_arrays(stage, stage_data(feed), feed.batches_in_order(),
                                 feed.names[0])


def require_loss(model, state, stage: str) -> bool:
    """Whether the stage runs the default step (an overridden step computes its own loss).
    Compiled with `loss=None`, the default steps minimise the losses layers add, as Keras's
    do; a step whose layers add none raises then (`losses.no_loss_to_compute`)."""
    del state
    step = "train_step" if stage == "train" else "test_step"
    return not overrides_step(model, step)


def check_inputs(model, x, y, *, stage: str, batch_size, check_finite: bool = True) -> None:
    """Runs every check `fit` or `evaluate` makes before its first step, and builds what
    they build (model, losses, metrics, optimizer slots), without running a step."""
    state = model.compiled_for("fit" if stage == "train" else "evaluate")
    require_loss(model, state, stage)
    argument = {"train": "x", "val": "validation_data", "test": "test_data"}[stage]
    if stage == "train" or isinstance(x, tf.data.Dataset):
        dataset = isinstance(x, tf.data.Dataset)
        feed = make_feed(model, x, y, None, batch_size=None if dataset else batch_size,
                         check_finite=check_finite)
    else:
        feed = eval_feed(model, (x, y), argument, batch_size, None, check_finite)
    prepare(model, state, feed, stage)
