"""Recipes take Keras's update rules by name (Keras's lower-case names too) with keyword
arguments: each family validates and trains one epoch from the command line.

One test, one process, a loop over the families: each run costs a model, a trace and a run
directory, so they share TensorFlow's start-up and stay eager (no XLA compile)."""

from __future__ import annotations

import json

from graphfit import cli
from graphfit.recipes import load_run

RECIPE = """\
data: {{source: moons, n_samples: 64}}
model:
  - {{type: Dense, units: 4, activation: tanh}}
  - {{type: Dense, units: 1}}
loss: {{type: BinaryCrossentropy, from_logits: true}}
optimizer: {optimizer}
callbacks:
  - {{type: ReduceLROnPlateau, monitor: loss, patience: 1}}
training: {{epochs: 1, batch_size: 32, jit_compile: false}}
"""

# One entry per family, non-default arguments included; lower-case names as Keras spells them.
OPTIMIZERS = {
    "AdamW": "{type: adamw, learning_rate: 0.01, weight_decay: 0.01, amsgrad: true}",
    "RMSprop": "{type: rmsprop, learning_rate: 0.01, momentum: 0.9, centered: true}",
    "Adagrad": "{type: Adagrad, learning_rate: 0.1, initial_accumulator_value: 0.2}",
    "Adadelta": "{type: adadelta, learning_rate: 1.0, rho: 0.9}",
    "Adamax": "{type: Adamax, learning_rate: 0.01, beta_1: 0.8}",
    "Nadam": "{type: nadam, learning_rate: 0.01, clipnorm: 1.0}",
    "Ftrl": "{type: ftrl, learning_rate: 0.1, l1_regularization_strength: 0.01, beta: 0.1}",
    "Lion": "{type: Lion, learning_rate: 0.001, weight_decay: 0.1}",
    "Lamb": "{type: lamb, learning_rate: 0.01, beta_2: 0.99}",
}


def test_each_update_rule_validates_and_trains_an_epoch_from_the_cli(tmp_path, capsys):
    for name, optimizer in OPTIMIZERS.items():
        recipe = tmp_path / f"{name}.yaml"
        recipe.write_text(RECIPE.format(optimizer=optimizer))
        assert cli.main(["validate", str(recipe)]) == 0, capsys.readouterr().err
        run = tmp_path / f"run_{name}"
        assert cli.main(["train", str(recipe), "--run-dir", str(run), "--verbose", "0"]) == 0, (
            name, capsys.readouterr().err)
        history = json.loads((run / "history.json").read_text())
        assert len(history["loss"]) == 1 and history["loss"][0] > 0, name
        prepared, _ = load_run(str(run), data=False)  # the run rebuilds the optimizer it used
        assert type(prepared.model.optimizer).__name__ == name
