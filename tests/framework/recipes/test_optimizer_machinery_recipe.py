"""A recipe's optimizer takes Keras's base arguments (use_ema, gradient_accumulation_steps),
validates and trains from the command line, with SwapEMAWeights among its callbacks; a typo in
them is caught by `graphfit validate`."""

from __future__ import annotations

import json

import numpy as np

from graphfit import cli
from graphfit.recipes import load_run

# Without XLA: its compiles (four runs here) would be most of the time, and what is checked is
# how the recipe's optimizer arguments and SwapEMAWeights reach the run and its resume.
RECIPE = """\
data: {source: moons, n_samples: 64}
model:
  - {type: Dense, units: 4, activation: tanh}
  - {type: Dense, units: 1}
loss: {type: BinaryCrossentropy, from_logits: true}
optimizer: {type: Adam, learning_rate: 0.05, use_ema: true, gradient_accumulation_steps: 2}
training: {epochs: 2, batch_size: 16, jit_compile: false}
callbacks: [{type: SwapEMAWeights}]
"""


def test_recipe_with_ema_and_accumulation_validates_and_trains(tmp_path, capsys):
    recipe = tmp_path / "ema.yaml"
    recipe.write_text(RECIPE)
    assert cli.main(["validate", str(recipe)]) == 0
    run = tmp_path / "run"
    assert cli.main(["train", str(recipe), "--run-dir", str(run), "--verbose", "0"]) == 0
    assert len(json.loads((run / "history.json").read_text())["loss"]) == 2
    prepared, _ = load_run(str(run), data=False)
    optimizer = prepared.model.optimizer
    assert optimizer.use_ema and optimizer.gradient_accumulation_steps == 2
    typo = tmp_path / "typo.yaml"
    typo.write_text(RECIPE.replace("use_ema: true", "use_emma: true"))
    capsys.readouterr()
    assert cli.main(["validate", str(typo)]) != 0
    assert "use_ema" in capsys.readouterr().err
    assert np.isfinite(json.loads((run / "history.json").read_text())["loss"]).all()


def test_swap_on_epoch_run_resumes_as_an_uninterrupted_one(tmp_path):
    """The run checkpoints are written after SwapEMAWeights(swap_on_epoch=True) has put the
    averages in the model; a resumed run swaps them back, as the uninterrupted one does."""
    recipe = tmp_path / "swap.yaml"
    recipe.write_text(RECIPE.replace(", gradient_accumulation_steps: 2", "").replace(
        "{type: SwapEMAWeights}", "{type: SwapEMAWeights, swap_on_epoch: true}"))
    whole, part = tmp_path / "whole", tmp_path / "part"
    quiet = ["--verbose", "0"]
    assert cli.main(["train", str(recipe), "--run-dir", str(whole), *quiet,
                     "--set", "training.epochs=3"]) == 0
    assert cli.main(["train", str(recipe), "--run-dir", str(part), *quiet,
                     "--set", "training.epochs=1"]) == 0
    assert cli.main(["train", "--resume", str(part), *quiet, "--set", "training.epochs=3"]) == 0
    losses = [json.loads((run / "history.json").read_text())["loss"] for run in (whole, part)]
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-6)
