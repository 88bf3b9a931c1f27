"""The shipped graph recipe (recipes/graph_classes.yaml) learns the eight structural classes:
`graphfit train` at a small size reaches >= 0.90 test accuracy, and `graphfit predict` on new
graphs (a GraphSet .npz) gives one row per graph, classified as well."""

import csv
import json
import os

import numpy as np
import pytest

from graphfit import cli
from graphfit.datasets import GRAPH_CLASSES, make_graph_classes
from graphfit.recipes import load_recipe
from graphfit.recipes.running import training_run

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RECIPE = os.path.join(REPO, "recipes", "graph_classes.yaml")
# Small: 240 graphs (48 test graphs, 6 per class), 5 epochs; XLA off (its compile time is not
# what this test is about; tests/framework/training/test_graph_feeds.py covers XLA).
SMALL = ["data.n_graphs=240", "training.epochs=5", "training.jit_compile=false"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    recipe = load_recipe(RECIPE, SMALL)
    return training_run.train(recipe, run_dir=str(tmp_path_factory.mktemp("graphs") / "run"),
                              verbose=0)


def test_small_graph_recipe_reaches_090_test_accuracy(run):
    metrics = json.loads(open(os.path.join(run.run_dir, "metrics.json")).read())
    assert metrics["test"]["accuracy"] >= 0.90, metrics
    assert len(run.history["loss"]) == 5
    assert run.history["loss"][-1] < run.history["loss"][0]
    # The model reads graph batches: index inputs int32, one output row per graph.
    spec = run.model.built_input_spec
    assert spec["graph_index"].dtype.name == "int32" and spec["senders"].dtype.name == "int32"


def test_predict_classifies_new_graphs_one_row_each(run, tmp_path):
    graphs, labels = make_graph_classes(24, seed=7, features="one_hot_degree")  # unseen seed
    graphs.save_npz(tmp_path / "new.npz")
    output = tmp_path / "predictions.csv"
    assert cli.main(["predict", run.run_dir, "--input", str(tmp_path / "new.npz"),
                     "--output", str(output)]) == 0
    with open(output, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(graphs)
    assert len([k for k in rows[0] if k.startswith("probability_")]) == len(GRAPH_CLASSES)
    predicted = np.array([int(row["class"]) for row in rows])
    assert np.mean(predicted == labels) >= 0.90, (predicted, labels)
