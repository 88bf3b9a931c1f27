"""End to end: the plots of a real recipe run (history.json, logs/ and the trained model)."""

import json
import os
import shutil

import numpy as np
import pytest

import graphfit as gf
from graphfit import plots

from .conftest import png_size


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    recipe = gf.recipes.recipe_from_text(
        "data: {source: moons, n_samples: 200}\n"
        "model: [{type: Dense, units: 8, activation: relu}, {type: Dense, units: 1}]\n"
        "loss: {type: BinaryCrossentropy, from_logits: true}\n"
        "metrics: [accuracy]\n"
        "training: {epochs: 3, validation_split: 0.2, test_split: 0.2}\n",
        "moons.yaml", default_name="moons")
    return gf.recipes.train(recipe, run_dir=str(tmp_path_factory.mktemp("plots") / "run"),
                            verbose=0)


def test_plot_run_draws_curves_and_confusion_matrix(run, figures):
    x, y = gf.datasets.make_moons(60, seed=5)
    paths = plots.plot_run(run.run_dir, run.model, (x, y))
    assert [os.path.basename(p) for p in paths] == ["learning_curves.png",
                                                    "confusion_matrix.png"]
    assert all(min(png_size(p)) > 200 for p in paths)
    with open(os.path.join(run.run_dir, "history.json")) as handle:
        history = json.load(handle)
    curves = plots.learning_curves(run.run_dir)
    assert curves.data["loss"]["train"] == ([1, 2, 3], history["loss"])
    assert curves.data["accuracy"]["val"] == ([1, 2, 3], history["val_accuracy"])
    assert curves.data["loss"]["test"] == ([3], history["test_loss"])
    assert len(figures["learning_curves.png"].axes) == 2  # loss, accuracy
    # The colours TensorBoard gives this run's own train / val / test runs.
    palette = plots.stage_colors(os.path.join(run.run_dir, "logs"))
    lines = {line.get_label(): line.get_color()
             for line in figures["learning_curves.png"].axes[0].get_lines()}
    assert lines["train"] == palette["train"] and lines["test"] == palette["test"]
    predicted = (run.model.predict(x, verbose=0).reshape(-1) > 0).astype(int)
    expected = [[int(np.sum((y == t) & (predicted == p))) for p in (0, 1)] for t in (0, 1)]
    counts = figures["confusion_matrix.png"].axes[0].texts
    assert [int(t.get_text()) for t in counts] == [c for row in expected for c in row]


def test_plot_command_one_run_and_several(run, tmp_path):
    single = plots.plot_command([run.run_dir], output=str(tmp_path / "one"))
    assert single == [str(tmp_path / "one" / "learning_curves.png")]
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(os.path.join(run.run_dir, "history.json"), other / "history.json")
    written = plots.plot_command([run.run_dir, str(other)], output=str(tmp_path / "cmp"))
    assert sorted(os.path.basename(p) for p in written) == ["comparison_accuracy.png",
                                                             "comparison_loss.png"]
