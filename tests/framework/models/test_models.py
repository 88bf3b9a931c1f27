"""Sequential, GraphModel and subclassed models: structure, configs, Keras twins, summary."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers


def _two_headed():
    return gf.GraphModel(
        inputs={"pixels": (64,), "hint": (1,)},
        nodes=[
            gf.Node(layers.Dense(32, activation="relu", name="trunk"), "pixels"),
            gf.Node(layers.Concatenate(name="joined"), ["trunk", "hint"]),
            gf.Node(layers.Dense(10, name="digit"), "joined"),
            gf.Node(layers.Dense(1, name="is_even"), "trunk"),
        ],
        outputs=["digit", "is_even"],
    )


def test_sequential_config_round_trip_rebuilds_the_same_function():
    model = gf.Sequential([layers.Dense(8, activation="tanh"), layers.Dropout(0.2),
                           layers.Dense(2)], dtype="float64", input_shape=(3,))
    config = model.get_config()
    assert [entry["type"] for entry in config["layers"]] == ["Dense", "Dropout", "Dense"]
    clone = gf.Sequential.from_config(config)
    clone.build((None, 3))
    clone.set_weights(model.get_weights())
    x = np.random.default_rng(0).normal(size=(4, 3))
    np.testing.assert_allclose(clone(x), model(x))
    assert clone.dtype == tf.float64


def test_weights_copied_from_a_keras_twin_give_the_same_predictions():
    twin = keras.Sequential([keras.Input((6,)), keras.layers.Dense(5, activation="relu"),
                             keras.layers.BatchNormalization(), keras.layers.Dense(2)])
    rng = np.random.default_rng(3)
    # gamma, beta, moving mean, moving variance: all away from their initial values.
    twin.layers[1].set_weights([rng.normal(size=5), rng.normal(size=5), rng.normal(size=5),
                                rng.uniform(0.5, 2.0, size=5)])
    ours = gf.Sequential([layers.Dense(5, activation="relu"), layers.BatchNormalization(),
                          layers.Dense(2)], input_shape=(6,))
    ours.set_weights(twin.get_weights())
    x = rng.normal(size=(7, 6)).astype("float32")
    np.testing.assert_allclose(ours.predict(x, verbose=0), twin.predict(x, verbose=0), atol=1e-5)


def test_set_weights_reports_count_and_shape_mismatches():
    model = gf.Sequential([layers.Dense(2)], input_shape=(3,))
    with pytest.raises(ValueError, match="has 2 weights but 1 arrays"):
        model.set_weights([np.zeros((3, 2))])
    with pytest.raises(ValueError, match="shape \\(3, 2\\).*shape \\(2, 2\\)"):
        model.set_weights([np.zeros((2, 2)), np.zeros(2)])


def test_graph_model_with_two_inputs_and_two_outputs_trains_with_losses_by_name():
    x, y = gf.datasets.load_digits()
    hint = (y % 3).astype("float32")[:, None]
    model = _two_headed()
    assert [l.name for l in model.layers] == ["trunk", "joined", "digit", "is_even"]
    model.compile(
        optimizer=optimizers.Adam(0.01),
        loss={"digit": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              "is_even": keras.losses.BinaryCrossentropy(from_logits=True)},
        loss_weights={"digit": 1.0, "is_even": 0.5},
        metrics={"digit": ["accuracy"], "is_even": ["accuracy"]},
    )
    targets = {"digit": y, "is_even": (y % 2 == 0).astype("float32")}
    history = model.fit({"pixels": x, "hint": hint}, targets, epochs=3, verbose=0)
    logs = {k: v[-1] for k, v in history.history.items()}
    assert set(logs) == {"loss", "digit_loss", "is_even_loss", "digit_accuracy",
                         "is_even_accuracy"}
    assert logs["loss"] == pytest.approx(logs["digit_loss"] + 0.5 * logs["is_even_loss"], rel=1e-4)
    assert logs["digit_accuracy"] > 0.8 and logs["is_even_accuracy"] > 0.8
    predictions = model.predict([x[:4], hint[:4]], verbose=0)
    assert predictions["digit"].shape == (4, 10) and predictions["is_even"].shape == (4, 1)


def test_graph_model_config_round_trip():
    model = _two_headed()
    clone = gf.GraphModel.from_config(model.get_config())
    clone.set_weights(model.get_weights())
    inputs = {"pixels": np.ones((2, 64), "float32"), "hint": np.ones((2, 1), "float32")}
    for name in ("digit", "is_even"):
        np.testing.assert_allclose(clone(inputs)[name], model(inputs)[name], rtol=1e-6)


def test_graph_model_reports_every_wiring_problem_at_once():
    with pytest.raises(ValueError) as error:
        gf.GraphModel(
            inputs=["pixels"],
            nodes=[gf.Node(layers.Dense(4, name="hidden"), "pixles"),
                   gf.Node(layers.Dense(2, name="out"), "hiden")],
            outputs=["out", "missing"],
        )
    message = str(error.value)
    assert "reads 'pixles'" in message and "did you mean 'pixels'" in message
    assert "reads 'hiden'" in message and "did you mean 'hidden'" in message
    assert "output 'missing'" in message


def test_graph_model_refuses_cycles_and_dead_nodes():
    with pytest.raises(ValueError, match="cycle"):
        gf.GraphModel(inputs=["x"],
                      nodes=[gf.Node(layers.Add(name="a"), ["x", "b"]),
                             gf.Node(layers.Add(name="b"), ["x", "a"])],
                      outputs=["b"])
    with pytest.raises(ValueError, match="feed no other node"):
        gf.GraphModel(inputs=["x"],
                      nodes=[gf.Node(layers.Dense(1, name="used"), "x"),
                             gf.Node(layers.Dense(1, name="dead"), "x")],
                      outputs=["used"])


def test_subclassed_model_trains_and_lists_its_layers():
    class TwoLayer(gf.Model):
        def __init__(self):
            super().__init__(name="two_layer")
            self.hidden = layers.Dense(8, activation="relu")
            self.out = layers.Dense(1)

        def call(self, x, training=False):
            return self.out(self.hidden(x))

    model = TwoLayer()
    model.compile(optimizer=optimizers.Adam(0.05), loss="mse")
    x = np.linspace(-1, 1, 64)[:, None].astype("float32")
    history = model.fit(x, x**2, epochs=30, batch_size=16, verbose=0)
    assert history.history["loss"][-1] < 0.5 * history.history["loss"][0]
    assert model.layers == [model.hidden, model.out]
    assert model.get_layer(model.out.name) is model.out
    with pytest.raises(ValueError, match="has no layer named 'nope'"):
        model.get_layer("nope")


def test_summary_lists_layers_shapes_counts_and_hooks():
    model = gf.Sequential([layers.Dense(4, name="hidden"), layers.BatchNormalization(name="bn"),
                           layers.Dense(2, name="out")], name="tiny", input_shape=(3,))
    model.layers[2].trainable = False
    lines = []
    model.summary(print_fn=lines.append)
    text = "\n".join(lines)
    assert 'Model: "tiny"' in text
    assert "hidden (Dense)" in text and "(None, 4)" in text and "16" in text
    assert "out (Dense) [frozen]" in text
    assert "Trainable params: 24" in text and "Non-trainable params: 18" in text
    assert "bn.moving_mean" in text and "bn.moving_variance" in text
    with pytest.raises(ValueError, match="not built"):
        gf.Sequential([layers.Dense(1)]).summary()


def test_save_and_load_weights_round_trip_and_refuse_mismatches(tmp_path):
    model = gf.Sequential([layers.Dense(4), layers.BatchNormalization()], input_shape=(3,))
    model.layers[1].moving_mean.assign([1.0, 2.0, 3.0, 4.0])
    path = model.save_weights(str(tmp_path / "weights" / "model"))
    assert (tmp_path / "weights" / "model.index").exists()

    twin = gf.Sequential([layers.Dense(4), layers.BatchNormalization()], input_shape=(3,))
    twin.load_weights(path)
    for a, b in zip(twin.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)

    other = gf.Sequential([layers.Dense(5), layers.BatchNormalization()], input_shape=(3,))
    before = other.get_weights()
    with pytest.raises(ValueError, match="does not match"):
        other.load_weights(path)
    for a, b in zip(before, other.get_weights()):
        np.testing.assert_array_equal(a, b)  # a failed load leaves the model as it was
    with pytest.raises(FileNotFoundError, match="No checkpoint at"):
        model.load_weights(str(tmp_path / "nothing"))
    with pytest.raises(ValueError, match="TensorFlow checkpoints"):
        model.save_weights(str(tmp_path / "model.weights.h5"))


def test_predict_without_compile_and_the_datasets_shipped():
    x, y = gf.datasets.load_digits(as_images=True)
    assert x.shape == (1797, 8, 8, 1) and x.dtype == np.float32 and 0 <= x.min() < x.max() <= 1
    assert sorted(np.unique(y)) == list(range(10))
    bx, by = gf.datasets.load_breast_cancer()
    assert bx.shape == (569, 30) and set(np.unique(by)) == {0, 1} and by.sum() == 357
    model = gf.Sequential([layers.Conv2D(4, 3), layers.GlobalAveragePooling2D(), layers.Dense(10)])
    assert model.predict(x[:9], verbose=0).shape == (9, 10)


def _multi_output(compile_loss):
    model = gf.GraphModel(
        inputs={"x": (4,)},
        nodes=[gf.Node(layers.Dense(8, activation="relu", name="trunk"), "x"),
               gf.Node(layers.Dense(3, name="cls"), "trunk"),
               gf.Node(layers.Dense(1, name="reg"), "trunk")],
        outputs=["cls", "reg"],
    )
    model.compile(optimizer="adam", loss=compile_loss,
                  metrics={"cls": ["accuracy"], "reg": ["mae"]})
    return model


def test_multi_output_labels_as_a_list_or_a_dataset_tuple_are_matched_by_position():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 4)).astype("float32")
    y_cls, y_reg = rng.integers(0, 3, 32), rng.normal(size=(32, 1)).astype("float32")
    losses = [keras.losses.SparseCategoricalCrossentropy(from_logits=True), "mse"]
    by_list = _multi_output(losses)
    initial = by_list.get_weights()
    by_list.fit(x, [y_cls, y_reg], batch_size=8, shuffle=False, verbose=0)
    by_dataset = _multi_output(losses)
    by_dataset.set_weights(initial)
    dataset = tf.data.Dataset.from_tensor_slices((x, (y_cls, y_reg))).batch(8)
    history = by_dataset.fit(dataset, verbose=0)
    for a, b in zip(by_list.get_weights(), by_dataset.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)
    assert set(history.history) == {"loss", "cls_loss", "reg_loss", "cls_accuracy", "reg_mae"}


def test_outputs_without_a_loss_need_no_labels():
    x = np.ones((16, 4), "float32")
    model = _multi_output({"reg": "mse"})
    model.compile(optimizer="adam", loss={"reg": "mse"}, metrics={"reg": ["mae"]})
    with pytest.warns(UserWarning, match="Gradients do not exist for variables.*cls/kernel"):
        history = model.fit(x, {"reg": np.zeros((16, 1), "float32")}, verbose=0)
    assert set(history.history) == {"loss", "reg_loss", "reg_mae"}
    with pytest.raises(ValueError, match="lacks labels for outputs \\['reg'\\]"):
        model.fit(x, {"cls": np.zeros(16)}, verbose=0)


def test_configs_are_plain_data_that_yaml_can_write():
    import yaml

    config = _two_headed().get_config()
    assert yaml.safe_load(yaml.safe_dump(config)) == config
