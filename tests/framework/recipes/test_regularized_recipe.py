"""A recipe with weight regularizers, constraints and class weights trains from the command
line, and its history and TensorBoard runs show the regularization loss apart from the total."""

from __future__ import annotations

import json

import numpy as np
import tensorflow as tf

from graphfit import cli
from graphfit.recipes import load_run

RECIPE = """\
data: {source: moons, n_samples: 200}
model:
  - type: Dense
    units: 8
    activation: tanh
    kernel_regularizer: l2
    bias_regularizer: {type: L1, l1: 0.001}
    kernel_constraint: {type: MaxNorm, max_value: 0.5}
  - {type: Dense, units: 1, kernel_regularizer: {type: L1L2, l1: 0.0, l2: 0.01},
     kernel_constraint: non_neg}
loss: {type: BinaryCrossentropy, from_logits: true}
optimizer: {type: Adam, learning_rate: 0.05}
training: {epochs: 3, batch_size: 32, class_weight: {0: 1.0, 1: 3.0}}
"""


def _scalars(folder, tag) -> list[float]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder))
    events.Reload()
    if tag not in events.Tags()["tensors"]:
        return []
    return [float(tf.make_ndarray(event.tensor_proto)) for event in events.Tensors(tag)]


def test_regularized_and_constrained_recipe_trains_from_the_cli(tmp_path):
    recipe = tmp_path / "regularized.yaml"
    recipe.write_text(RECIPE)
    run = tmp_path / "run"
    assert cli.main(["train", str(recipe), "--run-dir", str(run), "--verbose", "0"]) == 0
    history = json.loads((run / "history.json").read_text())
    assert len(history["regularization_loss"]) == 3
    assert all(0 < r < total for r, total in zip(history["regularization_loss"],
                                                  history["loss"]))
    train = _scalars(run / "logs" / "train", "regularization_loss")
    assert len(train) == 3 and np.allclose(train, history["regularization_loss"], rtol=1e-5)
    prepared, _ = load_run(str(run), data=False)
    model = prepared.model
    hidden, output = model.layers[0].kernel.numpy(), model.layers[1].kernel.numpy()
    assert np.all(np.linalg.norm(hidden, axis=0) <= 0.5 + 1e-6)  # MaxNorm per unit
    assert np.all(output >= 0)
