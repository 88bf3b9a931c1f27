"""Rows given by column name are put in the order the model reads them."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

import graphfit as gf
from graphfit import layers
from graphfit.export import Preprocessing, serving_call


def test_named_columns_in_any_order(tmp_path):
    model = gf.Sequential([layers.Dense(1, kernel_initializer="ones")])
    model.build((None, 3))
    model.layers[0].kernel.assign([[1.0], [10.0], [100.0]])
    prep = Preprocessing(mean=np.array([0.0, 0.0, 1.0]), std=np.array([1.0, 2.0, 1.0]),
                         feature_names=("age", "weight", "height"))
    loaded = tf.saved_model.load(model.export(str(tmp_path / "m"), preprocessing=prep))
    assert [n.decode() for n in loaded.feature_names.numpy()] == ["age", "weight", "height"]
    rows = [{"height": 3.0, "age": 1.0, "weight": 4.0}, {"weight": 0.0, "height": 1.0,
                                                         "age": 2.0}]
    # (age, (weight - 0) / 2, height - 1) . (1, 10, 100)
    expected = [[1.0 + 20.0 + 200.0], [2.0 + 0.0 + 0.0]]
    np.testing.assert_allclose(serving_call(loaded, {"instances": rows})["outputs"], expected)
    columns = {"weight": [4.0, 0.0], "age": [1.0, 2.0], "height": [3.0, 1.0]}
    np.testing.assert_allclose(serving_call(loaded, {"inputs": columns})["outputs"], expected)
