"""`graphfit plot` and `graphfit export` on a finished run, and the plots a run ends with."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import cli


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A small classifier run, trained with the end-of-run plots on."""
    recipe = gf.recipes.recipe_from_text(
        "data: {source: moons, n_samples: 200}\n"
        "model: [{type: Dense, units: 8, activation: relu, name: hidden}, "
        "{type: Dense, units: 1}]\n"
        "loss: {type: BinaryCrossentropy, from_logits: true}\n"
        "metrics: [accuracy]\n"
        "training: {epochs: 2, validation_split: 0.2, test_split: 0.2}\n",
        "moons.yaml", default_name="moons")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GRAPHFIT_PLOTS", "1")
        result = gf.recipes.train(recipe, run_dir=str(tmp_path_factory.mktemp("cli") / "run"),
                                  verbose=0)
    return result


def test_a_run_ends_with_its_plots(run):
    for name in ("learning_curves.png", "confusion_matrix.png"):
        assert os.path.getsize(os.path.join(run.run_dir, name)) > 1000, name


def test_plot_command(run, tmp_path, capsys):
    assert cli.main(["plot", run.run_dir, "--output", str(tmp_path / "one")]) == 0
    assert (tmp_path / "one" / "learning_curves.png").is_file()
    assert cli.main(["plot", run.run_dir, run.run_dir, "--output", str(tmp_path / "two")]) == 0
    assert (tmp_path / "two" / "comparison_loss.png").is_file()
    assert cli.main(["plot", str(tmp_path)]) == 2  # not a run directory
    assert "graphfit" in capsys.readouterr().err


def test_export_command(run, tmp_path, capsys):
    out = tmp_path / "served"
    assert cli.main(["export", run.run_dir, "--output", str(out), "--layer", "hidden"]) == 0
    assert f"to {out}" in capsys.readouterr().out
    loaded = tf.saved_model.load(str(out))
    assert sorted(loaded.signatures) == ["classify", "hidden", "predict", "serving_default"]
    x = np.array([[0.5, -0.2], [1.5, 0.3]], np.float32)
    logits = run.model.predict(x, verbose=0)
    np.testing.assert_allclose(loaded.signatures["predict"](x=x)["outputs"], logits, atol=1e-6)
    assert cli.main(["export", run.run_dir, "--output", str(out)]) == 2  # never overwrites
    assert "never overwrites" in capsys.readouterr().err
    assert cli.main(["export", run.run_dir, "--output", str(tmp_path / "b"),
                     "--layer", "hiden"]) == 2
    assert "no layer named 'hiden'" in capsys.readouterr().err
