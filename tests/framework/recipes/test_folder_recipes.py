"""The image-folder and sensor time-series recipes train to known numbers; their augmentation
runs in training only; predict speaks class names (images) and cuts windows (series); the
export takes decoded images; bad folders and columns are refused at validation."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from graphfit import cli
from graphfit.datasets import read_timeseries
from graphfit.datasets.image_folder import image_files, load_images
from graphfit.recipes import load_recipe, recipe_from_text
from graphfit.recipes.running import training_run
from graphfit.recipes.running.data_loading import Standardizer, load_splits

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
RECIPES = os.path.join(REPO, "recipes")


@pytest.fixture(scope="module")
def shapes_run(tmp_path_factory):
    recipe = load_recipe(os.path.join(RECIPES, "shapes_images.yaml"))
    return training_run.train(recipe, run_dir=str(tmp_path_factory.mktemp("shapes") / "run"),
                              verbose=0)


@pytest.fixture(scope="module")
def sensor_run(tmp_path_factory):
    recipe = load_recipe(os.path.join(RECIPES, "sensor_timeseries.yaml"))
    return training_run.train(recipe, run_dir=str(tmp_path_factory.mktemp("sensor") / "run"),
                              verbose=0)


def _read(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_shapes_recipe_learns_the_shapes_and_records_its_classes(shapes_run):
    assert shapes_run.metrics["test"]["accuracy"] >= 0.9
    assert shapes_run.metrics["val"]["accuracy"] >= 0.9
    record = json.load(open(os.path.join(shapes_run.run_dir, "preprocessing.json")))
    assert record["class_names"] == ["circle", "square", "triangle"]
    assert record["image_folder"]["files"] == {"train": 144, "val": 48, "test": 48}
    assert record["input_shape"] == [32, 32, 3]


def test_split_by_file_is_deterministic_and_disjoint():
    config = load_recipe(os.path.join(RECIPES, "shapes_images.yaml")).config

    def digests(seed):
        splits = load_splits({**config, "seed": seed})
        return [{hashlib.sha1(image.tobytes()).hexdigest() for x, _ in data.as_numpy_iterator()
                 for image in x} for data in (splits.train, splits.val, splits.test)]

    first, again, other = digests(0), digests(0), digests(1)
    assert first == again and first != other
    assert [len(part) for part in first] == [144, 48, 48]  # 240 distinct images
    assert not (first[0] & first[1] or first[0] & first[2] or first[1] & first[2])


def test_augmentation_runs_in_training_only(shapes_run):
    model = shapes_run.model
    config = load_recipe(os.path.join(RECIPES, "shapes_images.yaml")).config
    test = load_splits(config).test
    x = next(iter(test))[0]
    once, twice = model.predict(x, verbose=0), model.predict(x, verbose=0)
    np.testing.assert_array_equal(once, twice)
    assert model.evaluate(test, verbose=0) == model.evaluate(test, verbose=0)
    inference = model(x, training=False).numpy()
    np.testing.assert_allclose(inference, once, rtol=1e-5, atol=1e-5)
    first, second = model(x, training=True).numpy(), model(x, training=True).numpy()
    assert not np.allclose(first, second) and not np.allclose(first, inference)


def test_confusion_matrix_labels_of_an_image_split(shapes_run, monkeypatch):
    from graphfit import plots

    monkeypatch.setenv("GRAPHFIT_PLOTS", "1")
    test = load_splits(load_recipe(os.path.join(RECIPES, "shapes_images.yaml")).config).test
    true, predicted = plots.labels_of_split(shapes_run.model, test)
    x = np.concatenate([batch for batch, _ in test.as_numpy_iterator()])
    np.testing.assert_array_equal(true, np.concatenate([y for _, y in test.as_numpy_iterator()]))
    np.testing.assert_array_equal(predicted, shapes_run.model.predict(x, verbose=0).argmax(1))


def test_predict_an_image_folder_and_file_writes_class_names(shapes_run, tmp_path, capsys):
    folder = os.path.join(RECIPES, "data", "shapes", "triangle")
    output = tmp_path / "predictions.csv"
    capsys.readouterr()
    assert cli.main(["predict", shapes_run.run_dir, "--input", folder,
                     "--output", str(output)]) == 0
    printed = capsys.readouterr().out
    assert "triangle_000.png: triangle" in printed
    rows = _read(output)
    assert list(rows[0])[:3] == ["file", "class", "class_name"] and len(rows) == 80
    assert sum(row["class_name"] == "triangle" for row in rows) >= 72
    files = image_files(folder)
    expected = tf.nn.softmax(shapes_run.model.predict(load_images(files, (32, 32)), verbose=0))
    got = np.array([[float(row[f"probability_{name}"]) for name in ("circle", "square", "triangle")]
                    for row in rows])
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-5, atol=1e-6)
    single = tmp_path / "one.csv"
    assert cli.main(["predict", shapes_run.run_dir, "--input", files[0],
                     "--output", str(single)]) == 0
    assert _read(single)[0]["probability_circle"] == rows[0]["probability_circle"]
    (tmp_path / "nothing").mkdir()
    assert cli.main(["predict", shapes_run.run_dir, "--input", str(tmp_path / "nothing"),
                     "--output", str(tmp_path / "none.csv")]) == 2
    assert "nothing holds no image files (.bmp .gif .jpeg .jpg .png)" in capsys.readouterr().err


def test_export_takes_decoded_images_and_image_files(shapes_run, tmp_path):
    from graphfit.export import export_run

    path = export_run(shapes_run.run_dir, str(tmp_path / "exported"))
    loaded = tf.saved_model.load(path)  # plain TensorFlow
    files = image_files(os.path.join(RECIPES, "data", "shapes", "circle"))[:3] + \
        image_files(os.path.join(RECIPES, "data", "shapes", "triangle"))[:2]
    images = load_images(files, (32, 32))
    expected = shapes_run.model.predict(images, verbose=0)
    served = loaded.signatures["serving_default"](x=tf.constant(images))["outputs"]
    np.testing.assert_allclose(served.numpy(), expected, rtol=1e-5, atol=1e-5)
    encoded = [open(file, "rb").read() for file in files]
    from_files = loaded.signatures["predict_images"](images=tf.constant(encoded))
    np.testing.assert_allclose(from_files["outputs"].numpy(), expected, rtol=1e-5, atol=1e-5)
    assert from_files["class_name"].numpy().tolist() == [
        b"circle", b"circle", b"circle", b"triangle", b"triangle"]
    # A REST body gives the files' bytes as TF Serving does: {"b64": ...}, by rows or columns.
    import base64

    from graphfit.export import serving_call

    coded = [{"b64": base64.b64encode(data).decode()} for data in encoded]
    for body in ({"instances": coded, "signature_name": "predict_images"},
                 {"inputs": {"images": coded}, "signature_name": "predict_images"}):
        np.testing.assert_allclose(serving_call(loaded, body)["outputs"], expected, rtol=1e-5,
                                   atol=1e-5)
    with pytest.raises(ValueError, match=r'a \{"b64": ...\} value is not valid base64'):
        serving_call(loaded, {"instances": [{"b64": "not base64!"}],
                              "signature_name": "predict_images"})


def test_sensor_recipe_forecasts_to_the_noise_and_predicts_windows(sensor_run, tmp_path):
    # the log's noise has std 0.2 (MAE 0.16); "the next value is the last one" scores 0.38
    assert sensor_run.metrics["test"]["mae"] < 0.3
    log = tmp_path / "log.csv"
    with open(os.path.join(RECIPES, "data", "sensor.csv")) as handle:
        log.write_text("".join(handle.readlines()[:61]))  # the header and 60 rows
    output = tmp_path / "forecast.csv"
    assert cli.main(["predict", sensor_run.run_dir, "--input", str(log),
                     "--output", str(output)]) == 0
    rows = _read(output)
    assert [row["last_row"] for row in rows] == [str(n) for n in range(24, 61)]
    series = read_timeseries(log, target="temperature", time_column="time", window=24,
                             horizon=0)
    record = json.load(open(os.path.join(sensor_run.run_dir, "preprocessing.json")))
    windows = Standardizer.from_json(record["standardize"])(series.windows()[0])
    expected = sensor_run.model.predict(windows, verbose=0)[:, 0]
    np.testing.assert_allclose([float(r["prediction"]) for r in rows], expected, rtol=1e-5)
    # each forecast is the temperature one row after its window, to about the noise
    actual = series.target[24:]
    assert np.abs(expected[:-1] - actual).mean() < 0.4


IMAGES = """
data: {{source: image_folder, path: {path}, image_size: [8, 8], on_corrupt: {mode}}}
model: [{{type: Flatten}}, {{type: Dense, units: 2}}]
loss: {{type: SparseCategoricalCrossentropy, from_logits: true}}
training: {{epochs: 1, validation_split: 0, test_split: 0}}
"""


def test_bad_folders_and_columns_are_refused_at_validation(tmp_path, capsys):
    one = tmp_path / "one" / "cats"
    one.mkdir(parents=True)
    (tmp_path / "one.yaml").write_text(IMAGES.format(path="one", mode="fail"))
    assert cli.main(["validate", str(tmp_path / "one.yaml")]) == 2
    assert "has 1 class subfolder(s) (cats); an image folder needs" in capsys.readouterr().err
    (tmp_path / "series.yaml").write_text(
        f"data: {{source: timeseries, path: {os.path.join(RECIPES, 'data', 'sensor.csv')}, "
        f"target: temprature}}\nmodel: [{{type: Flatten}}, {{type: Dense, units: 1}}]\n"
        f"loss: mse\n")
    assert cli.main(["validate", str(tmp_path / "series.yaml")]) == 2
    assert "no column 'temprature' in the file; did you mean 'temperature'?" in \
        capsys.readouterr().err


def test_a_corrupt_image_fails_the_run_or_is_skipped_and_counted(tmp_path, capsys):
    for name in ("circle", "square"):
        shutil.copytree(os.path.join(RECIPES, "data", "shapes", name), tmp_path / "f" / name,
                        ignore=lambda folder, files: sorted(files)[6:])
    (tmp_path / "f" / "square" / "zz_broken.png").write_bytes(b"\x89PNG\r\n\x1a\ntruncated")
    for mode in ("fail", "skip"):
        (tmp_path / f"{mode}.yaml").write_text(IMAGES.format(path="f", mode=mode))
    assert cli.main(["train", str(tmp_path / "fail.yaml"), "--run-dir", str(tmp_path / "r1"),
                     "--verbose", "0"]) == 2
    error = capsys.readouterr().err
    assert "zz_broken.png cannot be decoded" in error and "on_corrupt: skip" in error
    assert not (tmp_path / "r1").exists()
    recipe = recipe_from_text((tmp_path / "skip.yaml").read_text(), str(tmp_path / "skip.yaml"),
                              base_dir=str(tmp_path))
    run = training_run.train(recipe, run_dir=str(tmp_path / "r2"), verbose=0)
    assert "skipped 1 corrupt image(s) of 13" in capsys.readouterr().err
    record = json.load(open(os.path.join(run.run_dir, "preprocessing.json")))
    assert record["image_folder"]["skipped"] == [str(tmp_path / "f" / "square" /
                                                     "zz_broken.png")]
    assert record["image_folder"]["files"]["train"] == 12
    # predict skips (and counts) the corrupt file as training did (the run's on_corrupt)
    assert cli.main(["predict", run.run_dir, "--input", str(tmp_path / "f"),
                     "--output", str(tmp_path / "p.csv")]) == 0
    assert "skipped 1 corrupt image(s) of 13 (data.on_corrupt: skip)" in capsys.readouterr().err
    rows = _read(tmp_path / "p.csv")
    assert len(rows) == 12 and "square/zz_broken.png" not in {row["file"] for row in rows}
    # a separate validation folder must have the same classes and image shape
    (tmp_path / "val.yaml").write_text(IMAGES.format(path="f", mode="skip").replace(
        "test_split: 0}", "test_split: 0, validation_data: {source: image_folder, path: f, "
                          "image_size: [4, 4], on_corrupt: skip}}"))
    assert cli.main(["validate", str(tmp_path / "val.yaml")]) == 2
    assert "validation_data: the validation images must have the training folder's classes " \
           "and image shape: ['circle', 'square'] [4, 4, 3] differ from ['circle', 'square'] " \
           "[8, 8, 3]" in capsys.readouterr().err


@pytest.mark.parametrize("name, arguments", [
    ("RandomFlip", {}), ("RandomRotation", {"factor": 0.2}), ("RandomZoom", {"height_factor": 0.3}),
    ("RandomTranslation", {"height_factor": 0.2, "width_factor": 0.2}),
    ("RandomContrast", {"factor": 0.5}), ("RandomBrightness", {"factor": 0.3})])
def test_keras_augmentation_layers_change_images_in_training_only(name, arguments):
    from graphfit.recipes.reading.keras_layers import build_keras_layer

    layer = build_keras_layer(f"keras.{name}", seed=1, **arguments)
    x = tf.constant(np.random.default_rng(0).uniform(0, 255, (4, 8, 8, 3)), tf.float32)
    np.testing.assert_array_equal(layer(x, training=False), x)
    first, second = layer(x, training=True), layer(x, training=True)
    assert not np.allclose(first, x) and not np.allclose(first, second)


def test_keras_resizing_and_center_crop_resize_in_every_mode():
    from graphfit.recipes.reading.keras_layers import build_keras_layer

    x = tf.constant(np.random.default_rng(0).uniform(0, 255, (2, 8, 6, 3)), tf.float32)
    resizing = build_keras_layer("keras.Resizing", height=4, width=5)
    expected = tf.image.resize(x, (4, 5)).numpy()
    for training in (False, True):
        np.testing.assert_allclose(resizing(x, training=training), expected, rtol=1e-6)
    cropped = build_keras_layer("keras.CenterCrop", height=4, width=4)(x, training=True)
    np.testing.assert_array_equal(cropped, x[:, 2:6, 1:5])
