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

from graphfit.datasets.pipeline_functions import own_function
from graphfit.training import distribution, graph_feeds, input_checks
from graphfit.training.array_data import (
    arrange_targets,
    is_structure_of_arrays,
    spec_of,
    to_array,
    to_arrays,
)

__all__ = ["ArrayFeed", "DatasetFeed", "SpecFeed", "make_feed", "Chunk", "DEFAULT_BATCH_SIZE",
           "refuse_python_iterators"]

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
        shuffle: True draws a new permutation of the samples every pass over them (when a
            pass holds more than one batch); "batch" (Keras's) keeps each batch's samples and
            only reorders them inside it; False keeps the data's order.
        seed: with the pass number, fixes each pass's permutation (reproducible, resumable).
        steps: batches per epoch (`steps_per_epoch`), with Keras 3's semantics: the epochs walk
            on through a pass over the data, and an epoch ends early where the pass ends,
            the next one starting a new pass (a new permutation). With 10 batches per pass
            and steps=4 the epochs run 4, 4, 2, 4, 4, 2, ... batches; with steps=12, 10
            each. None: an epoch is one pass.
    """

    is_dataset = False
    varying_shapes = False  # every batch but a pass's last has the same shape

    def __init__(self, x, y, sample_weight, batch_size: int | None, shuffle: bool | str,
                 seed: int, names=("x", "y"), steps: int | None = None):
        self.x, self.y, self.sample_weight = x, y, sample_weight
        self.names = names
        self.num_samples = int(np.shape(tf.nest.flatten(x)[0])[0])
        self.batch_size = (self.num_samples if batch_size is None
                           else min(batch_size, self.num_samples))
        self.batches_per_pass = math.ceil(self.num_samples / self.batch_size)
        # One batch per pass holds every sample whatever the order: shuffling it would only
        # change the rounding of its sums, and make a full-batch fit irreproducible.
        shuffle = "batch" if isinstance(shuffle, str) and shuffle == "batch" else bool(shuffle)
        self.shuffle = shuffle if self.batches_per_pass > 1 else False
        self.seed = seed
        self.fixed_steps = steps
        self.steps = self.batches_per_pass if steps is None else steps
        self._tensors = None
        self._warned = False

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

    def chunks(self, epoch: int, sizes: Iterator[int], skip: int = 0) -> Iterator[Chunk]:
        """The epoch's batches, grouped into chunks whose sizes `sizes` yields one by one,
        less its first `skip` batches (done before a mid-epoch resume).

        A pass's last, smaller batch (if any) is a chunk of its own: rows of a chunk share one
        size. With fixed steps, an epoch's batches follow from its number alone (a resumed
        fit runs those of an unbroken one): a pass is split into `epochs_per_pass` epochs.
        """
        if self.fixed_steps is None:  # one pass, or its first batches
            yield from self._pass_chunks(epoch, 0, self.steps, sizes, skip)
            return
        number, part = divmod(epoch, self.epochs_per_pass)
        first = part * self.steps
        if first + self.steps > self.batches_per_pass and not self._warned:
            self._warned = True
            warnings.warn(
                f"One pass over {self.names[0]} holds {self.batches_per_pass} batches, not a "
                f"multiple of steps_per_epoch={self.steps}: as in Keras, an epoch ends where "
                f"the pass ends, so some epochs run fewer steps. Choose a steps_per_epoch "
                f"that divides {self.batches_per_pass} for epochs of equal length.",
                stacklevel=5)
        yield from self._pass_chunks(number, first, min(first + self.steps,
                                                         self.batches_per_pass), sizes, skip)

    @property
    def epochs_per_pass(self) -> int:
        """How many epochs of `steps` batches one pass over the data makes (the last of them
        shorter when `steps` does not divide the pass, as Keras's)."""
        return math.ceil(self.batches_per_pass / self.steps)

    def _order(self, number: int) -> np.ndarray:
        """The samples in the order of pass `number`."""
        order = np.arange(self.num_samples, dtype=np.int32)
        if self.shuffle is True:
            order = np.random.default_rng([self.seed, number]).permutation(order).astype(np.int32)
        elif self.shuffle == "batch":  # each batch keeps its samples, in a new order
            rng = np.random.default_rng([self.seed, number])
            for start in range(0, self.num_samples, self.batch_size):
                order[start:start + self.batch_size] = rng.permutation(
                    order[start:start + self.batch_size])
        return order

    def _pass_chunks(self, number: int, first: int, stop: int,
                     sizes: Iterator[int], skip: int = 0) -> Iterator[Chunk]:
        """Chunks of the batches `first` + `skip` ... `stop` − 1 of pass `number` over the
        samples, numbered from `first`."""
        order = self._order(number)
        full = self.num_samples // self.batch_size
        rows = order[: full * self.batch_size].reshape(full, self.batch_size)
        start = first + skip
        while start < min(stop, full):
            size = max(1, min(next(sizes), min(stop, full) - start))
            yield Chunk(start - first, size, rows[start : start + size])
            start += size
        if stop > full and first + skip <= full:  # the smaller last batch
            yield Chunk(full - first, 1, order[full * self.batch_size :][None, :])


class DatasetFeed:
    """A `tf.data.Dataset` of batches: `x`, `(x, y)` or `(x, y, sample_weight)`.

    Args:
        dataset: the batched dataset.
        steps: batches per epoch; None reads until the dataset ends. With steps, Keras 3's
            semantics: the training iterator carries on across epochs (an evaluation's starts
            a new pass every time, `stage_data.first_batches`), and where a finite dataset runs
            out the epoch ends early (with a warning) and the next one starts a new pass.
            A dataset that repeats forever gives every epoch `steps` batches.
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
        self.steps_argument = steps_argument
        # each worker's own batches (`distribution.per_worker`), gathered in every step
        self.per_worker = distribution.reads_per_worker(dataset)
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
        self.cycles = steps is not None  # keep the iterator from one epoch to the next
        self._pass_length = cardinality if cardinality >= 0 else None
        self._iterator = None
        self._read = 0  # batches read from the iterator
        self._warned = False

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

            @own_function
            def by_name(*element):
                return (element[0], dict(zip(names, element[1])), *element[2:])

            self.dataset = self.dataset.map(by_name)

    def chunks(self, epoch: int, sizes: Iterator[int], skip: int = 0) -> Iterator[Chunk]:
        """Chunks of up to `next(sizes)` batches, from batch `skip` (a restored iterator
        stands there); the loop reports how many it really ran."""
        if skip:
            self._read += skip
        start = skip
        while self.steps is None or start < self.steps:
            size = next(sizes)
            if self.steps is not None:
                size = min(size, self.steps - start)
            yield Chunk(start, size)
            start += size

    def epoch_iterator(self):
        """The iterator for a new epoch: a fresh pass, unless the steps per epoch are fixed
        and the current pass has batches left (Keras's `EpochIterator`)."""
        finished = self._pass_length is not None and self._read >= self._pass_length
        if self._iterator is None or not self.cycles or finished:
            self._iterator = iter(self.dataset)
            self._read = 0
        return self._iterator

    def record(self, ran: int, wanted: int) -> None:
        """Counts the batches a chunk read (`ran` of the `wanted`); a dataset that ran out
        starts a new pass at the next epoch. With fixed steps the epoch then ends early, as
        in Keras, with one warning per feed."""
        self._read += ran
        if ran >= wanted:
            return
        self._iterator = None
        if self.cycles and not self._warned:
            self._warned = True
            warnings.warn(
                f"{self.names[0]} ran out of data before {self.steps_argument}={self.steps} "
                f"batches: as in Keras, the epoch ends there and the next one starts a new "
                f"pass. Repeat the dataset (dataset.repeat()) for epochs of "
                f"{self.steps_argument} batches each.", stacklevel=5)


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


def refuse_python_iterators(x, name: str) -> None:
    """A generator or a `keras.utils.PyDataset` (Keras reads them batch by batch in Python)."""
    kinds = {c.__name__ for c in type(x).__mro__}
    if "PyDataset" in kinds or hasattr(x, "__next__"):
        raise ValueError(
            f"{name} is a {type(x).__name__}, which graphfit does not read batch by batch in "
            f"Python: wrap it in a tf.data.Dataset (tf.data.Dataset.from_generator(...), with "
            f"its output_signature) and pass the dataset, or pass arrays.")


def _refuse_per_output_weights(sample_weight) -> None:
    if isinstance(sample_weight, dict) or is_structure_of_arrays(sample_weight):
        raise ValueError(
            "sample_weight gives one array per output, which graphfit does not take (Keras "
            "does): pass one array, one weight per sample, for every output's loss, and "
            "weigh whole outputs with compile(loss_weights=...).")


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
    refuse_python_iterators(x, names[0])
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
    _refuse_per_output_weights(sample_weight)
    sample_weight = None if sample_weight is None else to_array(sample_weight, model.dtype)
    named = {names[0]: x, names[1]: y, "sample_weight": sample_weight}
    input_checks.check_same_length({k: v for k, v in named.items() if v is not None})
    if check_finite:
        input_checks.check_finite(named)
    return ArrayFeed(x, y, sample_weight, batch_size, shuffle, seed, names, steps)

