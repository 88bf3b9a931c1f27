"""Issue 13: integer inputs stay integers unless a layer asks for floats (17); a failing build
names its layer (10)."""

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers


class RecordsDtype(gf.Layer):
    def call(self, x, training=False):
        self.seen = x.dtype
        return tf.cast(x, tf.float32)


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64])
def test_integer_inputs_reach_a_custom_layer_unchanged(dtype):
    layer = RecordsDtype()
    layer(tf.constant([[1, 2]], dtype))
    assert layer.seen == dtype


def test_segment_ids_into_a_custom_layer_inside_a_model():
    class SegmentSum(gf.Layer):
        def call(self, inputs, training=False):
            values, ids = inputs
            return tf.math.unsorted_segment_sum(values, ids, 2)

    out = SegmentSum()([tf.ones((3, 2)), tf.constant([0, 1, 1])])
    np.testing.assert_allclose(out.numpy(), [[1, 1], [2, 2]])


def test_a_layer_can_ask_for_float_inputs():
    class WantsFloats(RecordsDtype):
        casts_integer_inputs = True

    layer = WantsFloats()
    layer(tf.constant([[1, 2]]))
    assert layer.seen == tf.float32
    assert layers.Dense.casts_integer_inputs and not gf.Layer.casts_integer_inputs


def test_fit_with_integer_features_into_dense():
    model = gf.Sequential([layers.Dense(1)])
    model.compile("adam", "mse")
    history = model.fit(np.arange(20).reshape(10, 2), np.ones((10, 1)), verbose=0)
    assert np.isfinite(history.history["loss"][0])


class FailsToBuild(gf.Layer):
    def build(self, input_shape):
        raise ValueError("kernel larger than the input")

    def call(self, x, training=False):
        return x


def test_a_failing_build_names_the_layer_and_keeps_the_cause():
    model = gf.Sequential([layers.Dense(2), FailsToBuild(name="broken")])
    with pytest.raises(ValueError, match=r"'broken' \(FailsToBuild\).*kernel larger"):
        model.build((None, 3))
    with pytest.raises(ValueError, match="'broken'.*kernel larger") as info:
        FailsToBuild(name="broken")(tf.ones((2, 2)))
    assert isinstance(info.value.__cause__, ValueError)


def test_a_layer_fed_an_unknown_shape_says_how_to_give_it_one():
    class NoShape(gf.Layer):
        def call(self, x, training=False):
            return tf.numpy_function(lambda a: (a * 2).astype(np.float32), [x], tf.float32)

    model = gf.Sequential([NoShape(), layers.Dense(2)])
    model.compile(optimizer="adam", loss="mse")
    with pytest.raises(ValueError, match=r"failed to build for inputs of shape <unknown rank>"
                                         r".*tf\.ensure_shape"):
        model.fit(np.ones((8, 3), np.float32), np.ones((8, 2), np.float32), verbose=0)
