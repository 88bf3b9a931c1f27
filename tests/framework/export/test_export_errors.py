"""What cannot be exported says why, names the layer, and leaves no files behind."""

from __future__ import annotations

import os

import numpy as np
import pytest

import graphfit as gf
from graphfit import layers
from graphfit.export import Preprocessing, export_model


def _doubled(x):
    return 2.0 * np.asarray(x)


@pytest.fixture(scope="module")
def regression():
    model = gf.Sequential([layers.Dense(2, name="hidden"), layers.Dense(1)])
    model.build((None, 3))
    model.compile(optimizer="sgd", loss="mse")
    return model


def test_a_black_box_layer_is_named(tmp_path):
    model = gf.Sequential([layers.Dense(2),
                           layers.BlackBox(_doubled, output_shape=2, name="simulator")])
    model.build((None, 3))
    with pytest.raises(ValueError, match="layer 'simulator' \\(BlackBox\\) runs Python code"):
        export_model(model, str(tmp_path / "out"))
    assert os.listdir(tmp_path) == []  # nothing half-written


def test_an_export_never_overwrites(regression, tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("data")
    with pytest.raises(ValueError, match="never overwrites"):
        regression.export(str(tmp_path / "taken"))
    assert (tmp_path / "taken" / "keep.txt").read_text() == "data"


def test_bad_requests_are_refused(regression, tmp_path):
    with pytest.raises(ValueError, match="not a classifier"):
        regression.export(str(tmp_path / "a"), classify=True)
    with pytest.raises(ValueError, match="cannot be called 'predict'"):
        regression.export(str(tmp_path / "b"), layers=["predict"])
    with pytest.raises(ValueError, match="no layer named 'hiden'"):
        regression.export(str(tmp_path / "c" / "deep" / "m"), layers=["hiden"])
    unbuilt = gf.Sequential([layers.Dense(1)])
    with pytest.raises(ValueError, match="export"):
        unbuilt.export(str(tmp_path / "d"))
    assert not any(name in os.listdir(tmp_path) for name in "abcd")


def test_standardization_of_a_graph_input_needs_that_input():
    prep = Preprocessing(mean=np.zeros(2), std=np.ones(2), input_name="node_features")
    with pytest.raises(ValueError, match="'node_features', which the model does not have"):
        prep.apply_to_inputs({"x": np.zeros((1, 2), np.float32)})
