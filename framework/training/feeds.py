"""Feeding data to the compiled steps: in-memory arrays or a `tf.data.Dataset`.

In-memory arrays are converted to tensors once per call of `fit`/`evaluate`/`predict`; each
epoch is then a matrix of sample indices (a fresh permutation when shuffling), and the compiled
loop gathers every batch inside the graph. No `tf.data` pipeline and no Python per batch: that is
where most of a Keras `fit` step's overhead goes on a small model. A `tf.data.Dataset` is read
through its iterator inside the same compiled loop.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Iterator

import numpy as np
import tensorflow as tf

from graphfit.training import graph_feeds, input_checks
from graphfit.training.array_data import arrange_targets, spec_of, to_array, to_arrays

__all__ = ["ArrayFeed", "DatasetFeed", "SpecFeed", "make_feed", "Chunk", "DEFAULT_BATCH_SIZE"]

# fit's default. A dataset is already batched, so for a dataset fit's batch_size must stay at
# this default (or None); anything else is refused as a mistake.
DEFAULT_BATCH_SIZE = 32


@dataclasses.dataclass(frozen=True)
class Chunk:
    """Batches run by one call of a compiled loop: rows of sample indices (arrays) or a count."""

    first_batch: int
    num_batches: int
    index_batches: np.ndarray | None = None


class ArrayFeed:
    """In-memory data, batched by index inside the compiled loop.

    Args:
        x, y, sample_weight: numpy arrays (or dicts/lists of them), one row per sample.
        batch_size: samples per step; None puts all samples in one batch.
        shuffle: draw a new permutation of the samples every pass over them (when a pass
            holds more than one batch).
        seed: with the pass number, fixes each pass's permutation (reproducible, resumable).
        steps: batches per epoch (`steps_per_epoch`, `steps`), as for a dataset: the epochs
            then run on through the passes over the data, each pass drawing its own
            permutation, so epoch e runs the batches e·steps ... (e+1)·steps − 1 of that
            stream and all the data is seen. None: an epoch is one pass.
    """

    is_dataset = False
    varying_shapes = False  # every batch but a pass's last has the same shape

    def __init__(self, x, y, sample_weight, batch_size: int | None, shuffle: bool, seed: int,
                 names=("x", "y"), steps: int | None = None):
        self.x, self.y, self.sample_weight = x, y, sample_weight
        self.names = names
        self.num_samples = int(np.shape(tf.nest.flatten(x)[0])[0])
        self.batch_size = (self.num_samples if batch_size is None
                           else min(batch_size, self.num_samples))
        self.batches_per_pass = math.ceil(self.num_samples / self.batch_size)
        # One batch per pass holds every sample whatever the order: shuffling it would only
        # change the rounding of its sums, and make a full-batch fit irreproducible.
        self.shuffle = shuffle and self.batches_per_pass > 1
        self.seed = seed
        self.fixed_steps = steps
        self.steps = self.batches_per_pass if steps is None else steps
        self._tensors = None

    @property
    def element_spec(self):
        return spec_of(self.x), spec_of(self.y), spec_of(self.sample_weight)

    def arrange_targets(self, output_names, needed) -> None:
        if self.y is not None:
            self.y = arrange_targets(self.y, output_names, needed, self.names[1])

    def tensors(self):
        """(x, y, sample_weight) as tensors, converted once; a `tf.Variable` stays one."""
        if self._tensors is None:
            self._tensors = tf.nest.map_structure(
                lambda a: a if a is None or isinstance(a, tf.Variable) else tf.constant(a),
                (self.x, self.y, self.sample_weight),
            )
        return self._tensors

    def batches_in_order(self) -> list[np.ndarray]:
        """Every sample once, in batches of `batch_size` in the data's order: a matrix of the
        full batches' sample indices, then one of the smaller last batch (if any)."""
        full = self.num_samples // self.batch_size
        order = np.arange(self.num_samples, dtype=np.int32)
        matrices = [order[: full * self.batch_size].reshape(full, self.batch_size)]
        if full * self.batch_size < self.num_samples:
            matrices.append(order[full * self.batch_size:][None, :])
        return [m for m in matrices if m.size]

    def keep_first_batches(self, steps: int, steps_argument: str = "steps") -> None:
        """Runs only the first `steps` batches of the data in every epoch, at most one pass:
        an evaluation's or a prediction's `steps`, as Keras counts them (the same batches at
        every evaluation, each sample at most once). Warns when the data holds fewer."""
        if steps > self.batches_per_pass:
            warnings.warn(
                f"{steps_argument}={steps} asks for more batches than {self.names[0]} holds "
                f"({self.batches_per_pass} batches of up to {self.batch_size} samples): running "
                f"those {self.batches_per_pass}, one pass, as Keras does when its input runs "
                f"out.", stacklevel=5)
        self.fixed_steps = None
        self.steps = min(steps, self.batches_per_pass)

    def chunks(self, epoch: int, sizes: Iterator[int]) -> Iterator[Chunk]:
        """The epoch's batches, grouped into chunks whose sizes `sizes` yields one by one.

        A pass's last, smaller batch (if any) is a chunk of its own: rows of a chunk share one
        size.
        """
        if self.fixed_steps is None:  # one pass, or its first batches
            yield from self._pass_chunks(epoch, 0, self.steps, 0, sizes)
            return
        start, end = epoch * self.steps, (epoch + 1) * self.steps  # in the stream of batches
        while start < end:
            number, first = divmod(start, self.batches_per_pass)
            stop = min(self.batches_per_pass, first + end - start)
            yield from self._pass_chunks(number, first, stop, start - epoch * self.steps, sizes)
            start += stop - first

    def _pass_chunks(self, number: int, first: int, stop: int, offset: int,
                     sizes: Iterator[int]) -> Iterator[Chunk]:
        """Chunks of the batches `first` ... `stop` − 1 of pass `number` over the samples;
        `offset`: the epoch's count of batches before them."""
        order = np.arange(self.num_samples, dtype=np.int32)
        if self.shuffle:
            order = np.random.default_rng([self.seed, number]).permutation(order).astype(np.int32)
        full = self.num_samples // self.batch_size
        rows = order[: full * self.batch_size].reshape(full, self.batch_size)
        start = first
        while start < min(stop, full):
            size = max(1, min(next(sizes), min(stop, full) - start))
            yield Chunk(offset + start - first, size, rows[start : start + size])
            start += size
        if stop > full:  # the smaller last batch
            yield Chunk(offset + full - first, 1, order[full * self.batch_size :][None, :])


class DatasetFeed:
    """A `tf.data.Dataset` of batches: `x`, `(x, y)` or `(x, y, sample_weight)`.

    Args:
        dataset: the batched dataset.
        steps: batches per epoch; None reads until the dataset ends. With steps, the iterator
            carries on across epochs, and a finite dataset starts a new pass when it runs out,
            so every epoch has `steps` batches and all the data is seen.
        names: how the data is called in messages.
        steps_argument: the argument that sets `steps`, for messages.
    """

    is_dataset = True
    from_graphs = False  # batches built from a GraphSet (shuffled and padded per epoch)
    varying_shapes = False  # batches change shape beyond their rows (graphs)

    def __init__(self, dataset: tf.data.Dataset, steps: int | None, names=("x", "y"),
                 steps_argument: str = "steps_per_epoch"):
        self.dataset = dataset
        self.names = names
        cardinality = int(dataset.cardinality())
        if steps is None and cardinality == tf.data.INFINITE_CARDINALITY:
            raise ValueError(
                f"{names[0]} is a dataset that repeats forever; pass {steps_argument} to say how "
                f"many batches make an epoch, or give a finite dataset (dataset.take(n))."
            )
        if cardinality == 0:
            raise ValueError(f"{names[0]} is an empty dataset: it yields no batches.")
        self.steps = steps if steps is not None else (cardinality if cardinality >= 0 else None)
        # One pass over the data: the dataset's batches, or for an endless one its epoch;
        # None when the dataset cannot say (a filter), even after a pass.
        self.batches_per_pass = (cardinality if cardinality >= 0 else
                                 steps if cardinality == tf.data.INFINITE_CARDINALITY else None)
        self.cycles = steps is not None  # keep the iterator; restart a finite dataset when done
        self._iterator = None

    @property
    def element_spec(self):
        spec = self.dataset.element_spec
        if isinstance(spec, tuple):
            if len(spec) not in (1, 2, 3):
                raise ValueError(
                    f"A dataset must yield x, (x, y) or (x, y, sample_weight); the elements of "
                    f"{self.names[0]} have {len(spec)} parts."
                )
            return tuple(spec) + (None,) * (3 - len(spec))
        return spec, None, None

    def arrange_targets(self, output_names, needed) -> None:
        """Maps labels yielded as a tuple in output order to a dict by output name."""
        y_spec = self.element_spec[1]
        if y_spec is None:
            return
        arrange_targets(y_spec, output_names, needed, f"the labels of {self.names[0]}")  # checks
        if isinstance(y_spec, (list, tuple)):
            names = list(output_names)

            def by_name(*element):
                return (element[0], dict(zip(names, element[1])), *element[2:])

            self.dataset = self.dataset.map(by_name)

    def chunks(self, epoch: int, sizes: Iterator[int]) -> Iterator[Chunk]:
        """Chunks of up to `next(sizes)` batches; the loop reports how many it really ran."""
        start = 0
        while self.steps is None or start < self.steps:
            size = next(sizes)
            if self.steps is not None:
                size = min(size, self.steps - start)
            yield Chunk(start, size)
            start += size

    def epoch_iterator(self):
        """The iterator for a new epoch: a fresh pass, unless the steps per epoch are fixed."""
        if self._iterator is None or not self.cycles:
            self._iterator = iter(self.dataset)
        return self._iterator

    def restart(self):
        """A new pass over a finite dataset that ran out in the middle of an epoch."""
        self._iterator = iter(self.dataset)
        return self._iterator


class SpecFeed:
    """A feed of specs only, for building the steps without data (`graphfit inspect`).

    Args:
        x_spec: the inputs' `TensorSpec`s.
        y_spec: the labels' specs, or None to ask `default_labels`.
        default_labels: `(output_names, needed) -> y_spec`, called once the model is built
            (the labels' shape follows the outputs); None leaves the labels out.
    """

    names = ("x", "y")
    is_dataset = False
    varying_shapes = False

    def __init__(self, x_spec, y_spec=None, default_labels=None):
        self.x_spec, self.y_spec, self.default_labels = x_spec, y_spec, default_labels

    @property
    def element_spec(self):
        return self.x_spec, self.y_spec, None

    def arrange_targets(self, output_names, needed) -> None:
        if self.y_spec is not None:
            self.y_spec = arrange_targets(self.y_spec, output_names, needed, self.names[1])
        elif self.default_labels is not None:
            self.y_spec = self.default_labels(output_names, needed)


def make_feed(model, x, y=None, sample_weight=None, *, batch_size, shuffle=False,
              steps=None, check_finite=True, names=("x", "y"), seed=0,
              steps_argument="steps_per_epoch"):
    """Validates user data and wraps it in an `ArrayFeed` or a `DatasetFeed`.

    Graphs (a `graphfit.datasets.GraphSet`, or a dict of per-graph lists) become a
    `DatasetFeed` of batches of `batch_size` graphs (`graph_feeds.graph_batches`).

    Raises:
        ValueError: for mismatched lengths, NaN/inf values, a bad batch size, or a dataset
            with labels where none are expected.
    """
    graphs = graph_feeds.as_graph_set(x, names[0])
    if graphs is not None:
        dataset = graph_feeds.graph_batches(graphs, y, sample_weight, batch_size=batch_size,
                                            shuffle=shuffle, seed=seed,
                                            check_finite=check_finite, names=names)
        feed = DatasetFeed(dataset, steps, names, steps_argument)
        feed.from_graphs = feed.varying_shapes = True
        return feed
    if isinstance(x, tf.data.Dataset):
        if y is not None:
            raise ValueError(
                f"{names[0]} is a tf.data.Dataset, which already yields the labels; do not pass "
                f"{names[1]} as well."
            )
        if batch_size not in (None, DEFAULT_BATCH_SIZE):
            raise ValueError(
                f"{names[0]} is a tf.data.Dataset, which is already batched; batch it with "
                f"dataset.batch({batch_size}) instead of passing batch_size."
            )
        return DatasetFeed(x, steps, names, steps_argument)
    if batch_size is not None and (not isinstance(batch_size, (int, np.integer)) or batch_size < 1):
        raise ValueError(
            f"batch_size must be a positive integer, or None for all samples in one batch. "
            f"Received: batch_size={batch_size!r}"
        )
    x = to_arrays(model.arrange_inputs(x), model.dtype, features=True,
                  built=model.built_input_spec)
    y = to_arrays(y, model.dtype, features=False)
    sample_weight = None if sample_weight is None else to_array(sample_weight, model.dtype)
    named = {names[0]: x, names[1]: y, "sample_weight": sample_weight}
    input_checks.check_same_length({k: v for k, v in named.items() if v is not None})
    if check_finite:
        input_checks.check_finite(named)
    return ArrayFeed(x, y, sample_weight, batch_size, shuffle, seed, names, steps)

