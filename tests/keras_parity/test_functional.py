"""Keras 3's functional-model tests (keras/src/models/functional_test.py), ported: each case
is built through `keras` and through graphfit, the weights copied layer by layer, and the
outputs compared. Where graphfit differs by design the test says so (and
docs/guides/keras_parity.md, "Functional API and build", lists it with the reason):

- Python's operators and indexing on symbolic tensors record a `TensorOperation` layer each
  (Keras records an operation); TensorFlow and `keras.ops` functions on them are refused. Some
  cases still use `layers.Add()([a, b])` where Keras's use `a + b`;
- with several outputs, `model(x)` returns a dict by output name (graphfit matches losses and
  labels by name); `predict` returns the outputs in the form the model was given them;
- a layer returning several tensors, and a model with several outputs, cannot be called on
  symbolic tensors (it is refused with a message).
"""

from __future__ import annotations

import keras
import numpy as np
import pytest

import graphfit as gf
from graphfit import layers
from graphfit.core.symbolic import SymbolicTensor


def _fast(model) -> dict:
    """compile's execution settings for a comparison: Keras's reference runs eagerly (a few
    small batches: faster than tracing them; the same numbers), graphfit without XLA (Keras's
    own default on a CPU; each XLA compile costs about a second). These tests are about the
    functional API; graphfit's default XLA path has its own tests
    (tests/framework/training/test_fused_loops.py)."""
    return {"run_eagerly": True} if isinstance(model, keras.Model) else {"jit_compile": False}


def _copy_weights(model, twin) -> None:
    """Gives the Keras twin graphfit's weights, layer by layer (both list inputs first)."""
    assert len(model.layers) == len(twin.layers)
    for ours, theirs in zip(model.layers, twin.layers):
        theirs.set_weights([v.numpy() for v in ours.variables])


def _random(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def test_basic_flow_multi_input():
    def build(lib, Model):
        a = lib.Input(shape=(3,), batch_size=2, name="input_a")
        b = lib.Input(shape=(3,), batch_size=2, name="input_b")
        x = lib_layers(lib).Add()([a, b])
        x = lib_layers(lib).Dense(5)(x)
        return Model([a, b], lib_layers(lib).Dense(4)(x), name="basic")

    model, twin = build(gf, gf.Model), build(keras, keras.Model)
    assert model.name == "basic" and isinstance(model, gf.Functional)
    assert isinstance(model, gf.Model)
    _copy_weights(model, twin)
    data = [_random(2, 3), _random(2, 3, seed=1)]
    np.testing.assert_allclose(model(data), twin(data), rtol=1e-6, atol=1e-6)
    # Symbolic call: the model is a layer of another model.
    out = model([gf.Input(shape=(3,), batch_size=2), gf.Input(shape=(3,), batch_size=2)])
    assert isinstance(out, SymbolicTensor) and out.shape == (2, 4)


def lib_layers(lib):
    return keras.layers if lib is keras else layers


def test_basic_flow_multi_output_differs_in_calls_and_matches_in_predict():
    def build(lib, Model):
        inputs = lib.Input(shape=(3,), name="input")
        x = lib_layers(lib).Dense(5)(inputs)
        return Model(inputs, [lib_layers(lib).Dense(4, name="a")(x),
                              lib_layers(lib).Dense(5, name="b")(x)])

    model, twin = build(gf, gf.Model), build(keras, keras.Model)
    _copy_weights(model, twin)
    x = _random(2, 3)
    ours, theirs = model.predict(x, verbose=0), twin.predict(x, verbose=0)
    assert isinstance(ours, list) and len(ours) == 2  # as Keras's
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    called = model(x)  # differs: a dict by output name (Keras: a list)
    assert sorted(called) == ["a", "b"] and called["b"].shape == (2, 5)
    with pytest.raises(ValueError, match="one output tensor"):  # differs: refused
        model(gf.Input(shape=(3,)))


def test_basic_flow_dict_io_refuses_what_is_not_symbolic():
    a, b = gf.Input(shape=(3,), name="a"), gf.Input(shape=(3,), name="b")
    outputs = layers.Dense(4)(layers.Dense(5)(layers.Add()([a, b])))
    with pytest.raises(ValueError, match="must be symbolic tensors"):
        gf.Model({"a": "input_a", "b": b}, outputs)
    with pytest.raises(ValueError, match="must be symbolic tensors"):
        gf.Model({"a": a, "b": b}, "outputs")
    model = gf.Model({"a": a, "b": b}, outputs)
    assert model({"a": _random(2, 3), "b": _random(2, 3)}).shape == (2, 4)
    assert model({"a": gf.Input((3,)), "b": gf.Input((3,))}).shape == (None, 4)


def test_named_input_dict_io():
    a, b = gf.Input(shape=(3,), name="a"), gf.Input(shape=(4,), name="b")
    joined = layers.Concatenate()([layers.Dense(5)(a), layers.Dense(5)(b)])
    outputs = layers.Dense(4)(joined)
    by_name = {"a": _random(2, 3), "b": _random(2, 4)}
    listed = gf.Model([a, b], outputs)
    assert listed(by_name).shape == (2, 4)  # a list model reads a dict by input names
    np.testing.assert_allclose(listed(by_name), listed([by_name["a"], by_name["b"]]))
    renamed = gf.Model({"c": a, "d": b}, outputs)  # the dict's keys name the inputs
    np.testing.assert_allclose(renamed({"c": by_name["a"], "d": by_name["b"]}),
                               listed(by_name))
    with pytest.raises(ValueError, match="missing c, d"):
        renamed(by_name)


@pytest.mark.parametrize("kind", [list, tuple, dict])
def test_restored_multi_output_type(kind):
    inputs = gf.Input(shape=(3,), name="input")
    x = layers.Dense(5)(inputs)
    out_a, out_b = layers.Dense(4)(x), layers.Dense(5)(x)
    outputs = {"a": out_a, "b": out_b} if kind is dict else kind([out_a, out_b])
    model = gf.Model(inputs, outputs)
    assert isinstance(model.predict(_random(2, 3), verbose=0), kind)
    restored = gf.Functional.from_config(model.get_config())
    assert restored.get_config() == model.get_config()
    restored.set_weights(model.get_weights())
    prediction = restored.predict(_random(2, 3), verbose=0)
    # differs: a config is JSON, so a tuple of outputs comes back as a list (Keras: tuple)
    assert isinstance(prediction, list if kind is tuple else kind)
    expected = model.predict(_random(2, 3), verbose=0)
    for a, b in zip(*(p.values() if kind is dict else p for p in (prediction, expected))):
        np.testing.assert_allclose(a, b)


def test_functional_input_shape_and_type():
    inputs = gf.Input((1024, 4))
    model = gf.Model(inputs, layers.Dense(32)(inputs))
    assert isinstance(model.input, SymbolicTensor)
    assert model.input_shape == (None, 1024, 4)


def test_layer_getters():
    a = gf.Input(shape=(3,), batch_size=2, name="input_a")
    b = gf.Input(shape=(3,), batch_size=2, name="input_b")
    x = layers.Dense(5, name="dense_1")(layers.Add(name="add")([a, b]))
    model = gf.Model([a, b], layers.Dense(4, name="dense_2")(x))
    # Keras: 4 layers (its `a + b` is an operation, not a layer); here the Add is one.
    assert [layer.name for layer in model.layers] == [
        "input_a", "input_b", "add", "dense_1", "dense_2"]
    assert model.get_layer(index=0).name == "input_a"
    assert model.get_layer(index=3).name == "dense_1"
    assert model.get_layer(name="dense_1").name == "dense_1"
    assert isinstance(model.get_layer("input_b"), gf.InputLayer)
    with pytest.raises(ValueError, match="a layer name or an index"):
        model.get_layer()


@gf.register_layer
class ZeroInTraining(gf.Layer):
    """Keras's CustomLayer of test_training_arg."""

    def call(self, inputs, training=False):
        return inputs * 0.0 if training else inputs


def test_training_arg():
    inputs = gf.Input((20,))
    model = gf.Model(inputs=inputs, outputs=ZeroInTraining()(inputs))
    np.testing.assert_allclose(model(np.ones((4, 20))), 1.0)
    np.testing.assert_allclose(model(np.ones((4, 20)), training=False), 1.0)
    np.testing.assert_allclose(model(np.ones((4, 20)), training=True), 0.0)

    inputs = gf.Input((20,))
    # `training=True` in the functional call holds whatever the model is called with.
    model = gf.Model(inputs=inputs, outputs=ZeroInTraining()(inputs, training=True))
    for training in (False, True):
        np.testing.assert_allclose(model(np.ones((4, 20)), training=training), 0.0)
    restored = gf.Functional.from_config(model.get_config())
    np.testing.assert_allclose(restored(np.ones((4, 20))), 0.0)


def test_passing_inputs_by_name():
    a = gf.Input(shape=(3,), name="input_a")
    b = gf.Input(shape=(3,), name="input_b")
    model = gf.Model([a, b], layers.Dense(4)(layers.Add()([a, b])))
    out = model({"input_a": _random(2, 3), "input_b": _random(2, 3)})
    assert out.shape == (2, 4)
    symbolic = model({"input_a": gf.Input((3,), name="input_a_2"),
                      "input_b": gf.Input((3,), name="input_b_2")})
    assert symbolic.shape == (None, 4)


def test_bad_input_spec():
    inputs = gf.Input(shape=(4,))
    model = gf.Model(inputs, layers.Dense(2)(inputs))
    with pytest.raises(ValueError, match=r"expected shape=\(None, 4\), found shape=\(2, 3\)"):
        model(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"expects 1 input"):
        model([np.zeros((2, 4)), np.zeros((2, 4))])

    a, b = gf.Input(shape=(4,), name="a"), gf.Input(shape=(4,), name="b")
    outputs = layers.Dense(2)(layers.Add()([a, b]))
    model = gf.Model([a, b], outputs)
    with pytest.raises(ValueError, match=r"has 2 inputs \(a, b\) but received one array"):
        model(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"expected shape=\(None, 4\), found shape=\(2, 3\)"):
        model([np.zeros((2, 3)), np.zeros((2, 4))])
    model = gf.Model({"a": a, "b": b}, outputs)
    with pytest.raises(ValueError, match=r"expected shape=\(None, 4\), found shape=\(2, 3\)"):
        model({"a": np.zeros((2, 3)), "b": np.zeros((2, 4))})


def test_functional_slicing():
    inputs = gf.Input(shape=(None, 2), name="input")
    x1 = layers.Dense(3, name="dense1")(inputs)
    x2 = layers.Dense(4, name="dense2")(x1)
    outputs = layers.Dense(5, name="dense3")(x2)
    full = gf.Model(inputs, outputs, name="full_model")
    assert len(full.layers) == 4

    def names(model):
        assert isinstance(model.layers[0], gf.InputLayer)
        return [layer.name for layer in model.layers[1:]]

    assert names(gf.Model(x2, outputs, name="partial1")) == ["dense3"]
    assert names(gf.Model(x1, x2, name="partial2")) == ["dense2"]
    partial3 = gf.Model(full.get_layer("dense2").input, outputs, name="partial3")
    assert names(partial3) == ["dense2", "dense3"]
    partial4 = gf.Model(full.get_layer("dense1").input, full.get_layer("dense2").output)
    assert names(partial4) == ["dense1", "dense2"]
    x = _random(2, 5, 2)
    np.testing.assert_allclose(partial3(full.get_layer("dense1")(x)), full(x), rtol=1e-6)


def test_disconnected_output():
    i1, i2 = gf.Input((2,), name="input1"), gf.Input((2,), name="input2")
    with pytest.raises(ValueError,
                       match=r"output 'output2' is not connected to the inputs.*'input2'"):
        gf.Model(i1, {"output1": layers.Dense(2)(i1), "output2": layers.Dense(2)(i2)})


def test_serialization_round_trips_keras_layout():
    a = gf.Input(shape=(3,), name="input_a")
    b = gf.Input(shape=(3,), name="input_b")
    out_a = layers.Dense(4, name="output_a")(layers.Dense(5, name="middle_a")(a))
    out_b = layers.Dense(4, name="output_b")(layers.Dense(5, name="middle_b")(b))
    model = gf.Model([a, b], [out_a, out_b], name="func", trainable=False)
    config = model.get_config()
    assert config["input_layers"] == [["input_a", 0, 0], ["input_b", 0, 0]]
    assert config["output_layers"] == [["output_a", 0, 0], ["output_b", 0, 0]]
    middle = next(entry for entry in config["layers"] if entry["name"] == "middle_a")
    assert middle["inbound_nodes"] == [{"args": [{"class_name": "__keras_tensor__", "config": {
        "keras_history": ["input_a", 0, 0]}}], "kwargs": {}}]
    restored = gf.Functional.from_config(config)
    assert restored.get_config() == config and not restored.trainable


def test_for_functional_in_sequential():
    inputs = gf.Input((4, 4, 3))
    base = gf.Model(inputs, layers.Conv2D(2, 3, padding="same")(inputs), name="base")
    model = gf.Sequential([gf.Input(shape=(4, 4, 3)), base, layers.GlobalAveragePooling2D(),
                           layers.Dense(7, activation="softmax")])
    assert model.built and model.output_spec.shape.as_list() == [None, 7]
    restored = gf.Sequential.from_config(model.get_config())  # built for the gf.Input
    assert restored.count_params() == model.count_params()


def test_layers_setter():
    inputs = gf.Input(shape=(3,))
    model = gf.Model(inputs, layers.Dense(5)(inputs))
    with pytest.raises(AttributeError):
        model.layers = [layers.Dense(4)]


def test_invalid_config_deserialization_missing_node():
    inputs = gf.Input((2,), name="input")
    model = gf.Model(inputs, layers.Dense(2, name="dense")(inputs))
    config = model.get_config()
    config["layers"][1]["inbound_nodes"][0]["args"][0]["config"]["keras_history"] = [
        "nowhere", 0, 0]
    with pytest.raises(ValueError, match=r"node 0 of layer 'dense' reads tensors that no layer"):
        gf.Functional.from_config(config)


def test_invalid_config_deserialization_loop():
    inputs = gf.Input((2,), name="input")
    first = layers.Dense(2, name="first")
    model = gf.Model(inputs, layers.Dense(2, name="second")(first(inputs)))
    config = model.get_config()
    entries = {entry["name"]: entry for entry in config["layers"]}
    entries["first"]["inbound_nodes"][0]["args"][0]["config"]["keras_history"] = [
        "second", 0, 0]
    with pytest.raises(ValueError, match="form a loop"):
        gf.Functional.from_config(config)


def test_shared_layer_and_sub_model_match_keras():
    def build(lib, Model):
        L = lib_layers(lib)
        inputs = lib.Input((3,), name="x")
        shared = L.Dense(3, activation="tanh", name="shared")
        hidden = L.Dense(4, activation="relu", name="h")(shared(shared(inputs)))
        return Model(inputs, L.Dense(2, name="out")(hidden))

    model, twin = build(gf, gf.Model), build(keras, keras.Model)
    assert model.count_params() == twin.count_params() == 12 + 16 + 10
    assert len(model.get_layer("shared").inbound_nodes) == 2
    with pytest.raises(ValueError, match="called 2 times"):
        _ = model.get_layer("shared").output
    _copy_weights(model, twin)
    x = _random(5, 3)
    np.testing.assert_allclose(model.predict(x, verbose=0), twin.predict(x, verbose=0),
                               rtol=1e-5, atol=1e-6)
    features = gf.Model(model.input, model.get_layer("h").output)
    twin_features = keras.Model(twin.input, twin.get_layer("h").output)
    np.testing.assert_allclose(features.predict(x, verbose=0),
                               twin_features.predict(x, verbose=0), rtol=1e-5, atol=1e-6)
    assert features.get_layer("shared") is model.get_layer("shared")  # weights shared


def test_one_epoch_of_a_two_input_two_output_model_matches_keras():
    def build(lib, Model):
        L = lib_layers(lib)
        a, b = lib.Input((3,), name="a"), lib.Input((2,), name="b")
        trunk = L.Dense(4, activation="tanh", name="trunk")(L.Concatenate(name="join")([a, b]))
        return Model({"a": a, "b": b}, {"score": L.Dense(1, name="score")(trunk),
                                        "kind": L.Dense(3, name="kind")(trunk)})

    model, twin = build(gf, gf.Model), build(keras, keras.Model)
    _copy_weights(model, twin)
    rng = np.random.default_rng(3)
    x = {"a": _random(16, 3), "b": _random(16, 2, seed=1)}
    y = {"score": rng.normal(size=(16, 1)).astype("float32"),
         "kind": rng.integers(0, 3, size=(16,))}
    losses = {"score": "mse", "kind": keras.losses.SparseCategoricalCrossentropy(from_logits=True)}
    model.compile(optimizer=gf.optimizers.SGD(0.1), loss=losses,
                  loss_weights={"score": 1.0, "kind": 0.5}, **_fast(model))
    twin.compile(optimizer=keras.optimizers.SGD(0.1), loss=losses,
                 loss_weights={"score": 1.0, "kind": 0.5}, **_fast(twin))
    ours = model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    theirs = twin.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    np.testing.assert_allclose(ours.history["loss"], theirs.history["loss"], rtol=1e-5)
    for key in ("score", "kind"):
        np.testing.assert_allclose(model.predict(x, verbose=0)[key],
                                   twin.predict(x, verbose=0)[key], rtol=1e-5, atol=1e-6)


def test_subclass_with_train_step_becomes_functional():
    calls = []

    class CustomModel(gf.Model):
        def train_step(self, data):
            calls.append(len(data))
            return super().train_step(data)

    inputs = gf.Input((3,))
    model = CustomModel(inputs, layers.Dense(1)(inputs))
    assert isinstance(model, CustomModel) and isinstance(model, gf.Functional)
    model.compile(optimizer="sgd", loss="mse", run_eagerly=True)
    model.fit(np.ones((4, 3)), np.ones((4, 1)), batch_size=2, epochs=1, verbose=0)
    assert calls == [2, 2]

    class WithInit(gf.Model):  # Keras's "functional subclass": its own __init__
        def __init__(self, units):
            inputs = gf.Input((3,))
            super().__init__(inputs=inputs, outputs=layers.Dense(units)(inputs))
            self.units = units

    model = WithInit(2)
    assert isinstance(model, WithInit) and model.units == 2
    assert model(np.ones((1, 3))).shape == (1, 2)


def test_subclassed_model_keeps_working():
    class TwoLayer(gf.Model):
        def __init__(self):
            super().__init__(name="two")
            self.hidden = layers.Dense(4)
            self.out = layers.Dense(1)

        def call(self, x, training=False):
            return self.out(self.hidden(x))

    model = TwoLayer()
    assert not isinstance(model, gf.Functional) and model.name == "two"
    assert model(np.ones((2, 3))).shape == (2, 1)
    assert type(gf.Model(name="plain")) is gf.Model


def test_symbolic_tensors_refuse_tensorflow_operations_and_name_a_layer():
    a, b = gf.Input((3,)), gf.Input((3,))
    import tensorflow as tf

    with pytest.raises(TypeError, match=r"placeholder of graphfit's functional API.*"
                                        r"layers.Concatenate\(\)"):
        tf.concat([a, b], axis=-1)
    with pytest.raises(TypeError, match="can be indexed with ints, slices"):
        a[[0, 1]]
    with pytest.raises(TypeError, match="placeholder"):
        list(a)
    with pytest.raises(TypeError, match="extra arguments"):
        layers.Dense(2)(a, "extra")


def test_keras_objects_get_the_graphfit_equivalent():
    with pytest.raises(TypeError, match=r"Keras tensor.*gf.Input\(shape"):
        gf.Sequential([keras.Input((4,)), layers.Dense(2)])
    with pytest.raises(TypeError, match=r"Keras tensor.*gf.Input\(shape"):
        gf.Model(keras.Input((4,)), keras.layers.Dense(2)(keras.Input((4,))))
    with pytest.raises(TypeError, match=r"Keras tensor.*gf.Input\(shape"):
        layers.Dense(2)(keras.Input((4,)))
    with pytest.raises(TypeError, match=r"use graphfit.layers.Dense\(...\).*KerasLayer"):
        gf.Sequential([keras.layers.Dense(2)])
    with pytest.raises(TypeError, match=r"Keras model .*graphfit.layers.KerasLayer\(model\)"):
        gf.Sequential([keras.Sequential([keras.layers.Dense(2)])])
    model = gf.Sequential([layers.Dense(1)], input_shape=(2,))
    model.compile(optimizer="sgd", loss="mse")
    with pytest.raises(TypeError, match=r"Keras callback \(EarlyStopping\); use "
                                        r"graphfit.callbacks.EarlyStopping"):
        model.fit(np.ones((4, 2)), np.ones((4, 1)), verbose=0,
                  callbacks=[keras.callbacks.EarlyStopping()])
    with pytest.raises(ValueError, match=r"graphfit.optimizers.SGD"):
        model.compile(optimizer=keras.optimizers.SGD(), loss="mse")


def test_a_keras_layer_called_on_a_graphfit_input_names_the_wrapper():
    with pytest.raises(TypeError, match=r"wrapped: layers.KerasLayer\(...\)"):
        keras.layers.Dense(2)(gf.Input((3,)))
    inputs = gf.Input((3,))
    outputs = layers.KerasLayer(keras.layers.Dense(2))(inputs)  # what the message says
    assert gf.Model(inputs, outputs).count_params() == 8


def test_dict_input_to_list_model():
    def build(lib):
        L = lib_layers(lib)
        title = lib.Input(shape=(20,), name="title")
        text_body = lib.Input(shape=(20,), name="text_body")
        tags = lib.Input(shape=(10,), name="tags")
        features = L.Dense(8, activation="relu")(L.Concatenate()([title, text_body, tags]))
        priority = L.Dense(1, activation="sigmoid", name="priority")(features)
        department = L.Dense(3, activation="softmax", name="department")(features)
        return lib.Model(inputs=[title, text_body, tags], outputs=[priority, department])

    model, twin = build(gf), build(keras)
    _copy_weights(model, twin)
    rng = np.random.default_rng(5)
    x = [rng.integers(0, 2, size=(32, 20)), rng.integers(0, 2, size=(32, 20)),
         rng.integers(0, 2, size=(32, 10))]
    y = [rng.random(size=(32, 1)), rng.integers(0, 2, size=(32, 3))]
    by_name_x = dict(zip(["title", "text_body", "tags"], x))
    by_name_y = dict(zip(["priority", "department"], y))
    for ours_lib, m in ((gf, model), (keras, twin)):
        m.compile(optimizer=ours_lib.optimizers.SGD(0.05),
                  loss=["mean_squared_error", "categorical_crossentropy"], **_fast(m))
    losses = [m.fit(x, y, epochs=1, batch_size=8, shuffle=False, verbose=0).history["loss"]
              for m in (model, twin)]
    for ours_lib, m in ((gf, model), (keras, twin)):  # dict style
        m.compile(optimizer=ours_lib.optimizers.SGD(0.05),
                  loss={"priority": "mean_squared_error",
                        "department": "categorical_crossentropy"},
                  metrics={"priority": ["mean_absolute_error"], "department": ["accuracy"]},
                  **_fast(m))
    histories = [m.fit(by_name_x, by_name_y, epochs=1, batch_size=8, shuffle=False,
                       verbose=0).history for m in (model, twin)]
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-5)
    np.testing.assert_allclose(histories[0]["loss"], histories[1]["loss"], rtol=1e-5)
    ours = model.evaluate(by_name_x, by_name_y, verbose=0, return_dict=True)
    theirs = twin.evaluate(by_name_x, by_name_y, verbose=0, return_dict=True)
    np.testing.assert_allclose(ours["loss"], theirs["loss"], rtol=1e-5)
    priority_preds, department_preds = model.predict(by_name_x, verbose=0)
    np.testing.assert_allclose(department_preds, twin.predict(x, verbose=0)[1], rtol=1e-5,
                               atol=1e-6)


def _operator_expressions(lib):
    """The same expressions through either library: operators between tensors, with
    constants on both sides, powers, matmul, negation and indexing (Keras records each as an
    operation; graphfit as a TensorOperation layer)."""
    a, b = lib.Input((4,), name="a"), lib.Input((4,), name="b")
    dense = (keras.layers if lib is keras else layers).Dense(4, name="dense")
    h = dense(a)
    x = (h + b) * 0.5 - 1.0
    y = -x[:, 1:3] ** 2 + 2.0 / (1.0 + a[:, :2] * a[:, :2])
    z = (x[..., None] @ b[:, None, :])[:, 0] - 3.0 * b
    return [a, b], [y, z]


def test_python_operators_on_symbolic_tensors_give_kerass_numbers(tmp_path):
    inputs, outputs = _operator_expressions(gf)
    model = gf.Model(inputs, outputs)
    twin_inputs, twin_outputs = _operator_expressions(keras)
    twin = keras.Model(twin_inputs, twin_outputs)
    twin.get_layer("dense").set_weights(model.get_layer("dense").get_weights())
    data = [_random(5, 4, seed=1), _random(5, 4, seed=2)]
    ours, theirs = model.predict(data, verbose=0), twin.predict(data, verbose=0)
    for got, expected in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    # One layer per operator; the model saves and loads like any other.
    assert {type(layer).__name__ for layer in model.layers} == {
        "InputLayer", "Dense", "TensorOperation"}
    model.save(tmp_path / "ops.graphfit")
    loaded = gf.models.load_model(tmp_path / "ops.graphfit")
    for got, expected in zip(loaded.predict(data, verbose=0), ours, strict=True):
        np.testing.assert_array_equal(got, expected)


def test_a_residual_connection_written_with_plus_trains_as_kerass():
    def build(lib):
        lib_layers = keras.layers if lib is keras else layers
        inputs = lib.Input((3,))
        hidden = lib_layers.Dense(3, activation="tanh", name="hidden")(inputs)
        outputs = lib_layers.Dense(1, name="out")(hidden + inputs)
        return lib.Model(inputs, outputs)

    model, twin = build(gf), build(keras)
    for name in ("hidden", "out"):  # Keras's `+` is no layer: copied by name
        twin.get_layer(name).set_weights(model.get_layer(name).get_weights())
    x, y = _random(16, 3, seed=3), _random(16, 1, seed=4)
    model.compile(optimizer=gf.optimizers.SGD(0.1), loss="mse", **_fast(model))
    twin.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", **_fast(twin))
    ours = model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    theirs = twin.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    np.testing.assert_allclose(ours.history["loss"], theirs.history["loss"], rtol=1e-5)
