"""A recipe's MultiOptimizer (written as its `get_config()`): it validates and trains from the
command line with each layer under its own optimizer, and `graphfit validate` checks every
inner optimizer and pattern, pointing at the line and column of each problem."""

from __future__ import annotations

import json

from graphfit import cli
from graphfit.recipes import load_run

RECIPE = """\
data: {source: moons, n_samples: 64}
model:
  - {type: Dense, units: 4, activation: tanh, name: dense_1}
  - {type: Dense, units: 1, name: dense_2}
loss: {type: BinaryCrossentropy, from_logits: true}
optimizer:
  type: MultiOptimizer
  optimizer_map:
    default_optimizer: {type: SGD, learning_rate: 0.1, momentum: 0.9}
    optimizer_map:
      ".*dense_1/.*": {type: Adam, learning_rate: 0.01}
training: {epochs: 2, batch_size: 16}
"""


def test_recipe_with_a_multi_optimizer_validates_and_trains(tmp_path, capsys):
    recipe = tmp_path / "multi.yaml"
    recipe.write_text(RECIPE)
    assert cli.main(["validate", str(recipe)]) == 0
    run = tmp_path / "run"
    assert cli.main(["train", str(recipe), "--run-dir", str(run), "--verbose", "0"]) == 0
    assert len(json.loads((run / "history.json").read_text())["loss"]) == 2
    prepared, _ = load_run(str(run), data=False)
    optimizer = prepared.model.optimizer
    assert [type(o).__name__ for o in optimizer.optimizers] == ["Adam", "SGD"]
    optimizer.build(prepared.model.trainable_variables)
    assert optimizer.optimizer_of(prepared.model.layers[0].kernel) is optimizer.optimizers[0]
    assert optimizer.optimizer_of(prepared.model.layers[1].kernel) is optimizer.optimizers[1]

    bad = tmp_path / "bad.yaml"
    bad.write_text(RECIPE.replace("momentum: 0.9", "momentum: -1")
                   .replace("learning_rate: 0.01}", "learning_rat: 0.01}")
                   .replace('".*dense_1/.*"', '"dense_1/(.*"'))
    capsys.readouterr()
    assert cli.main(["validate", str(bad)]) != 0
    err = capsys.readouterr().err
    assert f"{bad}:9:56: optimizer.optimizer_map.default_optimizer.momentum" in err
    assert f"{bad}:11:7: optimizer.optimizer_map.optimizer_map.dense_1/(.*: the key" in err
    assert "did you mean 'learning_rate'" in err

    nested = tmp_path / "nested.yaml"
    nested.write_text(RECIPE.replace("{type: Adam, learning_rate: 0.01}",
                                     "{type: LossScaleOptimizer, inner_optimizer: Adam}"))
    assert cli.main(["validate", str(nested)]) != 0
    assert "optimizer cannot be LossScaleOptimizer" in capsys.readouterr().err

    # Keras's re.fullmatch over the whole path ("sequential/dense_1/kernel"): a pattern that
    # two keys match is found before any step.
    clash = tmp_path / "clash.yaml"
    clash.write_text(RECIPE.replace('      ".*dense_1/.*"',
                                    '      ".*kernel": SGD\n      ".*dense_1/.*"'))
    assert cli.main(["validate", str(clash)]) != 0
    assert "Multiple optimizers assigned to variable" in capsys.readouterr().err
