"""`fit(..., cache_frozen=True)`: a frozen leading part computed once, the tail trained on it.

When a model starts with frozen, deterministic layers (`graphfit.training.frozen_split`), their
outputs are the same every epoch. With the cache, `fit` computes them once per data set, as the
model's own steps would (training data in training mode, where frozen layers run in inference
mode, e.g. BatchNormalization with its moving statistics; validation and test data in
inference mode), and trains the rest of the model, its tail, on them: same samples, same order,
same shuffling, so the same weights as without the cache. Callbacks, metrics, History and
checkpoints see the whole model; `predict`, `evaluate` and anything a callback runs use the
whole model. A `tf.data` validation or test set runs through the whole model.

The cache is kept between fits and checked where it is cheap: at every `fit` the data's
content (a hash of the arrays), at every epoch's start the frozen weights (a hash of their
values); a change recomputes the outputs. It is off, with a one-line warning saying why, when
there is no frozen leading part, when the frozen part is random or batch-dependent in training
(Dropout, noise), when the training data is a `tf.data.Dataset` or generator (its batches may
change every epoch: only in-memory arrays can be cached), when the model overrides
`train_step` / `test_step` (they receive the raw inputs), and when TensorBoard's gradient taps
are on (they read the whole model's step). Levenberg–Marquardt works on the tail: its
Jacobians are those of the trainable variables, which all live in the tail.
"""

from __future__ import annotations

import dataclasses
import hashlib
import warnings
import weakref

import numpy as np
import tensorflow as tf

from graphfit.training.compiled_steps import CompiledSteps, overrides_step
from graphfit.training.execution_sizer import ExecutionSizer
from graphfit.training.feeds import spec_of
from graphfit.training.frozen_split import FrozenSplit, frozen_outputs, split_frozen

__all__ = ["CachedFit", "cache_info", "check_cache_frozen", "start_cached_fit"]

# model -> _ModelCache; weak, so a cache never keeps a model (or its features) alive, and kept
# outside the model's attributes, which layer tracking walks.
_STORE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

_TRAINING_MODE = {"train": True, "val": False, "test": False}


def check_cache_frozen(value) -> bool:
    """`cache_frozen` must be a Python bool."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"cache_frozen must be True or False. Received: cache_frozen={value!r}")
    return bool(value)


def _fingerprint(arrays) -> bytes:
    digest = hashlib.blake2b(digest_size=16)
    for array in arrays:
        array = np.ascontiguousarray(array)
        digest.update(f"{array.dtype}{array.shape}".encode())
        digest.update(memoryview(array).cast("B"))
    return digest.digest()


def _weights_fingerprint(split: FrozenSplit) -> bytes:
    return _fingerprint(v.numpy() for layer in split.frozen for v in layer.variables)


@dataclasses.dataclass
class _Entry:
    data: bytes
    weights: bytes
    features: object


@dataclasses.dataclass
class _StageState:
    """What `loops.run_stage` reads of a `CompileState`, with the tail's compiled steps."""

    steps: CompiledSteps
    stage_metrics: dict
    sizers: dict
    optimizer: object


class _CachedFeed:
    """An in-memory feed whose inputs are the frozen part's outputs: the same rows, batches
    and shuffling as the feed it stands for."""

    is_dataset = False

    def __init__(self, feed, features):
        self.feed, self.features = feed, features
        self.names, self.batch_size, self.steps = feed.names, feed.batch_size, feed.steps

    def tensors(self):
        _, y, sample_weight = self.feed.tensors()
        return self.features, y, sample_weight

    def chunks(self, epoch, sizes):
        return self.feed.chunks(epoch, sizes)


class _ModelCache:
    """One model's cache, kept between fits while the model's structure and compile state
    stay the same."""

    def __init__(self, key, split: FrozenSplit, state, sample):
        self.key, self.split = key, split
        tail = split.tail
        tail.build_for(spec_of(sample))
        tail.compile_state = state  # the tail's default steps read the compiled loss
        self.steps = CompiledSteps(tail, state.loss_set, state.optimizer, state.stage_metrics,
                                   state.jit_compile, state.run_eagerly)
        self.sizers = {stage: ExecutionSizer(state.sizers[stage].setting)
                       for stage in ("train", "val", "test")}
        self.entries: dict[str, _Entry] = {}
        self.builds = 0


class CachedFit:
    """The cache as one `fit` uses it: per stage, the state and feed `run_stage` runs."""

    def __init__(self, cache: _ModelCache, state, feeds: dict):
        self.cache = cache
        cache.steps.stage_metrics = state.stage_metrics
        self.state = _StageState(cache.steps, state.stage_metrics, cache.sizers, state.optimizer)
        # Data-set content is hashed once per fit: fit converts the arrays to tensors once.
        self.feeds = {stage: feed for stage, feed in feeds.items()
                      if feed is not None and not feed.is_dataset}
        self.data = {stage: _fingerprint(np.asarray(a) for a in tf.nest.flatten(feed.x))
                     for stage, feed in self.feeds.items()}
        for stage in set(cache.entries) - set(self.feeds):
            del cache.entries[stage]  # not used by this fit: free the memory
        self.refresh()

    def refresh(self) -> None:
        """Recomputes the outputs whose data or frozen weights changed (each epoch's start)."""
        weights = _weights_fingerprint(self.cache.split)
        for stage, feed in self.feeds.items():
            entry = self.cache.entries.get(stage)
            if entry is not None and (entry.data, entry.weights) == (self.data[stage], weights):
                continue
            x = feed.tensors()[0]
            features = frozen_outputs(self.cache.split, x, feed.batch_size,
                                      training=_TRAINING_MODE[stage])
            self.cache.entries[stage] = _Entry(self.data[stage], weights, features)
            self.cache.builds += 1

    def stage(self, stage: str, state, feed):
        """(state, feed) for `run_stage`: the tail on the cached outputs where this stage's
        data is cached, else the whole model on `feed`."""
        if stage not in self.feeds or feed is not self.feeds[stage]:
            return state, feed
        return self.state, _CachedFeed(feed, self.cache.entries[stage].features)


def _refusal(model, state, train_feed) -> str | None:
    """Why the cache cannot serve this fit, whatever the model's layers; None if it can."""
    for step in ("train_step", "test_step"):
        if overrides_step(model, step):
            return (f"{type(model).__name__} overrides {step}, which receives the raw inputs, "
                    f"not the frozen part's outputs")
    if getattr(train_feed, "from_graphs", False):
        return ("graph batches are not cached yet (each epoch shuffles the graphs into new "
                "padded batches)")
    if train_feed.is_dataset:
        return ("x is a tf.data.Dataset: its batches may change every epoch (augmentation, a "
                "generator), and only in-memory arrays can be cached")
    if state.recorders:
        return "TensorBoard's gradient taps read the whole model's training step"
    return None


def start_cached_fit(model, state, feeds: dict) -> CachedFit | None:
    """The cache for a `fit` on `feeds` ({"train": ..., "val": ..., "test": ...}), built or
    refreshed; None, after a one-line warning saying why, when it cannot be used.

    Call it once the compile state is prepared for the feeds (the model is built).
    """
    reason = _refusal(model, state, feeds["train"])
    key = (id(state), id(state.steps),
           tuple((id(l), l.trainable) for l in model.flatten_layers()))
    cache = _STORE.get(model)
    if reason is None and (cache is None or cache.key != key):
        split = split_frozen(model)
        if isinstance(split, str):
            reason = split
        else:
            train = feeds["train"]
            sample = frozen_outputs(split, tf.nest.map_structure(
                lambda t: t[:1], train.tensors()[0]), 1, training=False)
            cache = _STORE[model] = _ModelCache(key, split, state, sample)
    if reason is not None:
        _STORE.pop(model, None)
        warnings.warn(f"cache_frozen: {reason}; the whole model trains as usual.",
                      stacklevel=4)
        return None
    return CachedFit(cache, state, feeds)


def cache_info(model) -> dict | None:
    """What the frozen-feature cache of `model` holds, or None when it has none.

    Returns:
        {"frozen_layers": names of the cached layers, "builds": how many times outputs
        were computed (one per data set, plus one per change of data or frozen weights),
        "cached": the stages whose outputs are held}.

    Example:

        >>> import numpy as np, graphfit as gf
        >>> from graphfit import layers
        >>> from graphfit.training.frozen_cache import cache_info
        >>> base = layers.Dense(8, activation="relu", trainable=False)
        >>> model = gf.Sequential([base, layers.Dense(1)])
        >>> model.compile(optimizer="sgd", loss="mse")
        >>> x, y = np.ones((16, 4)), np.ones((16, 1))
        >>> _ = model.fit(x, y, epochs=2, verbose=0, cache_frozen=True)
        >>> info = cache_info(model)
        >>> info["frozen_layers"] == [base.name], info["builds"]
        (True, 1)
    """
    cache = _STORE.get(model)
    if cache is None:
        return None
    return {"frozen_layers": [layer.name for layer in cache.split.frozen],
            "builds": cache.builds, "cached": sorted(cache.entries)}
