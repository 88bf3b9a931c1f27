"""`layer.build(input_shape)` called by hand, as Keras users call it: once, from a tuple, a list
or a `TensorShape`, marking the layer built so that its first call reuses the variables.
(Every registered layer goes through the same check in the layer contract,
`graphfit.testing.build_contract`, run by tests/test_conformance.py.)"""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers


@pytest.mark.parametrize("shape", [(None, 4), [None, 4], tf.TensorShape([None, 4])],
                         ids=["tuple", "list", "TensorShape"])
def test_dense_built_by_hand_counts_its_parameters_once(shape):
    dense = layers.Dense(3)
    dense.build(shape)
    assert dense.built and dense.kernel.shape == (4, 3)
    model = gf.Sequential([dense])
    model.build((None, 4))
    assert model.count_params() == 15  # Keras: 4 * 3 + 3; 30 if build made them again
    twin = keras.Sequential([keras.layers.Dense(3)])
    twin.build((None, 4))
    assert model.count_params() == twin.count_params()


def test_the_first_call_and_a_second_build_reuse_the_variables():
    dense = layers.Dense(3)
    dense.build((None, 4))
    kernel = dense.kernel
    dense.build((None, 4))
    dense(np.ones((2, 4), "float32"))
    assert dense.kernel is kernel and len(dense.variables) == 2


def test_batch_normalization_builds_from_a_tuple_as_keras():
    ours = layers.BatchNormalization()
    ours.build((None, 4))
    theirs = keras.layers.BatchNormalization()
    theirs.build((None, 4))
    assert ours.built
    assert [tuple(v.shape) for v in ours.variables] == [tuple(w.shape) for w in theirs.weights]
    assert len(ours.trainable_variables) == 2 and len(ours.non_trainable_variables) == 2


def test_a_layer_with_several_inputs_builds_from_a_list_of_tuples():
    concat = layers.Concatenate()
    concat.build([(None, 3), (None, 2)])
    assert concat.built
    assert concat([np.ones((1, 3)), np.ones((1, 2))]).shape == (1, 5)


def test_a_user_layer_is_built_once():
    class Scale(gf.Layer):
        def build(self, input_shape):
            self.builds = getattr(self, "builds", 0) + 1
            self.scale = self.add_weight("scale", (input_shape[-1],), initializer="ones")

        def call(self, x, training=False):
            return x * self.scale

    layer = Scale(name="scale")
    layer.build((None, 2))
    layer(np.ones((3, 2), "float32"))
    assert layer.builds == 1 and layer.built


def test_a_bad_shape_is_refused_with_what_to_pass():
    with pytest.raises(ValueError, match=r"input_shape must be a tuple such as \(None, 4\)"):
        layers.Dense(2).build("four")
