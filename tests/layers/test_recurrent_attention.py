"""LSTM, GRU and MultiHeadAttention (Keras's layers as graphfit layers, `KerasBacked`): Keras's
numbers on the same weights, Levenberg–Marquardt through them, node Jacobians and per-example
gradients checked against `tf.GradientTape` one example at a time, attention in a graph model
and a functional model, and the recipe form `{type: LSTM, units: 8}` from the CLI."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import autodiff, cli, layers, optimizers
from graphfit.layers import recurrent
from graphfit.models.graph_model import GraphModel, Node
from graphfit.models.input_layer import Input

_RNG = np.random.default_rng(0)
X = _RNG.normal(size=(12, 4, 3)).astype("float32")  # 4 steps: a small unrolled graph
Y = np.sin(X.sum(axis=(1, 2)))[:, None].astype("float32")


def _model(kind: str, **arguments) -> gf.Sequential:
    gf.set_seed(1)
    model = gf.Sequential([getattr(layers, kind)(4, name="rnn", **arguments),
                           layers.Dense(1, name="out")])
    model.build((None, 4, 3))
    return model


@pytest.fixture(scope="module", params=["LSTM", "GRU"])
def fitted(request):
    """A tiny recurrent regressor trained 4 epochs by Levenberg–Marquardt (full batch)."""
    model = _model(request.param)
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    history = model.fit(X, Y, epochs=4, batch_size=12, verbose=0)
    return request.param, model, history.history["loss"]


def test_levenberg_marquardt_decreases_the_loss(fitted):
    kind, model, losses = fitted
    assert model.get_layer("rnn").keras_layer.unroll  # graphfit's unroll=None: short sequence
    assert losses[-1] < 0.5 * losses[0], (kind, losses)


def _tape_rows(model, x, variables):
    """Per example i: d output_i / d variables, from a plain GradientTape on example i alone."""
    rows = []
    for i in range(len(x)):
        with tf.GradientTape() as tape:
            out = model(x[i:i + 1])[0, 0]
        rows.append(tape.gradient(out, variables))
    return rows


def test_node_jacobian_matches_the_tape_example_by_example(fitted):
    kind, model, _ = fitted
    x = X[:4]
    variables = model.get_layer("rnn").trainable_variables
    jacobian = autodiff.jacobian(model, x, wrt="rnn")
    expected = _tape_rows(model, x, variables)
    for key, variable_index in zip(jacobian, range(len(variables))):
        for i in range(len(x)):
            np.testing.assert_allclose(jacobian[key][i, 0], expected[i][variable_index],
                                       atol=1e-5, err_msg=f"{kind} {key} example {i}")
    # The Jacobian of the recurrent layer's own output with respect to the inputs: blocks.
    blocks = autodiff.jacobian(model, x, of="rnn", wrt="inputs")
    assert blocks.shape == (4, 4, 4, 3)
    with tf.GradientTape() as tape:
        x0 = tf.constant(x[:1])
        tape.watch(x0)
        state = model.get_layer("rnn")(x0)
    np.testing.assert_allclose(blocks[0], tape.jacobian(state, x0)[0, :, 0], atol=1e-5)


def test_per_example_gradients_match_the_tape(fitted):
    kind, model, _ = fitted
    x, y = X[:5], Y[:5]
    gradients = autodiff.per_example_gradients(model, x, y, loss="mse", method="vectorized")
    for i in range(len(x)):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(x[i:i + 1]) - y[i:i + 1]) ** 2) / len(x)
        expected = tape.gradient(loss, model.trainable_variables)
        for got, want in zip(gradients, expected):
            np.testing.assert_allclose(got[i], want, atol=1e-6, err_msg=f"{kind} example {i}")


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_outputs_match_keras_looped_layer_on_the_same_weights(kind):
    ours = getattr(layers, kind)(3, return_sequences=True, go_backwards=True)
    out = ours(X)
    assert ours.keras_layer.unroll
    twin = getattr(keras.layers, kind)(3, return_sequences=True, go_backwards=True)
    twin(X)
    twin.set_weights([w.numpy() for w in ours.keras_layer.weights])
    np.testing.assert_allclose(out, twin(X), atol=1e-5)


def test_unroll_choices():
    assert not layers.LSTM(2, unroll=False).keras_layer.unroll
    long = layers.LSTM(2)
    long(tf.zeros((1, recurrent.MAX_UNROLL + 1, 2)))
    assert not long.keras_layer.unroll  # long sequences keep Keras's loop
    unknown = gf.Sequential([layers.GRU(2, name="g")])
    unknown.build((None, None, 2))
    assert not unknown.get_layer("g").keras_layer.unroll


def test_config_round_trip_and_save_load(tmp_path):
    model = _model("GRU", reset_after=False, kernel_initializer=keras.initializers.Ones())
    config = model.get_layer("rnn").get_config()
    assert config["reset_after"] is False and config["kernel_initializer"]["class_name"] == "Ones"
    rebuilt = layers.GRU.from_config(config)
    assert rebuilt.keras_layer.reset_after is False
    model.save(tmp_path / "m.graphfit")
    loaded = gf.saving.load_model(tmp_path / "m.graphfit")
    np.testing.assert_allclose(loaded(X), model(X), atol=1e-6)  # eager: no predict tracing


def test_bad_arguments_name_the_layer():
    with pytest.raises(ValueError, match="LSTM: got an unexpected keyword argument 'unitz'"):
        layers.LSTM(3, unitz=3)
    with pytest.raises(ValueError, match="GRU: Received an invalid value for argument `units`"):
        layers.GRU(-1)
    with pytest.raises(ValueError, match="MultiHeadAttention: .*missing a required argument"):
        layers.MultiHeadAttention(num_heads=2)


def _attention_weights_to_keras(ours, query, value):
    twin = keras.layers.MultiHeadAttention(num_heads=2, key_dim=3)
    twin(query, value)
    twin.set_weights([w.numpy() for w in ours.keras_layer.weights])
    return twin


def test_attention_in_a_graph_model_and_a_functional_model():
    query = _RNG.normal(size=(3, 4, 5)).astype("float32")
    value = _RNG.normal(size=(3, 6, 5)).astype("float32")
    graph = GraphModel(
        inputs={"q": (4, 5), "v": (6, 5)},
        nodes=[Node(layers.MultiHeadAttention(2, 3, name="cross"), ["q", "v"]),
               Node(layers.MultiHeadAttention(2, 3, name="self"), "cross"),
               Node(layers.GlobalAveragePooling1D(name="pool"), "self")],
        outputs="pool")
    out = graph({"q": query, "v": value})
    cross = _attention_weights_to_keras(graph.get_layer("cross"), query, value)
    self_twin = _attention_weights_to_keras(graph.get_layer("self"), query, query)
    hidden = cross(query, value)
    np.testing.assert_allclose(out, tf.reduce_mean(self_twin(hidden, hidden), axis=1),
                               atol=1e-5)

    tokens = Input((4, 5), name="tokens")
    attended = layers.MultiHeadAttention(2, 3, name="attention")(tokens)
    functional = gf.Model(tokens, layers.Dense(1)(layers.GlobalMaxPooling1D()(attended)))
    functional.compile(optimizer=optimizers.Adam(0.01), loss="mse")
    history = functional.fit(query, np.ones((3, 1), "float32"), epochs=3, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    gradients = autodiff.per_example_gradients(functional, query, np.ones((3, 1), "float32"),
                                               loss="mse")
    assert [g.shape[0] for g in gradients] == [3] * len(functional.trainable_variables)


_RECIPE = """seed: 0
data: {source: sine_sequences, n_samples: 32, steps: 3}
model:
  layers:
    - {type: LSTM, units: 3, return_sequences: true}
    - {type: GRU, units: 2}
    - {type: Dense, units: 1}
loss: mse
optimizer: {type: LevenbergMarquardt}
training: {epochs: 1, batch_size: 16}
"""


def test_recipe_with_lstm_and_gru_validates_and_trains_from_the_cli(tmp_path, capsys):
    recipe = tmp_path / "rnn.yaml"
    recipe.write_text(_RECIPE)
    assert cli.main(["validate", str(recipe)]) == 0
    assert cli.main(["train", str(recipe), "--run-dir", str(tmp_path / "run"),
                     "--verbose", "0"]) == 0
    bad = tmp_path / "bad.yaml"
    bad.write_text(_RECIPE.replace("units: 3,", "unitz: 3,"))
    assert cli.main(["validate", str(bad)]) != 0
    assert "model.layers[0].unitz: LSTM has no argument 'unitz'" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_return_state_is_refused_when_the_layer_is_made(kind):
    with pytest.raises(ValueError, match=rf"{kind}\(return_state=True\) is not supported: .*"
                                         r"return_sequences=True"):
        getattr(layers, kind)(4, return_state=True)
