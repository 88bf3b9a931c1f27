"""The linearization of one training batch: its residual rows, the Jacobian mode and chunk,
then `JᵀJ` (or J when m < n) and `b` (`update.linearize`)."""

from __future__ import annotations

import warnings

from graphfit.optimizers.levenberg_marquardt import dense_forms
from graphfit.optimizers.levenberg_marquardt import jacobian as lm_jacobian
from graphfit.optimizers.levenberg_marquardt import layerwise_jacobian as lm_layerwise
from graphfit.optimizers.levenberg_marquardt import regularization as lm_regularization
from graphfit.optimizers.levenberg_marquardt import residuals as lm_residuals
from graphfit.optimizers.levenberg_marquardt import update as lm_update
from graphfit.optimizers.levenberg_marquardt.forward_values import (
    examples_independent,
    unvectorizable_layers,
)

__all__ = ["gradient_from_rows", "linearize_batch"]


def gradient_from_rows(batch) -> bool:
    """Whether b = Cᵀρ, summed over the Jacobian's chunks, is half the loss gradient: for
    losses whose rows give it (`residuals.gradient_from_rows`), and examples that do not
    mix (a batch-normalized model linearized in several chunks normalizes each chunk by
    its own statistics, so its Cᵀρ is not the whole batch's gradient), and no weight
    penalty, whose rows (`regularization`) are not among the batch's."""
    return (lm_residuals.gradient_from_rows(batch.loss_set.losses)
            and examples_independent(batch.model, batch.loss_set)
            and not lm_regularization.regularized(batch.model))


def linearize_batch(batch, variables, n: int, gradients, y_pred0, jacobian_mode: str,
                    chunk_size: int | None, whole_batch: bool = True,
                    bound=None):
    """The `update.Linearization` of `batch` at the variables' values.

    Args:
        batch: the training step's `StepBatch`.
        variables: the trained variables (n scalars in all).
        n: the number of trained scalars.
        gradients: the loss gradient from the step's tape, or None.
        y_pred0: the model's output on the batch at the start.
        jacobian_mode: the optimizer's `jacobian_mode` ("auto" chooses here).
        chunk_size: the optimizer's `jacobian_chunk_size` (None: automatic).
        whole_batch: False for a replica's slice, always through JᵀJ (the m < n system of
            one chunk does not add up over replicas).
        bound: the `BatchBound` `fit` promised the traced step, or None. A batch known to
            fit one chunk is linearized without the chunk loop, and the step reports that it
            relied on the chunk (`bound.rely_on`).
    """
    data, rows_for, per_example = lm_residuals.batch_rows(batch, y_pred0)
    independent = examples_independent(batch.model, batch.loss_set)
    mode = lm_jacobian.choose_mode(jacobian_mode, n, per_example, independent,
                                   unvectorizable_layers(batch.model))
    if mode == "per_example" and not independent:  # Python: once per trace
        warnings.warn(
            "jacobian_mode='per_example' differentiates each example on a batch of its "
            "own, but a layer or the loss of this model mixes the examples of a batch "
            "(mixes_examples=True), so the Jacobian is not exact. Use 'auto' or 'reverse'.",
            stacklevel=4)
    chunk = lm_jacobian.chunk_examples(n, per_example, mode, chunk_size)
    single_chunk = bound is not None and bound.largest is not None and bound.largest <= chunk
    if single_chunk:  # Python, at trace time: larger batches need the chunk loop again
        bound.rely_on(chunk)
    # b = Cᵀρ wherever it is the gradient, whether or not a tape took one: the step is the
    # same with TensorBoard's taps on or off.
    if gradient_from_rows(batch):
        gradients = None
    return lm_update.linearize(rows_for, data, batch.num_examples, chunk, variables, mode,
                               gradients, allow_under=whole_batch,
                               layerwise_rows=(per_example if lm_layerwise.applies_to(batch.model)
                                               else None),
                               single_chunk=single_chunk,
                               dense_layers=dense_forms.dense_layers(batch.model),
                               hooked_layers=lm_layerwise.hook_layers(batch.model))
