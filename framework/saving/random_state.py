"""The model's random state that its weights leave out, as a training checkpoint's part.

A Keras layer inside a graphfit model (`layers.KerasLayer`, and the layers built on it: LSTM
and GRU dropout, MultiHeadAttention, Keras's own Dropout) draws from Keras `SeedGenerator`s.
Their state variables are in `model.variables` but not in `model.weights` (Keras's weights
leave random state out), and the Keras layer's checkpoint dependencies leave them out too. A
training checkpoint holds them as its `random_state` part, so a resumed fit draws the dropout
masks the uninterrupted fit would have drawn; `save_weights` leaves them out, as Keras's does.
graphfit's own random layers keep a `tf.random.Generator` that the model's checkpoint already
holds.

Each seed is saved under its place in the model: `layer_<i>_seed_<j>`, the `j`-th seed of
the `i`-th layer of `model.flatten_layers()`. A layer may create its seeds only when it is
built (MultiHeadAttention's dropout): a checkpoint restored into a model not built yet holds
those seeds back until `track` sees them, which `fit` calls once the model is built
(TensorFlow's deferred restoration), so such a resume is exact too.

Example:

    >>> import keras
    >>> import graphfit as gf
    >>> model = gf.Sequential([gf.layers.KerasLayer(keras.layers.Dropout(0.5, seed=1))])
    >>> sorted(random_state(model).seeds)
    ['layer_1_seed_0']
    >>> random_state(gf.Sequential([gf.layers.Dense(1)])).seeds
    {}
"""

from __future__ import annotations

import weakref

import tensorflow as tf

__all__ = ["RandomState", "random_state"]


class RandomState(tf.Module):
    """A model's seed-state variables, each an attribute named after its place in the model
    (`seeds`: {name: variable})."""

    def __init__(self):
        super().__init__(name="random_state")
        object.__setattr__(self, "_by_name", {})  # not a checkpoint dependency itself

    @property
    def seeds(self) -> dict[str, tf.Variable]:
        return dict(self._by_name)

    def track(self, model) -> None:
        """Adds the seeds `model` holds now; a pending restore fills those it adds."""
        for i, layer in enumerate(model.flatten_layers()):
            for j, seed in enumerate(_own_seeds(layer)):
                name = f"layer_{i}_seed_{j}"
                if self._by_name.get(name) is not seed:
                    self._by_name[name] = seed
                    setattr(self, name, seed)  # a checkpoint dependency of that name


def _own_seeds(layer) -> list[tf.Variable]:
    """The variables of `layer` that are not weights, less those of the layers inside it."""
    weights = {id(v) for v in layer.weights}
    inner = {id(v) for sub in layer.direct_sublayers() for v in sub.variables}
    return [v for v in layer.variables if id(v) not in weights and id(v) not in inner]


_STATES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def random_state(model) -> RandomState:
    """The model's `RandomState` (one per model, kept off it, as its `InputPosition`), with
    the seeds it holds now tracked."""
    state = _STATES.get(model)
    if state is None:
        state = _STATES[model] = RandomState()
    state.track(model)
    return state
