"""Recipes with the convolution layers: a causal Conv1D forecaster on noisy sine windows and a
Conv2D -> Conv2DTranspose encoder-decoder on the digits images validate, train one epoch from
the command line, and `graphfit inspect` counts their FLOPs."""

from __future__ import annotations

import json

import pytest

from graphfit import cli

CONV1D = """\
seed: 0
data: {source: sine_sequences, n_samples: 200, steps: 12}
model:
  layers:
    - {type: Conv1D, filters: 8, kernel_size: 3, padding: causal, dilation_rate: 2,
       activation: relu}
    - {type: SeparableConv1D, filters: 8, kernel_size: 3, strides: 2}
    - {type: Flatten}
    - {type: Dense, units: 1}
loss: mse
optimizer: {type: Adam, learning_rate: 0.01}
training: {epochs: 1, batch_size: 32}
"""

CONV2D_TRANSPOSE = """\
seed: 0
data: {source: digits, as_images: true}
model:
  layers:
    - {type: Conv2D, filters: 8, kernel_size: 3, strides: 2, padding: same, groups: 1,
       activation: relu}
    - {type: DepthwiseConv2D, kernel_size: 3, padding: same, depth_multiplier: 2}
    - {type: Conv2DTranspose, filters: 8, kernel_size: 4, strides: 2, padding: same,
       activation: relu, kernel_regularizer: l2}
    - {type: GlobalAveragePooling2D}
    - {type: Dense, units: 10}
loss: {type: SparseCategoricalCrossentropy, from_logits: true}
metrics: [accuracy]
optimizer: {type: Adam, learning_rate: 0.01}
training: {epochs: 1, batch_size: 128}
"""


@pytest.mark.parametrize("text", [CONV1D, CONV2D_TRANSPOSE], ids=["conv1d", "conv2d_transpose"])
def test_convolution_recipe_validates_trains_and_inspects(tmp_path, text, capsys):
    recipe = tmp_path / "conv.yaml"
    recipe.write_text(text)
    assert cli.main(["validate", str(recipe)]) == 0
    run = tmp_path / "run"
    assert cli.main(["train", str(recipe), "--run-dir", str(run), "--verbose", "0"]) == 0
    history = json.loads((run / "history.json").read_text())
    assert len(history["loss"]) == 1 and history["loss"][0] > 0
    capsys.readouterr()
    assert cli.main(["inspect", str(recipe)]) == 0
    report = capsys.readouterr().out
    assert "FLOPs" in report


def test_a_bad_convolution_argument_is_a_positioned_recipe_problem(tmp_path, capsys):
    recipe = tmp_path / "bad.yaml"
    recipe.write_text(CONV1D.replace("padding: causal", "padding: causal, groups: 3"))
    assert cli.main(["validate", str(recipe)]) != 0
    assert "filters must be divisible by groups" in capsys.readouterr().err
