"""Regression tests for issue 13's framework items: XLA fallback (16), dict predict (18),
binary metrics on several classes (10), summary wording (21)."""

import warnings

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers


class NumpyDouble(gf.Layer):
    def call(self, x, training=False):
        y = tf.numpy_function(lambda a: a * 2, [x], tf.float32)
        y.set_shape(x.shape)
        return y


def _data(n=32):
    rng = np.random.default_rng(0)
    return rng.random((n, 3), dtype=np.float32), rng.random((n, 1), dtype=np.float32)


def test_auto_jit_drops_xla_for_a_numpy_function_layer():
    x, y = _data()
    model = gf.Sequential([NumpyDouble(name="numpy_step"), layers.Dense(1)])
    model.compile("adam", "mse", jit_compile="auto")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        history = model.fit(x, y, epochs=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    messages = [str(w.message) for w in caught]
    assert any("numpy_step" in m and "without XLA" in m for m in messages), messages
    assert model.predict(x[:3], verbose=0).shape == (3, 1)


def test_explicit_jit_with_a_numpy_function_layer_names_the_layer():
    x, y = _data()
    model = gf.Sequential([NumpyDouble(name="numpy_step"), layers.Dense(1)])
    model.compile("adam", "mse", jit_compile=True)
    with pytest.raises(ValueError, match="'numpy_step'.*XLA cannot compile"):
        model.fit(x, y, verbose=0)


def test_declared_supports_jit_false():
    class NoXla(gf.Layer):
        supports_jit = False

        def call(self, x, training=False):
            return x

    x, y = _data()
    model = gf.Sequential([NoXla(name="no_xla"), layers.Dense(1)])
    model.compile("adam", "mse", jit_compile=True)
    with pytest.raises(ValueError, match="'no_xla'"):
        model.fit(x, y, verbose=0)
    model.compile("adam", "mse", jit_compile="auto")
    with pytest.warns(UserWarning, match="runs without XLA.*'no_xla'"):
        model.fit(x, y, verbose=0)
    assert model.compile_state.jit_compile is False
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*without XLA")  # once per model
        model.compile("adam", "mse", jit_compile="auto")
        model.fit(x, y, verbose=0)


def test_auto_jit_is_decided_once_and_kept_when_batch_sizes_change():
    def batches():
        for n in range(1, 11):
            yield np.ones((n, 3), np.float32), np.ones((n, 1), np.float32)

    spec = (tf.TensorSpec([None, 3]), tf.TensorSpec([None, 1]))
    dataset = tf.data.Dataset.from_generator(batches, output_signature=spec)
    model = gf.Sequential([layers.Dense(4), layers.Dense(1)])
    model.compile("adam", "mse", jit_compile="auto")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no retrace without XLA in the middle of fit
        model.fit(dataset, epochs=2, verbose=0)
    assert model.compile_state.steps.jit_compile is True
    assert model.compile_state.steps.tracing_counts()["train_step"] <= 2


def test_fixed_batches_keep_xla():
    x, y = _data(50)
    model = gf.Sequential([layers.Dense(1)])
    model.compile("adam", "mse", jit_compile=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.fit(x, y, batch_size=16, epochs=2, verbose=0, validation_data=(x[:10], y[:10]))
    assert model.compile_state.steps.jit_compile is True


class StackScalars(gf.Layer):
    def call(self, xs, training=False):
        return tf.stack(xs, axis=-1)


def test_predict_on_a_dict_of_scalar_features_matches_a_dataset():
    model = gf.GraphModel(inputs={"a": (), "b": ()},
                          nodes=[gf.Node(StackScalars(name="stack"), ["a", "b"]),
                                 gf.Node(layers.Dense(1, name="out"), "stack")],
                          outputs="out")
    data = {"a": np.arange(5, dtype=np.float32), "b": np.ones(5, np.float32)}
    from_dataset = model.predict(tf.data.Dataset.from_tensor_slices(data).batch(2), verbose=0)
    np.testing.assert_allclose(model.predict(data, verbose=0), from_dataset, rtol=1e-6)


def test_predict_on_a_dict_for_a_subclassed_model_built_from_a_dataset():
    class Pair(gf.Model):
        def __init__(self):
            super().__init__()
            self.out = layers.Dense(1)

        def call(self, x, training=False):
            return self.out(tf.stack([x["a"], x["b"]], axis=-1))

    model = Pair()
    data = {"a": np.arange(6, dtype=np.float32), "b": np.ones(6, np.float32)}
    labels = np.ones((6, 1), np.float32)
    model.compile("adam", "mse")
    model.fit(tf.data.Dataset.from_tensor_slices((data, labels)).batch(3), verbose=0)
    assert model.predict(data, verbose=0).shape == (6, 1)


def test_auc_on_ten_classes_with_class_ids_is_refused_at_build():
    model = gf.Sequential([layers.Dense(10, activation="softmax")])
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy", "auc"])
    x = np.random.rand(20, 4).astype("float32")
    with pytest.raises(ValueError, match=r"'auc'.*binary.*10 classes.*one-hot"):
        model.fit(x, np.random.randint(0, 10, 20), verbose=0)
    model = gf.Sequential([layers.Dense(10, activation="softmax")])
    model.compile("adam", "categorical_crossentropy", metrics=["auc", "precision"])
    history = model.fit(x, np.eye(10)[np.random.randint(0, 10, 20)], verbose=0)
    assert "auc" in history.history


def test_summary_counts_optimizer_variables_and_values():
    model = gf.Sequential([layers.Dense(4)], input_shape=(3,))
    model.compile("adam", "mse")
    model.fit(np.ones((4, 3)), np.ones((4, 4)), verbose=0)
    lines = []
    model.summary(print_fn=lines.append)
    line = next(l for l in lines if l.startswith("Optimizer variables"))
    count = len(model.optimizer.variables)
    values = sum(int(np.prod(v.shape)) for v in model.optimizer.variables)
    assert f"Optimizer variables: {count} holding {values} values" in line
