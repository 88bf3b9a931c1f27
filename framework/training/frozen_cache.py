"""`fit(..., cache_frozen=True)`: a frozen leading part computed once, the tail trained on it.

When a model starts with frozen, deterministic layers (`graphfit.training.frozen_split`), their
outputs are the same every epoch. `fit_on_cached_features` computes them once per data set,
as the model's own steps would (training data in training mode, where frozen layers run in
inference mode, e.g. BatchNormalization with its moving statistics; validation and test data
in inference mode), and hands an ordinary `fit` of the tail (a model of the remaining layers,
the same layer objects) those features as its inputs: same samples, same order, same
shuffling, so the same weights as without the cache. The tail's fit shares the model's
optimizer, compiled loss and fit state; the callbacks see the whole model (`_WholeModel`), so
checkpoints, early stopping and TensorBoard work on it as usual, and `predict`, `evaluate` and
anything a callback runs use the whole model.

The cache is kept between fits and checked where it is cheap: at every `fit` the data's
content (a hash of the arrays), at every epoch's start the frozen weights (a hash of their
values); a change recomputes the features, in place (they are held in variables the tail's
feed reads at each call). It is off, with a one-line warning saying why, when there is no
frozen leading part, when the frozen part is random or batch-dependent in training (Dropout,
noise), when the training, validation or test data is a `tf.data.Dataset` or graphs (only
in-memory arrays can be cached), and when the model overrides `train_step` / `test_step` (they
receive the raw inputs). Levenberg–Marquardt works on the tail: its Jacobians are those of the
trainable variables, which all live in the tail.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import warnings
import weakref

import numpy as np
import tensorflow as tf

from graphfit.callbacks import Callback, CallbackList
from graphfit.saving import checkpoints
from graphfit.training import loops
from graphfit.training.compiled_steps import overrides_step
from graphfit.training.execution_sizer import ExecutionSizer
from graphfit.training.feeds import make_feed
from graphfit.training.frozen_split import FrozenSplit, frozen_outputs, split_frozen
from graphfit.training.stage_data import split_pair

__all__ = ["fit_on_cached_features", "cache_info", "check_cache_frozen"]

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
    features: object  # a structure of tf.Variables, read by the tail's feed at each call


class _ModelCache:
    """One model's cache, kept between fits while its structure and compile state stay."""

    def __init__(self, key, split: FrozenSplit, state):
        self.key, self.split = key, split
        tail = split.tail
        tail_state = copy.copy(state)  # the same optimizer, loss and settings
        tail_state.steps, tail_state.stage_metrics, tail_state.recorders = None, {}, []
        tail_state.sizers = {stage: ExecutionSizer(sizer.setting)
                             for stage, sizer in state.sizers.items()}
        tail.compile_state = tail_state
        self.entries: dict[str, _Entry] = {}
        self.builds = 0

    def features(self, stage: str, x, batch_size: int):
        """The frozen part's outputs on `x` for `stage`, computed again when the data's or
        the frozen weights' hash changed (in place, into the same variables)."""
        data = _fingerprint(np.asarray(a) for a in tf.nest.flatten(x))
        weights = _weights_fingerprint(self.split)
        entry = self.entries.get(stage)
        if entry is not None and (entry.data, entry.weights) == (data, weights):
            return entry.features
        values = frozen_outputs(self.split, tf.nest.map_structure(tf.convert_to_tensor, x),
                                batch_size, training=_TRAINING_MODE[stage])
        same_shapes = entry is not None and all(
            v.shape == t.shape for v, t in zip(tf.nest.flatten(entry.features),
                                               tf.nest.flatten(values)))
        if same_shapes:
            tf.nest.map_structure(lambda v, t: v.assign(t), entry.features, values)
            entry.data, entry.weights = data, weights
        else:
            entry = self.entries[stage] = _Entry(data, weights, tf.nest.map_structure(
                lambda t: tf.Variable(t, trainable=False, name="cached_features"), values))
        self.builds += 1
        return entry.features

    def refresh(self, batch_sizes: dict, inputs: dict) -> None:
        """Recomputes the features whose frozen weights changed (each epoch's start)."""
        for stage, x in inputs.items():
            self.features(stage, x, batch_sizes[stage])


class _WholeModel(Callback):
    """The user's callbacks, bound to the whole model, run by the tail's fit: they see and
    save the whole model, and their requests (stop, stop reason) reach the tail's loop."""

    def __init__(self, callbacks, model, on_epoch_begin):
        super().__init__()
        self.inner = CallbackList(callbacks, model=model)
        self.whole = model
        self._on_epoch_begin = on_epoch_begin
        self.restores_weights = self.inner.restores_weights

    def set_model(self, model) -> None:
        self.tail = model  # the callbacks keep the whole model

    def set_params(self, params) -> None:
        super().set_params(params)
        self.inner.set_params(params)

    def _sync(self) -> None:
        self.tail.stop_training = self.tail.stop_training or self.whole.stop_training
        self.tail.stop_reason = self.tail.stop_reason or self.whole.stop_reason

    def on_train_begin(self, logs=None):
        self.whole.stop_training, self.whole.stop_reason = False, None
        self.inner.on_train_begin(logs)
        for recorder in self.whole.step_recorders:  # a TensorBoard's taps: on the tail's step
            self.tail.add_step_recorder(recorder)

    def on_epoch_begin(self, epoch, logs=None):
        self.inner.on_epoch_begin(epoch, logs)
        self._on_epoch_begin()  # a callback may have changed a frozen weight

    def on_epoch_end(self, epoch, logs=None):
        self.inner.on_epoch_end(epoch, logs)
        self._sync()

    def on_train_end(self, logs=None):
        self.whole.stop_reason = self.tail.stop_reason
        self.inner.on_train_end(logs)
        for recorder in self.whole.step_recorders:
            self.tail.remove_step_recorder(recorder)

    def restore_final_weights(self) -> bool:
        return self.inner.restore_final_weights()

    def implements_train_batch_hooks(self) -> bool:
        return self.inner.implements_train_batch_hooks()

    def implements_test_batch_hooks(self) -> bool:
        return self.inner.implements_test_batch_hooks()

    def on_train_batch_begin(self, batch, logs=None):
        self.inner.on_train_batch_begin(batch, logs)

    def on_train_batch_end(self, batch, logs=None):
        self.inner.on_train_batch_end(batch, logs)
        self._sync()

    def on_test_begin(self, logs=None, stage="test"):
        self.whole.stop_evaluating = False
        self.inner.on_test_begin(logs, stage=stage)

    def on_test_batch_begin(self, batch, logs=None, stage="test"):
        self.inner.on_test_batch_begin(batch, logs, stage=stage)

    def on_test_batch_end(self, batch, logs=None, stage="test"):
        self.inner.on_test_batch_end(batch, logs, stage=stage)
        self.tail.stop_evaluating = self.whole.stop_evaluating

    def on_test_end(self, logs=None, stage="test"):
        self.inner.on_test_end(logs, stage=stage)


def _refusal(model, x, validation_data, test_data) -> str | None:
    """Why the cache cannot serve this fit, whatever the model's layers; None if it can."""
    for step in ("train_step", "test_step"):
        if overrides_step(model, step):
            return (f"{type(model).__name__} overrides {step}, which receives the raw inputs, "
                    f"not the frozen part's outputs")
    if isinstance(x, tf.data.Dataset):
        return ("x is a tf.data.Dataset: its batches may change every epoch (augmentation, a "
                "generator), and only in-memory arrays can be cached")
    for argument, data in (("validation_data", validation_data), ("test_data", test_data)):
        if isinstance(data, tf.data.Dataset):
            return (f"{argument} is a tf.data.Dataset, which cannot be passed through the "
                    f"frozen part once; only in-memory arrays can be cached")
    return None


def _model_cache(model, state, train_feed) -> _ModelCache | str:
    """The model's cache for this compile state and structure, or why there is none."""
    if train_feed.varying_shapes:
        return ("graph batches are not cached yet (each epoch shuffles the graphs into new "
                "padded batches)")
    key = (id(state), tuple((id(l), l.trainable) for l in model.flatten_layers()))
    cache = _STORE.get(model)
    if cache is None or cache.key != key:
        state.prepare(model, train_feed)  # builds the model: the split traces its hooks
        split = split_frozen(model)
        if isinstance(split, str):
            _STORE.pop(model, None)
            return split
        cache = _STORE[model] = _ModelCache(key, split, state)
    return cache


def fit_on_cached_features(model, x, y, *, batch_size, callbacks, validation_data, test_data,
                           sample_weight, check_finite, **fit_arguments):
    """`model.fit` with `cache_frozen=True`: the tail's `fit` on the frozen part's outputs;
    returns its `History`, or None (after a one-line warning saying why) when the cache
    cannot serve this fit and the whole model should train as usual.

    Raises:
        ValueError: under a tf.distribute strategy; for bad data, as `fit`.
    """
    state = model.compiled_for("fit")
    if state.strategy is not None:
        raise ValueError("fit(cache_frozen=True) is not supported under a tf.distribute "
                         "strategy yet; leave cache_frozen off to train under the strategy.")
    reason = _refusal(model, x, validation_data, test_data)
    train = None if reason else make_feed(model, x, y, sample_weight, batch_size=batch_size,
                                          check_finite=check_finite)
    cache = reason or _model_cache(model, state, train)
    if isinstance(cache, str):
        warnings.warn(f"cache_frozen: {cache}; the whole model trains as usual.", stacklevel=3)
        return None
    inputs = {"train": train.x}
    labels = {"train": (y, sample_weight)}
    for stage, data in (("val", validation_data), ("test", test_data)):
        if data is not None:
            vx, vy, vw = split_pair(data, {"val": "validation_data", "test": "test_data"}[stage])
            inputs[stage] = make_feed(model, vx, vy, vw, batch_size=batch_size,
                                      check_finite=check_finite).x
            labels[stage] = (vy, vw)
    for stage in set(cache.entries) - set(inputs):
        del cache.entries[stage]  # not used by this fit: free the memory
    batch_sizes = {stage: batch_size or len(tf.nest.flatten(x_)[0])
                   for stage, x_ in inputs.items()}
    features = {stage: cache.features(stage, x_, batch_sizes[stage])
                for stage, x_ in inputs.items()}
    tail = cache.split.tail
    checkpoints.share_fit_state(tail, model)  # epochs and shuffling carry on as the model's
    whole = _WholeModel(callbacks, model, lambda: cache.refresh(batch_sizes, inputs))
    evaluation = {stage: (features[stage], *labels[stage]) for stage in ("val", "test")
                  if stage in features}
    history = loops.fit(tail, features["train"], y, batch_size=batch_size, callbacks=[whole],
                        validation_data=evaluation.get("val"),
                        test_data=evaluation.get("test"), sample_weight=sample_weight,
                        check_finite=False, **fit_arguments)
    model.history, history.model = history, model
    return history


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
