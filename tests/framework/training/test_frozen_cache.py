"""fit(..., cache_frozen=True): the frozen leading part computed once, the tail trained on it.

The reference is the same model trained without the cache, from the same initial weights and
the same shuffling: the cache must not change a single number beyond float rounding.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers
from graphfit.recipes import load_recipe
from graphfit.recipes.running import training_run
from graphfit.training.frozen_cache import cache_info
from graphfit.training.frozen_split import is_stochastic, split_frozen

RNG = np.random.default_rng(0)
X = RNG.normal(size=(120, 6)).astype("float32")
Y = (X[:, 0] + X[:, 1] ** 2 > 0.5).astype("int64") + (X[:, 2] > 0.8)
SPLIT = (X[:24], Y[:24])


def _sequential(extra_frozen=()):
    base = [layers.Dense(12, activation="tanh", name="base_dense"),
            layers.BatchNormalization(name="base_bn"), *extra_frozen]
    for layer in base:
        layer.trainable = False
    return gf.Sequential([*base, layers.Dense(8, activation="relu", name="head_hidden"),
                          layers.BatchNormalization(name="head_bn"),
                          layers.Dense(3, name="head_out")], input_shape=(6,))


def _graph():
    return gf.GraphModel(
        inputs={"x": (6,)},
        nodes=[gf.Node(layers.Dense(10, activation="tanh", name="g_base", trainable=False), "x"),
               gf.Node(layers.Dense(5, activation="relu", name="g_side"), "x"),
               gf.Node(layers.Concatenate(name="g_join"), ["g_base", "g_side"]),
               gf.Node(layers.Dense(3, name="g_out"), "g_join")],
        outputs="g_out")


def _fit(model, cache, epochs=3, **kwargs):
    if not model.compiled:
        model.compile(optimizer=gf.optimizers.Adam(0.01),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"], jit_compile=False)  # XLA: slow to compile
    np.random.seed(7)  # fit draws its shuffle seed from numpy: the same order both times
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit(kwargs.pop("x", X), Y, batch_size=16, epochs=epochs, verbose=0,
                            cache_frozen=cache, **kwargs)
    notes = [str(w.message) for w in caught if "cache_frozen" in str(w.message)]
    return history, notes


def _twins(make):
    """Two models with the same initial weights (moving statistics moved off their init)."""
    a, b = make(), make()
    for model in (a, b):
        if not model.built:
            model.build((None, 6))
    weights = [w + RNG.normal(scale=0.1, size=w.shape).astype(w.dtype) ** 2
               for w in a.get_weights()]
    a.set_weights(weights)
    b.set_weights(weights)
    return a, b


@pytest.fixture(scope="module")
def trained_pair():
    """The same Sequential trained for 3 epochs with and without the cache."""
    plain, cached = _twins(_sequential)
    plain_history, plain_notes = _fit(plain, False, validation_data=SPLIT, test_data=SPLIT)
    cached_history, cached_notes = _fit(cached, True, validation_data=SPLIT, test_data=SPLIT)
    assert plain_notes == [] and cached_notes == []
    return plain, cached, plain_history, cached_history


def test_three_epochs_give_the_same_weights_history_and_predictions(trained_pair):
    plain, cached, plain_history, cached_history = trained_pair
    info = cache_info(cached)
    assert info["frozen_layers"] == ["base_dense", "base_bn"]
    assert info["builds"] == 3 and info["cached"] == ["test", "train", "val"]
    assert cache_info(plain) is None
    for a, b in zip(plain.get_weights(), cached.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)
    assert plain_history.history.keys() == cached_history.history.keys()
    for key, values in plain_history.history.items():
        np.testing.assert_allclose(values, cached_history.history[key], atol=1e-5, err_msg=key)
    # The head's batch norm moved (its hooks ran on the cached features); the frozen one did not.
    assert not np.allclose(cached.get_layer("head_bn").moving_mean.numpy(), 0.0)
    np.testing.assert_allclose(plain.predict(X, verbose=0), cached.predict(X, verbose=0),
                               atol=1e-5)


def test_a_changed_frozen_weight_or_data_forces_recomputation(trained_pair):
    plain, cached, _, _ = trained_pair
    builds = cache_info(cached)["builds"]
    _fit(cached, True, epochs=1)  # same data, same frozen weights: nothing recomputed
    _fit(plain, False, epochs=1)
    assert cache_info(cached)["builds"] == builds
    assert cache_info(cached)["cached"] == ["train"]  # val and test, unused, were dropped
    for model in (plain, cached):
        kernel = model.get_layer("base_dense").variables[0]
        kernel.assign(kernel * 1.5)
    _fit(cached, True, epochs=1)
    _fit(plain, False, epochs=1)
    assert cache_info(cached)["builds"] == builds + 1
    _fit(cached, True, epochs=1, x=X * 0.5)  # new data content
    _fit(plain, False, epochs=1, x=X * 0.5)
    assert cache_info(cached)["builds"] == builds + 2
    for a, b in zip(plain.get_weights(), cached.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)


class _Jitter(gf.Layer):
    """A custom layer that declares itself random in training."""

    stochastic_in_training = True

    def call(self, x, training=False):
        return x + tf.random.normal(tf.shape(x)) if training else x


def test_a_stochastic_frozen_part_turns_the_cache_off():
    model = _sequential([layers.Dropout(0.3, name="base_drop")])
    history, notes = _fit(model, True, epochs=1)
    assert len(notes) == 1 and "\n" not in notes[0]
    assert notes[0].startswith("cache_frozen: the frozen part is not deterministic: layer "
                               "'base_drop' (Dropout) draws random numbers in training mode")
    assert cache_info(model) is None and np.isfinite(history.history["loss"][0])
    # A custom layer declares itself random with a class attribute.
    declared = _sequential([_Jitter(name="jitter")])
    assert is_stochastic(declared.get_layer("jitter")) and not is_stochastic(layers.Dense(2))
    assert not is_stochastic(layers.Dropout(0.0))
    assert "layer 'jitter' (_Jitter) draws random numbers" in split_frozen(declared)


def test_nothing_to_cache_says_so_and_trains():
    model = gf.Sequential([layers.Flatten(), layers.Dense(3)], input_shape=(6,))
    history, notes = _fit(model, True, epochs=1)
    assert notes == ["cache_frozen: nothing to cache: the model has no frozen leading part (no "
                     "leading layer with trainable=False); the whole model trains as usual."]
    assert np.isfinite(history.history["loss"][0])
    with pytest.warns(UserWarning, match="cache_frozen: x is a tf.data.Dataset: .* only "
                                         "in-memory arrays can be cached"):
        model.fit(tf.data.Dataset.from_tensor_slices((X, Y)).batch(32), epochs=1, verbose=0,
                  cache_frozen=True)
    with pytest.raises(ValueError, match="cache_frozen must be True or False. Received: "
                                         "cache_frozen='yes'"):
        model.fit(X, Y, epochs=1, verbose=0, cache_frozen="yes")


def test_graph_model_caches_its_frozen_nodes():
    plain, cached = _twins(_graph)
    _fit(plain, False, epochs=2, validation_data=SPLIT)
    _, notes = _fit(cached, True, epochs=2, validation_data=SPLIT)
    assert notes == [] and cache_info(cached)["frozen_layers"] == ["g_base"]
    for a, b in zip(plain.get_weights(), cached.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_levenberg_marquardt_trains_the_tail():
    def make():
        return gf.Sequential([layers.Dense(6, activation="tanh", trainable=False),
                              layers.Dense(4, activation="tanh"), layers.Dense(1)],
                             dtype="float64", input_shape=(6,))

    plain, cached = _twins(make)
    target = np.sin(X[:, :1]).astype("float64")
    for model, cache in ((plain, False), (cached, True)):
        model.compile(optimizer=gf.optimizers.LevenbergMarquardt(), loss="mse", jit_compile=False)
        model.fit(X.astype("float64"), target, batch_size=None, epochs=3, verbose=0,
                  cache_frozen=cache)
    assert cache_info(cached)["builds"] == 1
    for a, b in zip(plain.get_weights(), cached.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-9)


RECIPE = """\
data: {source: moons, n_samples: 60}
model:
  layers:
    - {type: Dense, units: 8, activation: tanh, trainable: false, name: frozen_base}
    - {type: Dense, units: 1, name: head}
loss: {type: BinaryCrossentropy, from_logits: true}
training: {epochs: 2, batch_size: 16, cache_frozen: true}
"""


def test_recipe_key_trains_with_the_cache(tmp_path):
    path = tmp_path / "cached.yaml"
    path.write_text(RECIPE)
    recipe = load_recipe(str(path))
    assert recipe.config["training"]["cache_frozen"] is True
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "cache is off" warning
        result = training_run.train(recipe, run_dir=str(tmp_path / "run"), verbose=0)
    info = cache_info(result.model)
    assert info["frozen_layers"] == ["frozen_base"] and info["builds"] == 3
    assert os.path.exists(tmp_path / "run" / "metrics.json")


def test_graph_batches_say_why_they_are_not_cached():
    graphs, labels = gf.datasets.make_graph_classes(16, seed=0, features="one_hot_degree")
    model = gf.GraphModel(
        inputs=["node_features", "senders", "receivers", "graph_index", "node_counts"],
        nodes=[gf.Node(layers.GINConv(8, name="gin", trainable=False),
                       ["node_features", "senders", "receivers"]),
               gf.Node(layers.SegmentPooling("sum", name="pool"),
                       ["gin", "graph_index", "node_counts"]),
               gf.Node(layers.Dense(8, name="label"), "pool")],
        outputs="label")
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", jit_compile=False)
    with pytest.warns(UserWarning, match="cache_frozen: graph batches are not cached yet"):
        model.fit(graphs, labels, batch_size=8, epochs=1, verbose=0, cache_frozen=True)
