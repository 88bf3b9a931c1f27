"""XLA is decided once, before tracing, from what the model holds (training.xla_support):
a layer that runs Python says so statically, and `jit_compile=True` on such a model fails at
`fit` naming the layer; "auto" decides from the layers, the optimizer and the data."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers
from graphfit.training.xla_support import resolve_jit_compile


class PythonScale(gf.Layer):
    """Runs NumPy inside the graph (tf.numpy_function), which XLA cannot compile."""

    def call(self, x, training=False):
        return tf.ensure_shape(tf.numpy_function(lambda a: 2 * a, [x], x.dtype,
                                                 stateful=False), x.shape)


def _built(*stack, dtype="float32"):
    model = gf.Sequential(list(stack), dtype=dtype)
    model.build_for(tf.TensorSpec([None, 4, 4, 1] if isinstance(stack[0], layers.Conv2D)
                                  else [None, 3], tf.as_dtype(dtype)), "x")
    return model


@pytest.fixture(scope="module")
def dense():
    return _built(layers.Dense(2))


def test_auto_compiles_a_dense_model_on_cpu(dense):
    assert resolve_jit_compile("auto", dense, optimizers.SGD(0.1)) is True
    assert resolve_jit_compile(False, dense) is False


def test_auto_leaves_xla_off_for_varying_shapes(dense):
    """Graph batches change shape batch to batch: XLA would compile each one."""
    assert resolve_jit_compile("auto", dense, varying_shapes=True) is False
    assert resolve_jit_compile(True, dense, varying_shapes=True) is True  # asked for: kept


def test_auto_follows_the_layers_and_the_optimizer_on_cpu(dense):
    conv = _built(layers.Conv2D(2, 3), layers.Flatten(), layers.Dense(1))
    assert resolve_jit_compile("auto", conv) is False  # Conv2D: xla_friendly_on_cpu False
    assert resolve_jit_compile(True, conv) is True
    assert resolve_jit_compile("auto", dense, optimizers.LevenbergMarquardt()) is False


def test_a_layer_that_runs_python_is_found_before_tracing():
    model = _built(PythonScale(name="numpy_scale"), layers.Dense(1))
    with pytest.raises(ValueError, match=r"jit_compile=True, but in model .* layer "
                       r"'numpy_scale' \(PythonScale\) runs a PyFunc.* no kernel"):
        resolve_jit_compile(True, model)
    with pytest.warns(UserWarning, match="runs without XLA.*'numpy_scale'"):
        assert resolve_jit_compile("auto", model) is False


def test_fit_with_jit_compile_true_names_the_layer_and_trains_nothing():
    model = _built(PythonScale(name="numpy_scale"), layers.Dense(1))
    model.compile(optimizer=optimizers.SGD(0.1), loss="mse", jit_compile=True)
    initial = model.get_weights()
    with pytest.raises(ValueError, match="'numpy_scale' \\(PythonScale\\).*supports_jit"):
        model.fit(np.ones((8, 3)), np.ones((8, 1)), epochs=1, verbose=0)
    assert all(np.array_equal(a, b) for a, b in zip(initial, model.get_weights()))
