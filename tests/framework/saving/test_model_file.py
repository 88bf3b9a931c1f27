"""`model.save("x.graphfit")` and `load_model`: one file, an identical model, training that
carries on exactly, classes through the registry, a safe mode that imports nothing, and a
clear error for every bad file or path."""

import json
import os
import sys
import zipfile

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers

RNG = np.random.default_rng(0)
X = RNG.normal(size=(40, 3)).astype("float32")
Y = (X @ np.array([[1.0], [-2.0], [0.5]], "float32") + 0.1).astype("float32")


@gf.register_layer
class Scale(gf.Layer):
    """A user layer: found through the registry when a model holding it is loaded."""

    def __init__(self, factor=2.0, name=None, dtype=None, trainable=True):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        self.factor = factor

    def build(self, input_shape):
        self.scale = self.add_weight("scale", shape=(input_shape[-1],), initializer="ones")

    def call(self, x, training=False):
        return self.factor * x * self.compute_value(self.scale)


def _fit_more(model, epochs=1):
    return model.fit(X, Y, batch_size=8, epochs=epochs, shuffle=False, verbose=0).history


def _assert_same_state(a, b):
    for left, right in zip(a.variables, b.variables, strict=True):
        np.testing.assert_array_equal(left.numpy(), right.numpy())
    for left, right in zip(a.optimizer.variables, b.optimizer.variables, strict=True):
        np.testing.assert_array_equal(left.numpy(), right.numpy())


@pytest.fixture(scope="module")
def saved_sequential(tmp_path_factory):
    """A trained Sequential (Dropout's generator and BatchNormalization's statistics
    included), saved after two epochs."""
    keras.utils.set_random_seed(3)
    model = gf.Sequential([layers.Dense(8, activation="relu"), layers.Dropout(0.3),
                           layers.BatchNormalization(), Scale(1.5), layers.Dense(1)],
                          input_shape=(3,))
    model.compile(optimizer=optimizers.Adam(0.01), loss="mse", metrics=["mae"],
                  jit_compile=False)
    _fit_more(model, epochs=2)
    path = model.save(tmp_path_factory.mktemp("seq") / "model.graphfit")
    return model, path


def test_a_loaded_sequential_predicts_and_trains_on_as_the_saved_one(saved_sequential):
    model, path = saved_sequential
    loaded = gf.models.load_model(path)
    assert type(loaded) is gf.Sequential and loaded is not model
    assert [type(l).__name__ for l in loaded.layers] == [type(l).__name__ for l in model.layers]
    np.testing.assert_array_equal(loaded.predict(X, verbose=0), model.predict(X, verbose=0))
    assert type(loaded.optimizer) is optimizers.Adam
    assert int(loaded.optimizer.iterations.numpy()) == 10  # 2 epochs of 5 batches
    assert loaded.get_compile_config() == model.get_compile_config()
    _assert_same_state(model, loaded)
    # The next epoch: same loss and the same weights, Dropout's masks included.
    after_saved, after_loaded = _fit_more(model), _fit_more(loaded)
    assert after_loaded == after_saved and set(after_loaded) == {"loss", "mae"}
    _assert_same_state(model, loaded)


def test_the_file_is_a_zip_of_json_and_a_checkpoint(saved_sequential):
    _, path = saved_sequential
    with zipfile.ZipFile(path) as archive:
        names = set(archive.namelist())
        config = json.loads(archive.read("config.json"))
        metadata = json.loads(archive.read("metadata.json"))
    assert {"metadata.json", "config.json", "weights/ckpt.index"} <= names
    assert metadata["format"] == "graphfit-model" and metadata["format_version"] == 1
    assert config["model"]["type"] == "Sequential"
    assert config["classes"]["Scale"] == __name__
    assert config["build"] == {"spec": {"shape": [None, 3], "dtype": "float32"}}
    assert config["compile"]["optimizer"]["type"] == "Adam"
    assert config["compile"]["loss"] == "mse" and config["compile"]["metrics"] == ["mae"]


def test_gf_saving_load_model_and_an_uncompiled_load(saved_sequential):
    _, path = saved_sequential  # the model itself trained on after it was saved
    loaded = gf.saving.load_model(path, compile=False)
    assert loaded.optimizer is None and not loaded.compiled
    compiled = gf.models.load_model(path)
    for left, right in zip(loaded.get_weights(), compiled.get_weights(), strict=True):
        np.testing.assert_array_equal(left, right)
    # Uncompiled, predict decides XLA for itself (jit_compile="auto"): float32 rounding.
    np.testing.assert_allclose(loaded.predict(X, verbose=0), compiled.predict(X, verbose=0),
                               rtol=1e-5, atol=1e-6)


def test_a_graph_model_with_two_outputs_round_trips(tmp_path):
    model = gf.GraphModel(
        inputs={"x": (3,)},
        nodes=[gf.Node(layers.Dense(4, activation="tanh", name="trunk"), "x"),
               gf.Node(layers.Dense(1, name="a"), "trunk"),
               gf.Node(layers.Dense(1, name="b"), "trunk")],
        outputs=["a", "b"])
    model.compile(optimizer=optimizers.SGD(0.05, momentum=0.9),
                  loss={"a": "mse", "b": keras.losses.MeanAbsoluteError(reduction="sum")},
                  loss_weights={"a": 1.0, "b": 0.25}, metrics={"a": ["mae"]},
                  jit_compile=False)
    y = {"a": Y, "b": -Y}
    model.fit(X, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    loaded = gf.models.load_model(model.save(tmp_path / "graph.graphfit"))
    assert type(loaded) is gf.GraphModel
    for key, value in model.predict(X, verbose=0).items():
        np.testing.assert_array_equal(loaded.predict(X, verbose=0)[key], value)
    histories = [m.fit(X, y, batch_size=8, epochs=1, shuffle=False, verbose=0).history
                 for m in (model, loaded)]
    assert histories[0] == histories[1]
    _assert_same_state(model, loaded)


def test_an_unbuilt_model_saves_its_config_and_compile(tmp_path):
    model = gf.Sequential([layers.Dense(2)])
    model.compile(optimizer="sgd", loss="mse")
    loaded = gf.models.load_model(model.save(tmp_path / "unbuilt.graphfit"))
    assert not loaded.built and type(loaded.optimizer) is optimizers.SGD
    assert loaded.fit(X, Y[:, :1].repeat(2, 1), epochs=1, verbose=0).history["loss"]


# ------------------------------------------------------------------ classes, safe mode
_PLANTED = '''
import graphfit as gf

IMPORTED = True


@gf.register_layer
class Planted(gf.Layer):
    def call(self, x, training=False):
        return x
'''


def _planted_file(tmp_path):
    """A model file naming the class `Planted` of a module nobody imported yet."""
    model = gf.Sequential([layers.Activation("linear", name="planted")], input_shape=(3,))
    path = model.save(tmp_path / "planted.graphfit")
    with zipfile.ZipFile(path) as archive:
        parts = {name: archive.read(name) for name in archive.namelist()}
    config = json.loads(parts["config.json"])
    config["model"]["config"]["layers"] = [{"type": "Planted", "config": {"name": "planted"}}]
    config["classes"] = {"Sequential": config["classes"]["Sequential"],
                         "Planted": "graphfit_planted_module"}
    parts["config.json"] = json.dumps(config).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
    (tmp_path / "graphfit_planted_module.py").write_text(_PLANTED)
    return path


def test_safe_mode_imports_no_module_and_names_the_class(tmp_path, monkeypatch):
    path = _planted_file(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"'Planted' \(module 'graphfit_planted_module'\)"
                                         r".*safe_mode=False"):
        gf.models.load_model(path)
    assert "graphfit_planted_module" not in sys.modules
    # For a file you trust: the module is imported, and registers the class.
    loaded = gf.models.load_model(path, safe_mode=False)
    module = sys.modules.pop("graphfit_planted_module")
    assert module.IMPORTED and type(loaded.layers[0]) is module.Planted


def test_an_unregistered_model_class_is_refused_at_save(tmp_path):
    class Mine(gf.Sequential):
        pass

    model = Mine([layers.Dense(1)], input_shape=(3,))
    with pytest.raises(ValueError, match=r"Mine is not registered.*@graphfit.register_layer"):
        model.save(tmp_path / "mine.graphfit")
    assert not os.listdir(tmp_path)


def test_custom_objects_register_a_class(tmp_path):
    model = gf.Sequential([Scale(3.0)], input_shape=(3,))
    loaded = gf.models.load_model(model.save(tmp_path / "s.graphfit"),
                                  custom_objects={"Scale": Scale})
    np.testing.assert_array_equal(loaded.predict(X, verbose=0), 3.0 * X)


# ---------------------------------------------------------------------------- errors
@pytest.fixture
def small_model():
    model = gf.Sequential([layers.Dense(1)], input_shape=(3,))
    model.compile(optimizer="sgd", loss="mse")
    return model


@pytest.mark.parametrize("name, message", [
    ("m.keras", r"Keras \.keras file.*\.graphfit"),
    ("m.h5", r"HDF5 file.*\.graphfit"),
    ("m.zip", r"ends in '\.graphfit'"),
])
def test_a_wrong_extension_is_refused_on_save_and_load(small_model, tmp_path, name, message):
    with pytest.raises(ValueError, match=message):
        small_model.save(tmp_path / name)
    (tmp_path / name).write_bytes(b"x")
    with pytest.raises(ValueError, match=message):
        gf.models.load_model(tmp_path / name)


def test_loading_a_keras_file_names_keras_load_model(tmp_path):
    with pytest.raises(ValueError, match=r"keras\.saving\.load_model"):
        gf.models.load_model(tmp_path / "model.keras")


def test_a_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="No graphfit model file at"):
        gf.models.load_model(tmp_path / "absent.graphfit")


def test_a_corrupt_file(tmp_path):
    path = tmp_path / "bad.graphfit"
    path.write_bytes(b"not a zip archive at all")
    with pytest.raises(ValueError, match="not a zip archive"):
        gf.models.load_model(path)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("readme.txt", "hello")
    with pytest.raises(ValueError, match="no metadata.json"):
        gf.models.load_model(path)


def test_damaged_weights_are_refused(small_model, tmp_path):
    path = small_model.save(tmp_path / "m.graphfit")
    with zipfile.ZipFile(path) as archive:
        parts = {name: archive.read(name) for name in archive.namelist()}
    data = next(name for name in parts if "data-" in name)
    parts[data] = parts[data][: len(parts[data]) // 2]
    with zipfile.ZipFile(path, "w") as archive:
        for name, value in parts.items():
            archive.writestr(name, value)
    with pytest.raises(ValueError, match="is damaged"):
        gf.models.load_model(path)


def test_a_newer_format_is_refused(small_model, tmp_path):
    path = small_model.save(tmp_path / "m.graphfit")
    with zipfile.ZipFile(path) as archive:
        parts = {name: archive.read(name) for name in archive.namelist()}
    metadata = json.loads(parts["metadata.json"])
    metadata["format_version"] = 99
    parts["metadata.json"] = json.dumps(metadata).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for name, value in parts.items():
            archive.writestr(name, value)
    with pytest.raises(ValueError, match="format version 99.*newer graphfit"):
        gf.models.load_model(path)


def test_a_keras_model_is_refused(tmp_path):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    with pytest.raises(ValueError, match=r"Keras model.*model\.save\('model\.keras'\)"):
        gf.saving.save_model(model, tmp_path / "k.graphfit")


def test_a_lambda_loss_is_refused_at_save(tmp_path):
    model = gf.Sequential([layers.Dense(1)], input_shape=(3,))
    model.compile(optimizer="sgd", loss=lambda y, p: (y - p) ** 2)
    with pytest.raises(ValueError, match="compile\\(loss=...\\) holds a lambda"):
        model.save(tmp_path / "m.graphfit")


def test_overwrite_false_keeps_the_file(small_model, tmp_path):
    path = small_model.save(tmp_path / "m.graphfit")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        small_model.save(path, overwrite=False)


@gf.register_layer
class TwoLayer(gf.Model):
    """A subclassed model of the user's: its constructor arguments are its config."""

    def __init__(self, units=4, name=None, dtype=None, trainable=True):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        self.hidden = layers.Dense(units, activation="tanh")
        self.out = layers.Dense(1)

    def call(self, x, training=False):
        return self.out(self.hidden(x))


def test_a_registered_subclassed_model_round_trips_with_mixed_precision(tmp_path):
    model = TwoLayer(units=5)
    model.compile(optimizer=optimizers.SGD(0.05, momentum=0.9), loss="mse",
                  dtype_policy="mixed_float16", jit_compile=False)
    model.fit(X, Y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    loaded = gf.models.load_model(model.save(tmp_path / "two.graphfit"))
    assert type(loaded) is TwoLayer and loaded.hidden.get_config()["units"] == 5
    assert type(loaded.optimizer) is optimizers.LossScaleOptimizer
    assert loaded.dtype_policy.name == "mixed_float16"
    histories = [m.fit(X, Y, batch_size=8, epochs=1, shuffle=False, verbose=0).history
                 for m in (model, loaded)]
    assert histories[0] == histories[1]
    _assert_same_state(model, loaded)


def test_to_json_and_model_from_json_rebuild_the_architecture_without_weights():
    inputs = gf.Input((4,), name="x")
    hidden = layers.Dense(3, activation="relu", name="h")(inputs)
    model = gf.Model(inputs, layers.Dense(1, name="o")(hidden))
    text = model.to_json(indent=2)
    assert json.loads(text)["type"] == "Functional"
    copy = gf.models.model_from_json(text)
    assert [layer.name for layer in copy.layers] == ["x", "h", "o"]
    assert copy.get_layer("h").get_config()["activation"] == "relu"
    copy.set_weights(model.get_weights())  # same architecture: the weights fit
    x = np.ones((2, 4), "float32")
    np.testing.assert_allclose(copy.predict(x, verbose=0), model.predict(x, verbose=0))
    with pytest.raises(ValueError, match="model_from_json needs the text model.to_json"):
        gf.models.model_from_json('{"config": {}}')


def _custom_penalty(weights):
    return 0.0 * tf.reduce_sum(weights)


@pytest.mark.parametrize("regularizer", [lambda w: 0.0 * tf.reduce_sum(w), _custom_penalty],
                         ids=["lambda", "function"])
def test_save_refuses_a_regularizer_load_model_could_not_rebuild(tmp_path, regularizer):
    model = gf.Sequential([layers.Dense(1, kernel_regularizer=regularizer, name="out")],
                          input_shape=(2,))
    with pytest.raises(ValueError, match=r"cannot be saved: load_model could not rebuild "
                                         r"layers\[0\]\.config\.kernel_regularizer"):
        model.save(str(tmp_path / "m.graphfit"))
    assert not list(tmp_path.iterdir())  # nothing written


def test_a_config_without_its_model_is_called_damaged(tmp_path):
    path = tmp_path / "m.graphfit"
    gf.Sequential([layers.Dense(1)], input_shape=(2,)).save(str(path))
    damaged = tmp_path / "d.graphfit"
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(damaged, "w") as target:
        for item in source.infolist():
            data = source.read(item.filename)
            if item.filename == "config.json":
                config = json.loads(data)
                del config["model"]
                data = json.dumps(config)
            target.writestr(item.filename, data)
    with pytest.raises(ValueError, match="damaged: its config.json does not describe a model"):
        gf.models.load_model(str(damaged))
