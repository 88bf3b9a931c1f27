"""Which process writes files when several workers train one model.

Under `tf.distribute.MultiWorkerMirroredStrategy` every worker runs `fit` with the same
callbacks. Only the chief (task type "chief", or worker 0 when the cluster has none: what
TensorFlow's `strategy.extended.should_checkpoint` says) writes checkpoints, TensorBoard
event files, CSV logs and the progress bar; the other workers run every hook otherwise the
same, so they take part in the same collectives, and skip the writes only.

Example:

    >>> import graphfit as gf
    >>> from graphfit import layers
    >>> model = gf.Sequential([layers.Dense(1)])
    >>> model.build((None, 2))
    >>> is_chief(model)  # one process: it writes
    True
"""

from __future__ import annotations

__all__ = ["is_chief", "strategy_of"]


def strategy_of(model):
    """The `tf.distribute` strategy `model`'s weights were created under, or None."""
    for variable in getattr(model, "variables", None) or ():
        return getattr(variable, "distribute_strategy", None)
    return None


def is_chief(model) -> bool:
    """Whether this process writes files for `model`: always, unless its weights belong to a
    strategy whose `extended.should_checkpoint` is False (a non-chief worker)."""
    strategy = strategy_of(model)
    return strategy is None or bool(strategy.extended.should_checkpoint)
