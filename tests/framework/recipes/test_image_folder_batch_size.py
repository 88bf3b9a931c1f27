"""An image folder's splits are datasets graphfit batches with training.batch_size itself:
a recipe giving batch_size (recipes/shapes_images.yaml does) prepares; only a user's
data.function returning a batched dataset must leave batch_size out."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from graphfit.recipes import recipe_from_text
from graphfit.recipes.running import runner, training_run

RECIPE = """
data: {source: image_folder, path: %s, image_size: [8, 8]}
model:
  layers: [{type: Flatten}, {type: Dense, units: 2}]
loss: {type: SparseCategoricalCrossentropy, from_logits: true}
optimizer: {type: SGD, learning_rate: 0.1}
training: {epochs: 1, batch_size: 4, validation_split: 0.25, test_split: 0}
"""


def test_an_image_folder_recipe_with_a_batch_size_trains_and_evaluates(tmp_path):
    folder = tmp_path / "images"
    for name in ("a", "b"):
        (folder / name).mkdir(parents=True)
        for index in range(4):
            pixels = np.full((8, 8, 3), 60 * index, np.uint8)
            tf.io.write_file(str(folder / name / f"{index}.png"), tf.io.encode_png(pixels))
    recipe = recipe_from_text(RECIPE % folder, "images.yaml")
    prepared = runner.prepare(recipe)
    assert prepared.recipe.config["training"]["batch_size"] == 4
    x, _ = next(iter(prepared.splits.train))
    assert x.shape == (4, 8, 8, 3)
    # batch_size 4 is not fit's default: fit must not be handed it with a dataset
    result = training_run.train(recipe_from_text(RECIPE % folder, "images.yaml"),
                                run_dir=str(tmp_path / "run"), verbose=0)
    assert len(result.history["loss"]) == 1 and "val" in result.metrics
    assert set(runner.evaluate_run(str(tmp_path / "run"))) == {"val"}
