"""Export formats: the shipped MLP and conv-net recipes' runs as SavedModel, TFLite (float32,
float16, dynamic range) and ONNX, each run in its own runtime (TensorFlow, LiteRT's
interpreter, onnxruntime) on real digits rows and compared with graphfit's `predict`; TF
Serving's layout with a warm-up file that TF Serving's own protos parse; what a format cannot
hold is named.

One module fixture trains each recipe for one epoch (without XLA: an export traces its own
signatures).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf

from graphfit import datasets
from graphfit.cli import serve_command
from graphfit.cli.main import main
from graphfit.export import formats, serving_layout
from graphfit.export.run_export import export_run_as
from graphfit.recipes import load_recipe
from graphfit.recipes.running import runner, training_run

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RECIPES = {"mlp": ("quickstart.yaml", False), "cnn": ("digits_cnn_batchnorm.yaml", True)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("format_runs")
    found = {}
    for key, (name, images) in RECIPES.items():
        recipe = load_recipe(os.path.join(REPO, "recipes", name),
                             ["training.epochs=1", "training.jit_compile=false"])
        run = str(folder / key)
        training_run.train(recipe, run_dir=run, verbose=0)
        x, _ = datasets.load_digits(as_images=images)
        model = runner.load_run(run, data=False)[0].model
        rows = np.asarray(x[:40], np.float32)
        found[key] = (run, rows, model.predict(rows, verbose=0))
    return found


@pytest.fixture(scope="module")
def mlp_tflite(runs, tmp_path_factory):
    """{quantize: check} of the MLP run's float32 and dynamic-range TFLite files, exported
    once for the format test and the size comparison."""
    run, rows, _ = runs["mlp"]
    folder = tmp_path_factory.mktemp("mlp_tflite")
    return {quantize: export_run_as(run, str(folder / f"{quantize}.tflite"), format="tflite",
                                    quantize=quantize, sample={"x": rows})
            for quantize in (None, "dynamic_range")}


@pytest.mark.parametrize("key,format,quantize", [
    *[(key, format, None) for key in RECIPES for format in ("saved_model", "tflite", "onnx")],
    ("mlp", "tflite", "float16"), ("mlp", "tflite", "dynamic_range"),
    ("cnn", "tflite", "dynamic_range")])
def test_each_format_answers_as_graphfit_predicts(runs, request, tmp_path, key, format,
                                                  quantize):
    run, rows, expected = runs[key]
    if (key, format) == ("mlp", "tflite") and quantize != "float16":
        check = request.getfixturevalue("mlp_tflite")[quantize]
    else:
        check = export_run_as(run, str(tmp_path / f"model.{format}"), format=format,
                              quantize=quantize, sample={"x": rows})
    assert check.passed and check.rows == 40
    tolerance = formats.TOLERANCES[check.format] * max(1.0, np.abs(expected).max())
    # Independently of the check: the file in its runtime against graphfit's predict.
    outputs = formats.run_export(check.path, format, {"x": rows})["outputs"]
    np.testing.assert_allclose(outputs, expected, atol=tolerance, rtol=0)
    if quantize is None:
        np.testing.assert_allclose(outputs, expected, atol=1e-4, rtol=0)


def test_quantization_makes_the_file_smaller(mlp_tflite):
    sizes = {q: os.path.getsize(check.path) for q, check in mlp_tflite.items()}
    assert sizes["dynamic_range"] < 0.6 * sizes[None]


def test_the_command_prints_its_check(runs, tmp_path, capsys):
    run = runs["cnn"][0]
    assert main(["export", run, "--format", "onnx", "--output", str(tmp_path / "m.onnx")]) == 0
    out = capsys.readouterr().out
    assert "onnx check: 32 rows through onnxruntime" in out and out.strip().endswith("ok")
    assert main(["export", run, "--format", "onnx", "--quantize", "float16"]) == 2
    assert "applies to the tflite format only" in capsys.readouterr().err
    assert main(["export", run, "--format", "onnx", "--output", str(tmp_path / "m.onnx")]) == 2
    assert "already exists" in capsys.readouterr().err
    np.savez(tmp_path / "rows.npz", x=runs["cnn"][1][:5])
    assert main(["export", run, "--format", "tflite", "--output", str(tmp_path / "m.tflite"),
                 "--sample", str(tmp_path / "rows.npz")]) == 0
    assert "tflite check: 5 rows" in capsys.readouterr().out
    assert main(["export", run, "--sample", str(tmp_path / "missing.npz")]) == 2
    assert "--sample" in capsys.readouterr().err
    assert serve_command.FORMATS == formats.FORMATS
    assert serve_command.QUANTIZATIONS == formats.QUANTIZATIONS


def test_serving_dir_numbers_versions_and_writes_a_warmup_file(runs, tmp_path, capsys):
    from tensorflow_serving.apis import prediction_log_pb2

    run, rows, expected = runs["mlp"]
    serving = tmp_path / "serving"
    assert main(["export", run, "--serving-dir", str(serving)]) == 0
    assert main(["export", run, "--serving-dir", str(serving)]) == 0
    assert "quickstart/2" in capsys.readouterr().out
    assert serving_layout.versions(str(serving / "quickstart")) == [1, 2]
    folder = serving / "quickstart" / "2"
    loaded = tf.saved_model.load(str(folder))
    np.testing.assert_allclose(loaded.signatures["serving_default"](x=rows)["outputs"],
                               expected, atol=1e-5)
    warmup = folder / "assets.extra" / "tf_serving_warmup_requests"
    records = [prediction_log_pb2.PredictionLog.FromString(r)
               for r in tf.data.TFRecordDataset(str(warmup)).as_numpy_iterator()]
    assert len(records) == 4
    request = records[0].predict_log.request
    assert request.model_spec.name == "quickstart"
    assert request.model_spec.signature_name == "serving_default"
    assert tf.make_ndarray(request.inputs["x"]).shape == (8, 64)
    read = serving_layout.read_warmup(str(folder))
    np.testing.assert_array_equal(read[0]["x"], tf.make_ndarray(request.inputs["x"]))
    with pytest.raises(ValueError, match="plain folder name"):
        export_run_as(run, serving_dir=str(serving), name="a/b")
    with pytest.raises(ValueError, match="without --output"):
        export_run_as(run, str(tmp_path / "x"), serving_dir=str(serving))


class _StringColumns(tf.Module):
    """Raw-column preprocessing with string ops: a lookup table, and optionally a hash."""

    def __init__(self, hashed: bool):
        super().__init__()
        self.hashed = hashed
        self.table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
            ["red", "green"], [0, 1], tf.string, tf.int64), -1)
        self.weights = tf.Variable([[1.0], [2.0], [3.0], [5.0]])

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="color"),
                                  tf.TensorSpec([None], tf.float32, name="age")])
    def serve(self, color, age):
        index = self.table.lookup(color) + 1
        if self.hashed:
            index += tf.strings.to_hash_bucket_fast(color, 2)
        return {"outputs": tf.matmul(tf.one_hot(index, 4), self.weights)[:, 0] + age}


def _string_saved_model(folder, hashed: bool) -> str:
    module = _StringColumns(hashed)
    path = str(folder / f"strings_{hashed}")
    tf.saved_model.save(module, path, signatures={"serving_default": module.serve})
    return path


def test_string_preprocessing_where_it_travels(tmp_path, capfd):
    """Lookup tables of string columns travel to TFLite (builtin hash-table ops); other
    string ops do not (Flex ops); tf2onnx converts neither: the ops are named. A TFLite
    refusal is one short message; the converter's MLIR dump goes to a log file, not the
    terminal (a reviewer's defect)."""
    inputs = {"color": np.array([b"green", b"blue"]), "age": np.array([1.0, 2.0], np.float32)}
    table = _string_saved_model(tmp_path, hashed=False)
    path = formats.convert_saved_model(table, str(tmp_path / "t.tflite"), "tflite")
    np.testing.assert_allclose(formats.run_export(path, "tflite", inputs)["outputs"],
                               [3.0 + 1.0, 1.0 + 2.0])
    with pytest.raises(ValueError, match="ONNX equivalent of the TensorFlow op.*"
                                         "LookupTableFindV2"):
        formats.convert_saved_model(table, str(tmp_path / "t.onnx"), "onnx")
    hashed = _string_saved_model(tmp_path, hashed=True)
    with pytest.raises(ValueError, match="builtin ops cannot hold the TensorFlow op.*"
                                         "StringToHashBucketFast"):
        formats.convert_saved_model(hashed, str(tmp_path / "h.tflite"), "tflite")
    printed = capfd.readouterr().err
    assert "loc(callsite" not in printed and "tf.StringToHashBucketFast" not in printed
    report = (tmp_path / "h.tflite.log").read_text()
    assert "ConverterError" in report and "'tf.StringToHashBucketFast' op is neither" in report
    assert not any(name.endswith((".onnx", ".partial")) for name in os.listdir(tmp_path))


def test_bad_arguments_are_named(runs, tmp_path):
    run = runs["mlp"][0]
    with pytest.raises(ValueError, match="format='pt': graphfit exports saved_model"):
        export_run_as(run, str(tmp_path / "a"), format="pt")
    with pytest.raises(ValueError, match="quantize='int4'"):
        export_run_as(run, str(tmp_path / "b"), format="tflite", quantize="int4")
    with pytest.raises(ValueError, match="--layer signatures exist in the SavedModel only"):
        export_run_as(run, str(tmp_path / "c"), format="onnx", layers=["dense"])
    with pytest.raises(ValueError, match="sample lacks the input"):
        export_run_as(run, str(tmp_path / "d"), format="onnx", sample={"y": np.zeros((1, 64))})
    assert os.listdir(tmp_path) == []


def test_model_export_takes_the_format(tmp_path):
    import graphfit as gf
    from graphfit import layers

    model = gf.Sequential([layers.Dense(4, activation="tanh"), layers.Dense(2)])
    model.build((None, 3))
    rows = np.random.default_rng(1).normal(size=(5, 3)).astype(np.float32)
    for format in ("tflite", "onnx"):
        path = model.export(str(tmp_path / f"m.{format}"), format=format)
        np.testing.assert_allclose(formats.run_export(path, format, {"x": rows})["outputs"],
                                   model.predict(rows, verbose=0), atol=1e-5)
    with pytest.raises(ValueError, match="applies to the tflite format only"):
        model.export(str(tmp_path / "q"), quantize="float16")


def test_named_inputs_keep_their_names_in_every_format(tmp_path):
    import graphfit as gf
    from graphfit import layers

    age, income = gf.Input(shape=(3,), name="age"), gf.Input(shape=(2,), name="income")
    model = gf.Model({"age": age, "income": income},
                     layers.Dense(1)(layers.Concatenate()([age, income])))
    rng = np.random.default_rng(2)
    rows = {"age": rng.normal(size=(4, 3)).astype(np.float32),
            "income": rng.normal(size=(4, 2)).astype(np.float32)}
    expected = model.predict(rows, verbose=0)
    for format in ("tflite", "onnx"):
        check = formats.export_as(model, str(tmp_path / f"m.{format}"), format, sample=rows)
        assert check.passed and check.rows == 4
        np.testing.assert_allclose(formats.run_export(check.path, format, rows)["outputs"],
                                   expected, atol=1e-5)
