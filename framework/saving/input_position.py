"""Where the training data stands inside an epoch, so a checkpoint can resume mid-epoch.

`fit` keeps the model's `InputPosition` up to date: `batch` counts the batches of the current
epoch already trained on (0 at every epoch's end), and `iterator` is the training data's
`tf.data` iterator while `fit` reads a dataset. A checkpoint that holds the position (a
`Checkpointer` with `input_position=True`, i.e. `ModelCheckpoint(save_freq=N)` or a recipe run
over a `stream` source) saves both: the iterator's state is tf.data's own (its shuffle buffers
and seeds, the files and offsets being read, what is prefetched).

Restoring such a checkpoint sets `batch` at once and restores the iterator when `fit` makes it
(TensorFlow's deferred restoration: the saved iterator waits for the attribute to be set), so
the next `fit` starts its first epoch `batch` batches in, reading the next batch the
interrupted fit would have read: no sample repeated or skipped. Over in-memory arrays the
epoch's order follows from the fit's seed and the epoch, so `batch` alone is enough; so it
is for data that positions itself (`replays`: a recipe's `stream`, whose passes are a
stateless function of the seed and the pass, starts where the epoch and `batch` say). An
iterator's saved state holds what it had prefetched, errors included: a record that could
not be read before the checkpoint was written would be met again after the restore, which
is one reason a stream replays its position instead.

Example:

    >>> import graphfit as gf
    >>> model = gf.Sequential([gf.layers.Dense(1)])
    >>> int(input_position(model).batch.numpy())
    0
"""

from __future__ import annotations

import weakref

import tensorflow as tf

__all__ = ["InputPosition", "input_position", "share_input_position"]


class InputPosition(tf.Module):
    """Batches of the current epoch done (`batch`, an int64 variable) and the training
    iterator (`iterator`, tracked while set), as a checkpoint saves them.

    Example:

        >>> position = InputPosition()
        >>> position.track(iter(tf.data.Dataset.range(3)))
        >>> position.has_iterator
        True
    """

    #: True when the training data positions itself from `batch` (a `Stream` started
    #: where the epoch stands): its iterator is then neither saved nor restored.
    replays = False

    def __init__(self):
        super().__init__(name="input_position")
        with tf.init_scope():
            self.batch = tf.Variable(0, dtype=tf.int64, trainable=False, name="batch")

    @property
    def has_iterator(self) -> bool:
        return getattr(self, "iterator", None) is not None

    def track(self, iterator) -> None:
        """Makes `iterator` the one a checkpoint saves (and a pending restore fills),
        unless the data `replays` its position."""
        if not self.replays and getattr(self, "iterator", None) is not iterator:
            self.iterator = iterator

    def forget(self) -> None:
        """No iterator to save (the fit reads arrays, or has ended)."""
        if hasattr(self, "iterator"):
            del self.iterator


_POSITIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def input_position(model) -> InputPosition:
    """The model's `InputPosition`, created on first use (kept off the model, as its
    `FitState`, so `save_weights` leaves it out)."""
    position = _POSITIONS.get(model)
    if position is None:
        position = _POSITIONS[model] = InputPosition()
    return position


def share_input_position(stand_in, model) -> None:
    """`stand_in` (a model training in `model`'s place) reads and writes `model`'s
    position."""
    _POSITIONS[stand_in] = input_position(model)
