"""The code of the keras-io guide "The Functional API" (guides/functional_api.py), with `keras`
imports changed to graphfit's, run on tiny data and compared with Keras on the same initial
weights (both built, graphfit's weights copied into Keras layer by layer, predictions and one
epoch's losses compared).

Changes to the guide's code, each because graphfit lacks the piece (docs/guides/keras_parity.md):
- layers graphfit does not have (LSTM, UpSampling2D,
  GlobalMaxPooling2D, GlobalAveragePooling1D, Average) are Keras's, wrapped in
  `layers.KerasLayer`; `layers.add` / `layers.concatenate` are the `Add` / `Concatenate` layers;
- RMSprop (not in graphfit) is Adam in both; `validation_split=0.2` is `validation_data` with
  the last 20% (Keras's split); MNIST and CIFAR-10 are random arrays of their shapes, smaller;
- `plot_model`, `model.save` / `load_model` and `tf.keras.applications.VGG19` are left out
  (another part of issue 41 adds save and load; the feature extraction runs on the toy ResNet);
- several outputs come from `predict` (a call returns a dict by output name).
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

import graphfit as gf
from graphfit import layers

RNG = np.random.default_rng(0)


def _copy(model, twin) -> None:
    """graphfit's weights into the Keras twin, layer by layer (the same order of layers)."""
    assert [type(l).__name__ for l in twin.layers if type(l).__name__ != "InputLayer"] == [
        type(getattr(l, "keras_layer", l)).__name__
        for l in model.layers if not isinstance(l, gf.InputLayer)]
    for ours, theirs in zip(model.layers, twin.layers):
        if isinstance(ours, layers.KerasLayer):  # its variables include a seed state
            theirs.set_weights(ours.keras_layer.get_weights())
        else:
            theirs.set_weights([v.numpy() for v in ours.variables])


def _same_predictions(model, twin, x, rtol=1e-5, atol=1e-5) -> None:
    ours, theirs = model.predict(x, verbose=0), twin.predict(x, verbose=0)
    for a, b in zip(tf.nest.flatten(ours), tf.nest.flatten(theirs)):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def _keras_wrapped(name, *args, **kwargs):
    """A Keras layer graphfit lacks, wrapped (the twin uses the bare Keras layer)."""
    return layers.KerasLayer(getattr(keras.layers, name)(*args, **kwargs))


def mnist_model(lib, L):
    inputs = lib.Input(shape=(784,))
    dense = L.Dense(64, activation="relu")
    x = dense(inputs)
    x = L.Dense(64, activation="relu")(x)
    outputs = L.Dense(10)(x)
    return lib.Model(inputs=inputs, outputs=outputs, name="mnist_model")


def test_training_evaluation_and_inference_match_keras():
    model, twin = mnist_model(gf, layers), mnist_model(keras, keras.layers)
    assert model.input.shape == (None, 784) and model.input.dtype == tf.float32
    lines = []
    model.summary(print_fn=lines.append)
    assert model.count_params() == twin.count_params() == 55050
    assert any("55,050" in line for line in lines)
    _copy(model, twin)
    x_train = RNG.random((80, 784)).astype("float32")
    y_train = RNG.integers(0, 10, 80)
    split = 64  # validation_split=0.2: the last 20%, as Keras takes it
    histories = []
    for m, lib in ((model, gf), (twin, keras)):
        m.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  optimizer=lib.optimizers.Adam(), metrics=["accuracy"])
        histories.append(m.fit(x_train[:split], y_train[:split], batch_size=16, epochs=1,
                               shuffle=False, verbose=0,
                               validation_data=(x_train[split:], y_train[split:])).history)
    for key in ("loss", "accuracy", "val_loss", "val_accuracy"):
        np.testing.assert_allclose(histories[0][key], histories[1][key], rtol=1e-4)
    test_scores = model.evaluate(x_train[split:], y_train[split:], verbose=0)
    np.testing.assert_allclose(test_scores, twin.evaluate(x_train[split:], y_train[split:],
                                                          verbose=0), rtol=1e-4)


def encoder_and_autoencoder(lib, L, wrap):
    encoder_input = lib.Input(shape=(28, 28, 1), name="img")
    x = L.Conv2D(16, 3, activation="relu")(encoder_input)
    x = L.Conv2D(32, 3, activation="relu")(x)
    x = L.MaxPooling2D(3)(x)
    x = L.Conv2D(32, 3, activation="relu")(x)
    x = L.Conv2D(16, 3, activation="relu")(x)
    encoder_output = wrap("GlobalMaxPooling2D")(x)
    encoder = lib.Model(encoder_input, encoder_output, name="encoder")

    x = L.Reshape((4, 4, 1))(encoder_output)
    x = L.Conv2DTranspose(16, 3, activation="relu")(x)
    x = L.Conv2DTranspose(32, 3, activation="relu")(x)
    x = wrap("UpSampling2D", 3)(x)
    x = L.Conv2DTranspose(16, 3, activation="relu")(x)
    decoder_output = L.Conv2DTranspose(1, 3, activation="relu")(x)
    autoencoder = lib.Model(encoder_input, decoder_output, name="autoencoder")
    return encoder, autoencoder


def _bare(name, *args, **kwargs):
    return getattr(keras.layers, name)(*args, **kwargs)


def test_one_graph_of_layers_makes_several_models():
    encoder, autoencoder = encoder_and_autoencoder(gf, layers, _keras_wrapped)
    twin_encoder, twin_autoencoder = encoder_and_autoencoder(keras, keras.layers, _bare)
    lines = []
    autoencoder.summary(print_fn=lines.append)
    assert autoencoder.output_spec.shape.as_list() == [None, 28, 28, 1]
    assert autoencoder.count_params() == twin_autoencoder.count_params()
    assert all(layer in autoencoder.layers for layer in encoder.layers)  # shared, not copied
    _copy(autoencoder, twin_autoencoder)
    images = RNG.random((2, 28, 28, 1)).astype("float32")
    _same_predictions(encoder, twin_encoder, images)
    _same_predictions(autoencoder, twin_autoencoder, images)


def nested_autoencoder(lib, L, wrap):
    encoder_input = lib.Input(shape=(28, 28, 1), name="original_img")
    x = L.Conv2D(16, 3, activation="relu")(encoder_input)
    x = L.MaxPooling2D(3)(x)
    encoder_output = wrap("GlobalMaxPooling2D")(L.Conv2D(16, 3, activation="relu")(x))
    encoder = lib.Model(encoder_input, encoder_output, name="encoder")

    decoder_input = lib.Input(shape=(16,), name="encoded_img")
    x = L.Reshape((4, 4, 1))(decoder_input)
    x = L.Conv2DTranspose(16, 3, activation="relu")(x)
    x = wrap("UpSampling2D", 3)(x)
    decoder_output = L.Conv2DTranspose(1, 3, activation="relu")(x)
    decoder = lib.Model(decoder_input, decoder_output, name="decoder")

    autoencoder_input = lib.Input(shape=(28, 28, 1), name="img")
    encoded_img = encoder(autoencoder_input)
    decoded_img = decoder(encoded_img)
    return lib.Model(autoencoder_input, decoded_img, name="autoencoder")


def test_models_are_callable_like_layers_and_ensembles_average_them():
    model = nested_autoencoder(gf, layers, _keras_wrapped)
    twin = nested_autoencoder(keras, keras.layers, _bare)
    assert [l.name for l in model.layers] == ["img", "encoder", "decoder"]
    for ours, theirs in zip(model.layers[1:], twin.layers[1:]):
        _copy(ours, theirs)
    _same_predictions(model, twin, RNG.random((2, 28, 28, 1)).astype("float32"))

    def get_model(lib, L):
        inputs = lib.Input(shape=(128,))
        outputs = L.Dense(1)(inputs)
        return lib.Model(inputs, outputs)

    def ensemble(lib, L, average):
        members = [get_model(lib, L) for _ in range(3)]
        inputs = lib.Input(shape=(128,))
        outputs = average([member(inputs) for member in members])
        return lib.Model(inputs=inputs, outputs=outputs), members

    ours, our_members = ensemble(gf, layers, _keras_wrapped("Average"))
    theirs, their_members = ensemble(keras, keras.layers, keras.layers.average)
    for a, b in zip(our_members, their_members):
        _copy(a, b)
    _same_predictions(ours, theirs, RNG.random((4, 128)).astype("float32"))


def ticket_model(lib, L, wrap, num_tags=12, num_words=100, num_departments=4):
    title_input = lib.Input(shape=(None,), name="title")
    body_input = lib.Input(shape=(None,), name="body")
    tags_input = lib.Input(shape=(num_tags,), name="tags")
    # The guide's sizes shrunk (64-dimensional embeddings, LSTMs of 128 and 32 units): a test.
    title_features = L.Embedding(num_words, 8)(title_input)
    body_features = L.Embedding(num_words, 8)(body_input)
    title_features = wrap("LSTM", 8)(title_features)
    body_features = wrap("LSTM", 4)(body_features)
    x = L.Concatenate()([title_features, body_features, tags_input])
    priority_pred = L.Dense(1, name="priority")(x)
    department_pred = L.Dense(num_departments, name="department")(x)
    return lib.Model(inputs=[title_input, body_input, tags_input],
                     outputs=[priority_pred, department_pred])


def test_several_inputs_and_outputs_train_as_in_keras():
    model, twin = ticket_model(gf, layers, _keras_wrapped), ticket_model(
        keras, keras.layers, _bare)
    _copy(model, twin)
    losses = [keras.losses.BinaryCrossentropy(from_logits=True),
              keras.losses.CategoricalCrossentropy(from_logits=True)]
    # jit_compile=False: XLA compiling the LSTMs' loops on a CPU costs more than this runs.
    model.compile(optimizer=gf.optimizers.Adam(1e-3), loss=losses, loss_weights=[1.0, 0.2],
                  jit_compile=False)
    model.compile(optimizer=gf.optimizers.Adam(1e-3), loss_weights={"priority": 1.0,
                                                                     "department": 0.2},
                  loss={"priority": losses[0], "department": losses[1]}, jit_compile=False)
    twin.compile(optimizer=keras.optimizers.Adam(1e-3), loss=losses, loss_weights=[1.0, 0.2])
    title_data = RNG.integers(100, size=(16, 4))
    body_data = RNG.integers(100, size=(16, 6))
    tags_data = RNG.integers(2, size=(16, 12)).astype("float32")
    priority_targets = RNG.random(size=(16, 1)).astype("float32")
    dept_targets = RNG.integers(2, size=(16, 4)).astype("float32")
    x = {"title": title_data, "body": body_data, "tags": tags_data}
    _same_predictions(model, twin, [title_data, body_data, tags_data], atol=1e-5)
    ours = model.fit(x, {"priority": priority_targets, "department": dept_targets},
                     epochs=1, batch_size=8, shuffle=False, verbose=0)
    theirs = twin.fit(x, [priority_targets, dept_targets], epochs=1, batch_size=8,
                      shuffle=False, verbose=0)
    np.testing.assert_allclose(ours.history["loss"], theirs.history["loss"], rtol=1e-4)


def toy_resnet(lib, L, add):
    inputs = lib.Input(shape=(16, 16, 3), name="img")
    x = L.Conv2D(32, 3, activation="relu")(inputs)
    x = L.Conv2D(64, 3, activation="relu")(x)
    block_1_output = L.MaxPooling2D(3)(x)

    x = L.Conv2D(64, 3, activation="relu", padding="same")(block_1_output)
    x = L.Conv2D(64, 3, activation="relu", padding="same")(x)
    block_2_output = add([x, block_1_output])

    x = L.Conv2D(64, 3, activation="relu", padding="same")(block_2_output)
    x = L.Conv2D(64, 3, activation="relu", padding="same")(x)
    block_3_output = add([x, block_2_output])

    x = L.Conv2D(64, 3, activation="relu")(block_3_output)
    x = L.GlobalAveragePooling2D()(x)
    x = L.Dense(256, activation="relu")(x)
    x = L.Dropout(0.5)(x)
    outputs = L.Dense(10)(x)
    return lib.Model(inputs, outputs, name="toy_resnet")


def test_toy_resnet_and_feature_extraction():
    model = toy_resnet(gf, layers, lambda tensors: layers.Add()(tensors))
    twin = toy_resnet(keras, keras.layers, keras.layers.add)
    assert model.count_params() == twin.count_params()
    _copy(model, twin)
    images = RNG.random((8, 16, 16, 3)).astype("float32")
    _same_predictions(model, twin, images, atol=1e-4)
    model.compile(optimizer=gf.optimizers.Adam(1e-3), metrics=["acc"],
                  loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    labels = keras.utils.to_categorical(RNG.integers(0, 10, 8), 10)
    history = model.fit(images, labels, batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])  # Dropout draws differ from Keras's

    # Extract and reuse nodes: every layer's output, from the model's own graph.
    features = gf.Model(inputs=model.input, outputs=[l.output for l in model.layers])
    twin_features = keras.Model(inputs=twin.input, outputs=[l.output for l in twin.layers])
    _copy(model, twin)
    _same_predictions(features, twin_features, images[:1], atol=1e-4)


def test_shared_layers():
    shared_embedding = layers.Embedding(1000, 128)
    text_input_a = gf.Input(shape=(None,), dtype="int32")
    text_input_b = gf.Input(shape=(None,), dtype="int32")
    encoded_input_a = shared_embedding(text_input_a)
    encoded_input_b = shared_embedding(text_input_b)
    model = gf.Model([text_input_a, text_input_b], [encoded_input_a, encoded_input_b])
    assert model.count_params() == 128_000 and len(shared_embedding.inbound_nodes) == 2
    ids = RNG.integers(1000, size=(2, 5))
    a, b = model.predict([ids, ids[::-1]], verbose=0)
    np.testing.assert_allclose(a, shared_embedding.embeddings.numpy()[ids])
    np.testing.assert_allclose(b, a[::-1])


class CustomDense(gf.Layer):
    def __init__(self, units=32):
        super(CustomDense, self).__init__()
        self.units = units

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], self.units),
                                 initializer="random_normal", trainable=True)
        self.b = self.add_weight(shape=(self.units,), initializer="random_normal",
                                 trainable=True)

    def call(self, inputs):
        return tf.matmul(inputs, self.w) + self.b

    def get_config(self):
        return {"units": self.units}


def test_custom_layers_extend_the_api_and_serialize():
    inputs = gf.Input((4,))
    outputs = CustomDense(10)(inputs)
    model = gf.Model(inputs, outputs)
    config = model.get_config()
    new_model = gf.Model.from_config(config, custom_objects={"CustomDense": CustomDense})
    assert isinstance(new_model, gf.Functional) and new_model.count_params() == 50
    new_model.set_weights(model.get_weights())
    x = RNG.random((3, 4)).astype("float32")
    np.testing.assert_allclose(new_model(x), model(x))


def test_mix_and_match_api_styles():
    units, timesteps, input_dim, batch_size = 32, 10, 5, 16
    inputs = gf.Input((None, units))
    x = _keras_wrapped("GlobalAveragePooling1D")(inputs)
    outputs = layers.Dense(1)(x)
    model = gf.Model(inputs, outputs)

    class CustomRNN(gf.Layer):
        def __init__(self, classifier=None):
            super(CustomRNN, self).__init__()
            self.units = units
            self.projection_1 = layers.Dense(units=units, activation="tanh")
            self.projection_2 = layers.Dense(units=units, activation="tanh")
            self.classifier = classifier or layers.Dense(1)

        def call(self, inputs):
            outputs = []
            state = tf.zeros(shape=(inputs.shape[0], self.units))
            for t in range(inputs.shape[1]):
                x = inputs[:, t, :]
                h = self.projection_1(x)
                y = h + self.projection_2(state)
                state = y
                outputs.append(y)
            features = tf.stack(outputs, axis=1)
            return self.classifier(features)

    rnn_model = CustomRNN(model)  # our previously-defined functional model inside
    assert rnn_model(tf.zeros((1, timesteps, input_dim))).shape == (1, 1)

    inputs = gf.Input(batch_shape=(batch_size, timesteps, input_dim))
    x = layers.Conv1D(32, 3)(inputs)
    outputs = CustomRNN()(x)
    assert outputs.shape == (batch_size, timesteps - 2, 1)  # traced with the static batch
    model = gf.Model(inputs, outputs)
    assert model(tf.zeros((batch_size, timesteps, input_dim))).shape == (16, 8, 1)
