"""An image folder's splits are datasets graphfit batches with training.batch_size itself:
a recipe giving batch_size (recipes/shapes_images.yaml does) prepares; only a user's
data.function returning a batched dataset must leave batch_size out."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from graphfit.recipes import recipe_from_text
from graphfit.recipes.running import runner

RECIPE = """
data: {source: image_folder, path: %s, image_size: [8, 8]}
model:
  layers: [{type: Flatten}, {type: Dense, units: 2}]
loss: {type: SparseCategoricalCrossentropy, from_logits: true}
optimizer: {type: SGD, learning_rate: 0.1}
training: {epochs: 1, batch_size: 4, validation_split: 0.25, test_split: 0}
"""


def test_an_image_folder_recipe_with_a_batch_size_prepares(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        for index in range(4):
            pixels = np.full((8, 8, 3), 60 * index, np.uint8)
            tf.io.write_file(str(tmp_path / name / f"{index}.png"), tf.io.encode_png(pixels))
    prepared = runner.prepare(recipe_from_text(RECIPE % tmp_path, "images.yaml"))
    assert prepared.recipe.config["training"]["batch_size"] == 4
    x, _ = next(iter(prepared.splits.train))
    assert x.shape == (4, 8, 8, 3)
