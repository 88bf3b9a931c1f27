"""TF Serving REST bodies: rows given by column name are put in the order the model reads
them; malformed bodies are ValueErrors saying what is wrong."""

from __future__ import annotations

import numpy as np
import pytest
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


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    model = gf.Sequential([layers.Dense(1)])
    model.build((None, 3))
    path = model.export(str(tmp_path_factory.mktemp("bodies") / "m"))
    return tf.saved_model.load(path)


@pytest.mark.parametrize("body,message", [
    ([1, 2], "a request body is a JSON object"),
    ("[1, 2]", "a request body is a JSON object"),
    ("{oops", "not valid JSON"),
    ({"rows": []}, "exactly one of"),
    ({"instances": [{"foo": 1.0}]}, "instances\\[0\\] lacks the input\\(s\\) x"),
    ({"instances": [{"x": [1, 2, 3]}, [1, 2, 3]]}, "mix dicts and plain values"),
    ({"inputs": {"y": [[1, 2, 3]]}}, "must give the input x by name"),
    ({"inputs": []}, "no examples"),
    ({"instances": [[1.0, 2.0]]}, "takes \\(3,\\)"),
    ({"instances": [[1, 2, 3]], "signature_name": "classify"}, "no signature 'classify'"),
])
def test_malformed_bodies_are_value_errors(loaded, body, message):
    with pytest.raises(ValueError, match=message):
        serving_call(loaded, body)


SPECS = {"color": tf.TensorSpec([None], tf.string, "color"),
         "height": tf.TensorSpec([None], tf.float32, "height")}


def test_a_bad_cell_in_dict_rows_names_its_row_and_column():
    from graphfit.export import decode_arrays
    rows = [{"color": "red", "height": 5.0}, {"color": "red", "height": "tall"}]
    with pytest.raises(ValueError, match=r'instances\[1\]\["height"\]: .*float32.*tall'):
        decode_arrays({"instances": rows}, SPECS)


def test_a_misspelt_input_is_named_with_the_missing_one():
    from graphfit.export import decode_arrays
    with pytest.raises(ValueError, match="lacks the input\\(s\\) color.*unknown.*colour"):
        decode_arrays({"instances": [{"colour": "red", "height": 5.0}]}, SPECS)
