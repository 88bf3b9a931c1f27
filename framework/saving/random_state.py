"""The model's random state that its weights leave out, as a training checkpoint's part.

A Keras layer inside a graphfit model (`layers.KerasLayer`, and the layers built on it: LSTM
and GRU dropout, MultiHeadAttention, Keras's own Dropout) draws from Keras `SeedGenerator`s.
Their state variables are in `model.variables` but not in `model.weights` (Keras's weights
leave random state out), and the Keras layer's checkpoint dependencies leave them out too. A
training checkpoint holds them as its `random_state` part, so a resumed fit draws the dropout
masks the uninterrupted fit would have drawn; `save_weights` leaves them out, as Keras's does.
graphfit's own random layers keep a `tf.random.Generator` that the model's checkpoint already
holds.

Example:

    >>> import keras
    >>> import graphfit as gf
    >>> model = gf.Sequential([gf.layers.KerasLayer(keras.layers.Dropout(0.5, seed=1))])
    >>> len(random_state(model).seeds)
    1
    >>> random_state(gf.Sequential([gf.layers.Dense(1)])) is None
    True
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["RandomState", "random_state"]


class RandomState(tf.Module):
    """The seed-state variables of a model (`seeds`), in `model.variables`' order."""

    def __init__(self, seeds: list[tf.Variable]):
        super().__init__(name="random_state")
        self.seeds = list(seeds)


def random_state(model) -> RandomState | None:
    """The variables of `model` that are not its weights, or None when it has none."""
    weights = {id(v) for v in model.weights}
    seeds = [v for v in model.variables if id(v) not in weights]
    return RandomState(seeds) if seeds else None
