"""Keras layers in recipes: `{type: keras.NAME, ...}` and `{type: KerasLayer, layer: {class_name,
config}}` are checked like graphfit's own layers, build the same layer as plain Keras, and the
shipped noisy-sine LSTM recipe beats the naive forecast."""

from __future__ import annotations

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import cli
from graphfit.recipes import RecipeError, recipe_from_text
from graphfit.recipes.reading.components import LAYER
from graphfit.recipes.running.builder import instantiate

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RECIPE = os.path.join(REPO, "recipes", "sine_lstm.yaml")

_FRAME = """data: {{source: sine_sequences, n_samples: 40, steps: 5}}
model:
  layers:
    - {layer}
    - {{type: Dense, units: 1}}
loss: mse
"""


def _problems(layer: str) -> str:
    with pytest.raises(RecipeError) as caught:
        recipe_from_text(_FRAME.format(layer=layer), "r.yaml")
    return str(caught.value)


@pytest.mark.parametrize("layer, expected", [
    ("{type: keras.LTSM, units: 8}",
     "r.yaml:4:8: model.layers[0].type: unknown Keras layer 'keras.LTSM'. Did you mean "
     "'keras.LSTM'?"),
    ("{type: keras.GRU, unitz: 8}",
     "r.yaml:4:25: model.layers[0].unitz: keras.GRU has no argument 'unitz'; did you mean "
     "'units'?"),
    ("{type: keras.Conv1D, filters: 2, kernel_size: 3, padding: same, strdes: 1}",
     "model.layers[0].strdes: keras.Conv1D has no argument 'strdes'; did you mean 'strides'?"),
    ("{type: keras.LSTM, units: 8.5}",
     "r.yaml:4:26: model.layers[0].units: must be an integer, got 8.5"),
    ("{type: keras.Dense, units: -2}",
     "model.layers[0].units: keras.Dense: Received an invalid value for `units`"),
    ("{type: keras.Lambda, function: 'os:system'}",
     "model.layers[0].type: keras.Lambda runs an arbitrary Python function"),
    ("{type: keras.TFSMLayer, filepath: model}",
     "model.layers[0].type: keras.TFSMLayer loads and runs a SavedModel"),
    ("{type: KerasLayer, layer: {class_name: TimeDistributed, config: {layer: "
     "{class_name: Dense, module: os, config: {units: 1}}}}}",
     "model.layers[0].layer.config.layer.module: only Keras's own classes may be named"),
    ("{type: KerasLayer, layer: {class_name: Dens, config: {units: 1}}}",
     "model.layers[0].layer.class_name: unknown Keras layer 'Dens'. Did you mean 'Dense'?"),
    ("{type: KerasLayer, layer: {class_name: Dense, confg: {units: 1}}}",
     "model.layers[0].layer.confg: unknown key 'confg' of a serialized Keras layer; did you "
     "mean 'config'?"),
    ("{type: KerasLayer, layer: {class_name: Dense, config: {units: 1}}, nme: head}",
     "model.layers[0].nme: KerasLayer has no argument 'nme'; did you mean 'name'?"),
])
def test_bad_keras_layers_are_positioned_recipe_problems(layer, expected):
    assert expected in _problems(layer)


def _same_weights_output(adapter, plain, x):
    adapter.build(x.shape)
    plain.build(x.shape)
    assert [w.shape for w in plain.weights] == [v.shape for v in adapter.trainable_variables]
    plain.set_weights([v.numpy() for v in adapter.trainable_variables])
    np.testing.assert_allclose(adapter(x).numpy(), plain(x).numpy(), rtol=1e-6, atol=1e-6)


def test_keras_name_and_serialized_form_build_the_plain_keras_layer():
    x = tf.random.stateless_normal((3, 7, 2), seed=(1, 2))
    checked = recipe_from_text(_FRAME.format(layer="{type: keras.LSTM, units: 5, "
                                                   "return_sequences: true}"), "r.yaml")
    entry = checked.config["model"]["layers"][0]
    assert entry["activation"] == "tanh" and entry["units"] == 5  # Keras's defaults listed
    lstm = instantiate(entry, LAYER)
    assert isinstance(lstm, gf.layers.KerasLayer) and lstm.name.startswith("lstm")
    _same_weights_output(lstm, keras.layers.LSTM(5, return_sequences=True), x)
    serialized = {"type": "KerasLayer", "layer": {"class_name": "GRU", "config": {"units": 4}}}
    gru = instantiate(serialized, LAYER)
    _same_weights_output(gru, keras.layers.GRU(4), x)
    # Keras's own serialize() output (module, registered_name, nested dicts) is accepted too.
    full = {"type": "KerasLayer", "layer": keras.layers.serialize(keras.layers.Conv1D(2, 3))}
    recipe_from_text(_FRAME.format(layer=json.dumps(full)), "r.yaml")
    _same_weights_output(instantiate(full, LAYER), keras.layers.Conv1D(2, 3), x)


def test_sine_sequences_are_seeded_sines_observed_with_noise():
    x, y = gf.datasets.make_sine_sequences(n_samples=50, steps=12, noise=0.0, seed=3)
    again, _ = gf.datasets.make_sine_sequences(n_samples=50, steps=12, noise=0.0, seed=3)
    other, _ = gf.datasets.make_sine_sequences(n_samples=50, steps=12, noise=0.0, seed=4)
    np.testing.assert_array_equal(x, again)
    assert not np.allclose(x, other)
    series = np.concatenate([x[:, :, 0], y], axis=1).astype(np.float64)
    # A sine obeys s(t+1) + s(t-1) = 2 cos(w) s(t): one constant per window, w in range.
    ratio = (series[:, 2:] + series[:, :-2]) / 2
    cos_w = np.sum(ratio * series[:, 1:-1], axis=1) / np.sum(series[:, 1:-1] ** 2, axis=1)
    np.testing.assert_allclose(ratio, cos_w[:, None] * series[:, 1:-1], atol=1e-5)
    assert np.all(cos_w <= np.cos(2 * np.pi * 0.025) + 1e-6)
    assert np.all(cos_w >= np.cos(2 * np.pi * 0.1) - 1e-6)
    noisy, _ = gf.datasets.make_sine_sequences(n_samples=50, steps=12, noise=0.1, seed=3)
    assert 0.07 < float(np.std(noisy - x)) < 0.13
    with pytest.raises(ValueError, match="max_frequency <= 0.5"):
        gf.datasets.make_sine_sequences(max_frequency=0.7)


def test_the_lstm_recipe_beats_the_naive_forecast(tmp_path, capsys):
    run = tmp_path / "run"
    small = ["--set", "data.n_samples=600", "--set", "training.epochs=6", "--verbose", "0"]
    assert cli.main(["train", RECIPE, "--run-dir", str(run), *small]) == 0
    test_mse = json.loads((run / "metrics.json").read_text())["test"]["loss"]
    x, y = gf.datasets.make_sine_sequences(n_samples=600, steps=20, noise=0.05, seed=0)
    naive_mse = float(np.mean((x[:, -1] - y) ** 2))
    assert test_mse < 0.5 * naive_mse, (test_mse, naive_mse)
