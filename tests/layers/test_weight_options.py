"""Every built-in layer with weights takes Keras's regularizer and constraint arguments, under
Keras's names: the penalties equal the Keras layer's `losses` on the same weights, the
constraints sit on the weights, and `get_config` round-trips them."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from graphfit import layers

L2, L1 = keras.regularizers.L2(0.1), keras.regularizers.L1(0.05)

CASES = {
    "Dense": (dict(units=3), (4, 5), dict(kernel_regularizer=L2, bias_regularizer=L1,
                                          kernel_constraint="non_neg",
                                          bias_constraint="max_norm")),
    "Conv2D": (dict(filters=2, kernel_size=3), (2, 5, 5, 3),
               dict(kernel_regularizer=L2, bias_regularizer=L1, kernel_constraint="unit_norm",
                    bias_constraint="non_neg")),
    "Conv1DTranspose": (dict(filters=2, kernel_size=3, strides=2), (2, 5, 3),
                        dict(kernel_regularizer=L2, bias_regularizer=L1,
                             kernel_constraint="non_neg", bias_constraint="max_norm")),
    "DepthwiseConv2D": (dict(kernel_size=2), (2, 4, 4, 3),
                        dict(depthwise_regularizer=L2, bias_regularizer=L1,
                             depthwise_constraint="non_neg", bias_constraint="unit_norm")),
    "SeparableConv1D": (dict(filters=2, kernel_size=2), (2, 5, 3),
                        dict(depthwise_regularizer=L2, pointwise_regularizer=L1,
                             bias_regularizer=L1, depthwise_constraint="unit_norm",
                             pointwise_constraint="non_neg", bias_constraint="max_norm")),
    "Embedding": (dict(input_dim=7, output_dim=3), None,
                  dict(embeddings_regularizer=L2, embeddings_constraint="max_norm")),
    "BatchNormalization": ((), (4, 3), dict(beta_regularizer=L1, gamma_regularizer=L2,
                                            beta_constraint="non_neg",
                                            gamma_constraint="unit_norm")),
    "LayerNormalization": ((), (4, 3), dict(beta_regularizer=L1, gamma_regularizer=L2,
                                            beta_constraint="non_neg",
                                            gamma_constraint="unit_norm")),
}


def _inputs(name, shape):
    if name == "Embedding":
        return np.array([[1, 2, 6], [0, 3, 3]])
    return np.random.default_rng(0).normal(size=shape).astype("float32")


@pytest.mark.parametrize("name", sorted(CASES))
def test_penalties_and_constraints_as_keras(name):
    arguments, shape, options = CASES[name]
    arguments = dict(arguments)
    options = {**options, "activity_regularizer": keras.regularizers.L2(0.01)}
    reference = getattr(keras.layers, name)(**arguments, **options)
    ours = getattr(layers, name)(**arguments, **options)
    x = _inputs(name, shape)
    reference(x)
    ours(x)
    for variable, value in zip(ours.weights, reference.get_weights()):
        variable.assign(value)
    reference(x)
    ours(x)
    assert len(ours.losses) == len(reference.losses)
    np.testing.assert_allclose(float(tf.add_n(ours.losses)),
                               float(keras.ops.sum(reference.losses)), rtol=1e-5)
    for ours_weight, keras_weight in zip(ours.weights, reference.weights):
        assert type(getattr(ours_weight, "constraint", None)) is type(keras_weight.constraint)
        assert type(ours_weight.regularizer) is type(keras_weight.regularizer)
    config = ours.get_config()
    again = type(ours).from_config(config)
    assert again.get_config() == config
    for option in options:
        assert config[option] is not None
        assert type(getattr(again, option)) is type(getattr(reference, option))


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_bad_option_names_the_argument(name):
    arguments, _, options = CASES[name]
    option = sorted(options)[0]
    with pytest.raises(ValueError, match=f"Received: {option}='typo'"):
        getattr(layers, name)(**dict(arguments), **{option: "typo"})


def test_a_wrapped_keras_layer_brings_its_penalties_and_added_losses():
    import graphfit as gf

    inner = keras.layers.Dense(2, kernel_regularizer=keras.regularizers.L2(0.1),
                               activity_regularizer=keras.regularizers.L2(0.01))
    wrapped = layers.KerasLayer(inner)
    x = np.ones((4, 3), "float32")
    wrapped(x)
    inner(x)  # called by Keras itself: its losses list the activity term too
    expected = float(keras.ops.sum(inner.losses))
    assert len(wrapped.losses) == 2
    assert float(tf.add_n(wrapped.losses)) == pytest.approx(expected, rel=1e-5)
    model = gf.Sequential([wrapped], input_shape=(3,))
    model.compile(optimizer=gf.optimizers.SGD(0.0), loss="mse")
    history = model.fit(x, np.zeros((4, 2)), epochs=1, verbose=0).history
    penalty = 0.1 * float(np.sum(np.square(inner.kernel.numpy())))
    assert history["regularization_loss"][0] == pytest.approx(penalty, rel=1e-5)
    assert history["added_loss"][0] > 0  # the activity regularizer, through Keras's add_loss
