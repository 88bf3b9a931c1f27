"""Keras-backed layers (LSTM, GRU, MultiHeadAttention) and Rescaling against Keras 3:
Levenberg–Marquardt through MultiHeadAttention with the default Jacobian mode, weights
without Keras's seed state (as Keras's `weights`), dropout rates deciding randomness, and
a per-channel Rescaling of the wrong length refused at build."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

import graphfit as gf
from graphfit import cli, layers, optimizers
from graphfit.optimizers.levenberg_marquardt import jacobian as lm_jacobian
from graphfit.optimizers.levenberg_marquardt.forward_values import unvectorizable_layers

_RNG = np.random.default_rng(0)

# Run in a child process: before the fix TensorFlow's vectorizer crashed the process
# (heap corruption, exit 134/139) on MultiHeadAttention's gradients, which would take
# pytest down with it instead of failing one test.
_LM_THROUGH_ATTENTION = textwrap.dedent("""
    import json, numpy as np, graphfit as gf
    from graphfit import layers
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 12, 1)).astype("float32")
    y = rng.normal(size=(32, 1)).astype("float32")
    gf.set_seed(0)
    m = gf.Sequential([gf.Input((12, 1)), layers.MultiHeadAttention(num_heads=2, key_dim=3),
                       layers.GlobalAveragePooling1D(), layers.Dense(1)])
    m.compile(optimizer=gf.optimizers.LevenbergMarquardt(), loss="mse", jit_compile=False)
    history = m.fit(x, y, batch_size=None, epochs=5, verbose=0)
    print("LOSSES", json.dumps(history.history["loss"]))
""")


def test_levenberg_marquardt_trains_through_multi_head_attention_by_default():
    run = subprocess.run([sys.executable, "-c", _LM_THROUGH_ATTENTION], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
    losses = json.loads(run.stdout.split("LOSSES", 1)[1])
    assert losses[-1] < 0.9 * losses[0] and losses == sorted(losses, reverse=True), losses
    # dropout=0: deterministic, so no "random in training" warning
    assert "random in training" not in run.stderr


def test_attention_declares_it_does_not_vectorize_per_example():
    attention = layers.MultiHeadAttention(num_heads=2, key_dim=3, name="att")
    assert not attention.vectorizes_per_example
    assert layers.KerasLayer(keras.layers.EinsumDense("ab,bc->ac", 3)).vectorizes_per_example \
        is False
    unrolled = layers.LSTM(3)  # graphfit's unroll=None: unrolled at build for short inputs
    gf.Sequential([gf.Input((4, 2)), unrolled])
    assert unrolled.vectorizes_per_example and layers.Dense(2).vectorizes_per_example
    model = gf.Sequential([gf.Input((4, 2)), attention, layers.GlobalAveragePooling1D(),
                           layers.Dense(1)])
    blockers = unvectorizable_layers(model)
    assert blockers == ["'att' (MultiHeadAttention)"]
    assert lm_jacobian.choose_mode("auto", 100, 1, True, blockers) == "reverse"
    assert lm_jacobian.choose_mode("auto", 100, 1, True, ()) == "per_example"
    assert lm_jacobian.choose_mode("auto", 1, 4, True, blockers) == "forward"
    with pytest.raises(ValueError, match="jacobian_mode='per_example'.*'att'"):
        lm_jacobian.choose_mode("per_example", 100, 1, True, blockers)


def test_levenberg_marquardt_trains_through_a_looped_lstm_by_default():
    looped = layers.LSTM(3, unroll=False)
    model = gf.Sequential([gf.Input((5, 2)), looped, layers.Dense(1)])
    assert not looped.vectorizes_per_example  # Keras's tf.while_loop
    assert layers.KerasLayer(keras.layers.GRU(2, unroll=True)).vectorizes_per_example
    x = _RNG.normal(size=(16, 5, 2)).astype("float32")
    y = _RNG.normal(size=(16, 1)).astype("float32")
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse", jit_compile=False)
    losses = model.fit(x, y, batch_size=None, epochs=3, verbose=0).history["loss"]
    assert losses[-1] < losses[0], losses  # raised pfor's "Shape must be at least rank 1" before


def _pair(make_keras, make_ours, shape):
    inputs = keras.Input(shape)
    layer = make_keras()
    hidden = layer(inputs, inputs) if isinstance(layer, keras.layers.MultiHeadAttention) \
        else layer(inputs)
    km = keras.Model(inputs, keras.layers.Dense(1)(keras.layers.Flatten()(hidden)))
    gm = gf.Sequential([gf.Input(shape), make_ours(), layers.Flatten(), layers.Dense(1)])
    return km, gm


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "MultiHeadAttention"])
def test_weights_are_kerass_weights_and_copy_from_a_keras_twin(kind):
    arguments = {"LSTM": ((5,), {"dropout": 0.1}), "GRU": ((5,), {}),
                 "MultiHeadAttention": ((), {"num_heads": 2, "key_dim": 3, "dropout": 0.1})}
    args, kwargs = arguments[kind]
    km, gm = _pair(lambda: getattr(keras.layers, kind)(*args, **kwargs),
                   lambda: getattr(layers, kind)(*args, **kwargs), (7, 3))
    gm.set_weights(km.get_weights())  # raised "has N weights but N-1 arrays" before
    x = _RNG.normal(size=(4, 7, 3)).astype("float32")
    np.testing.assert_allclose(gm.predict(x, verbose=0), km.predict(x, verbose=0),
                               atol=1e-5, rtol=1e-5)
    ours, theirs = gm.layers[0], km.layers[1]
    assert len(ours.weights) == len(theirs.weights)
    assert len(ours.non_trainable_weights) == len(theirs.non_trainable_weights) == 0
    assert ours.count_params() == theirs.count_params()
    assert gm.count_params() == km.count_params()
    # the seed state stays a variable (checkpoints keep it), as in Keras's `variables`
    assert len(ours.variables) == len(theirs.variables) == len(theirs.weights) + 1
    lines = []
    gm.summary(print_fn=lines.append)
    assert "Non-trainable params: 0" in lines


def test_save_weights_round_trip_after_copying_from_keras(tmp_path):
    km, gm = _pair(lambda: keras.layers.LSTM(4, dropout=0.2),
                   lambda: layers.LSTM(4, dropout=0.2), (7, 3))
    gm.set_weights(km.get_weights())
    gm.save_weights(str(tmp_path / "w"))
    gm.set_weights([np.zeros_like(w) for w in gm.get_weights()])
    gm.load_weights(str(tmp_path / "w"))
    for ours, theirs in zip(gm.get_weights(), km.get_weights()):
        np.testing.assert_array_equal(ours, theirs)


def test_dropout_rates_decide_randomness_as_keras_draws():
    assert not layers.MultiHeadAttention(num_heads=2, key_dim=3).stochastic_in_training
    assert layers.MultiHeadAttention(num_heads=2, key_dim=3, dropout=0.1).stochastic_in_training
    assert not layers.LSTM(3).stochastic_in_training
    assert layers.LSTM(3, dropout=0.2).stochastic_in_training
    assert layers.GRU(3, recurrent_dropout=0.2).stochastic_in_training
    assert not layers.KerasLayer(keras.layers.Dropout(0.0)).stochastic_in_training
    assert layers.KerasLayer(keras.layers.Dropout(0.5)).stochastic_in_training
    assert not layers.KerasLayer(keras.layers.GaussianNoise(0.0)).stochastic_in_training
    assert layers.KerasLayer(keras.layers.GaussianNoise(0.1)).stochastic_in_training
    # Keras's own layers agree: at rate 0 training and inference give the same numbers
    x = _RNG.normal(size=(2, 4, 3)).astype("float32")
    mha = keras.layers.MultiHeadAttention(2, 3, dropout=0.0)
    np.testing.assert_array_equal(mha(x, x, training=True), mha(x, x, training=False))


def test_levenberg_marquardt_warns_only_about_attention_with_dropout():
    x = _RNG.normal(size=(8, 4, 2)).astype("float32")
    y = _RNG.normal(size=(8, 1)).astype("float32")
    model = gf.Sequential([gf.Input((4, 2)),
                           layers.MultiHeadAttention(num_heads=1, key_dim=2, dropout=0.5),
                           layers.GlobalAveragePooling1D(), layers.Dense(1)])
    # reverse mode: this test is about the warning, the default mode has its own test above
    model.compile(optimizer=optimizers.LevenbergMarquardt(jacobian_mode="reverse"),
                  loss="mse", jit_compile=False)
    with pytest.warns(UserWarning, match="random in training"):
        model.fit(x, y, batch_size=None, epochs=1, verbose=0)


def test_rescaling_with_a_wrong_per_channel_length_names_the_layer():
    with pytest.raises(ValueError, match=r"'rgb'.*scale has 2 values.*have 3 channels"):
        gf.Sequential([gf.Input((4, 4, 3)), layers.Rescaling([0.5, 2.0], name="rgb")])
    with pytest.raises(ValueError, match=r"offset has 4 values.*have 3 channels"):
        layers.Rescaling(1.0, offset=[0.0, 1.0, 2.0, 3.0]).build((None, 3))
    # what broadcasts in Keras builds here too, with Keras's numbers
    x = _RNG.normal(size=(2, 4, 3)).astype("float32")
    for scale in ([0.5, 2.0, 3.0], [2.0], 0.5):
        ours = layers.Rescaling(scale, offset=1.0)(x).numpy()
        np.testing.assert_allclose(ours, keras.layers.Rescaling(scale, 1.0)(x), rtol=1e-6)


_RECIPE = """seed: 0
data: {source: sine_sequences, n_samples: 16, steps: 6}
model:
  layers:
    - {type: Rescaling, scale: [0.5, 2.0]}
    - {type: LSTM, units: 4}
    - {type: Dense, units: 1}
loss: mse
optimizer: {type: Adam}
training: {epochs: 1, batch_size: 8}
"""


def test_validate_reports_a_rescaling_of_the_wrong_length(tmp_path, capsys):
    recipe = tmp_path / "bad.yaml"
    recipe.write_text(_RECIPE)
    assert cli.main(["validate", str(recipe)]) != 0
    assert "scale has 2 values" in capsys.readouterr().err
