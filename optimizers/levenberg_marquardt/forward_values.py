"""What one forward pass of a training step hands Levenberg–Marquardt, as plain tensors.

The trial loop carries the starting point's `[loss, *aux]` as loop variables and keeps a
trial's values only when the trial is accepted. `split_aux` flattens a `ForwardPass` (outputs,
per-output losses, pending update-hook values) into tensors and gives back the function that
rebuilds it; `examples_independent` says whether each example's residual rows depend on that
example alone, which decides the Jacobian mode.
"""

from __future__ import annotations

import tensorflow as tf

from graphfit.core import update_hooks

__all__ = ["examples_independent", "split_aux", "unvectorizable_layers"]


def examples_independent(model, loss_set) -> bool:
    """Whether each example's residual rows depend on that example alone: no layer of the
    model (`Layer.mixes_examples`) and no loss (a `mixes_examples` attribute, as
    `ResidualLoss` has) mixes the examples of a batch."""
    if any(layer.mixes_examples for layer in model.flatten_layers()):
        return False
    return not any(getattr(loss, "mixes_examples", False) for loss in loss_set.losses.values())


def unvectorizable_layers(model) -> list[str]:
    """The names of the model's layers that TensorFlow's vectorizer cannot map over examples
    (`Layer.vectorizes_per_example` False), which rules out the per-example Jacobian."""
    return [f"{layer.name!r} ({type(layer).__name__})" for layer in model.flatten_layers()
            if not getattr(layer, "vectorizes_per_example", True)]


def split_aux(aux):
    """(tensors, rebuild): the tensors of `aux`, with each `PendingUpdate` contributing its
    value, and the function that puts new tensors back in `aux`'s structure."""
    leaves = tf.nest.flatten(aux)
    tensors = []
    for leaf in leaves:
        if isinstance(leaf, update_hooks.PendingUpdate):
            tensors.append(leaf.value)
        elif leaf is not None:
            tensors.append(tf.convert_to_tensor(leaf))

    def rebuild(values):
        values = list(values)
        out = []
        for leaf in leaves:
            if isinstance(leaf, update_hooks.PendingUpdate):
                out.append(update_hooks.PendingUpdate(leaf.hook, values.pop(0)))
            elif leaf is None:
                out.append(None)
            else:
                out.append(values.pop(0))
        return tf.nest.pack_sequence_as(aux, out)

    return tensors, rebuild
