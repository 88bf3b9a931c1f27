"""SavedModel export: every signature, loaded with plain TensorFlow in a process that never
imports graphfit, answers as `model.predict` does on the same raw rows.

One module fixture trains and exports five models (two recipe runs, one with
standardization; a graph model run; a model with two outputs; the LSTM recipe's run) and one
subprocess loads all of them (`load_exports_script.py`). They train without XLA: an export
traces its own signatures, and XLA's compile of each model's steps was most of the fixture's
time (a model trained with XLA is exported in test_mixed_precision_training.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import datasets, layers, optimizers
from graphfit.export import export_run, serving_call
from graphfit.recipes import load_recipe
from graphfit.recipes.running import runner, training_run
from graphfit.recipes.running.data_loading import Standardizer

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "load_exports_script.py")
ATOL = 1e-6


def _recipe_run(folder, name: str, overrides: list[str]):
    recipe = load_recipe(os.path.join(REPO, "recipes", name),
                         [*overrides, "training.jit_compile=false"])
    run = str(folder / name.replace(".yaml", ""))
    training_run.train(recipe, run_dir=run, verbose=0)
    return run


class TwoHeads(gf.Model):
    """A model with two outputs: a class score and a regression value."""

    def __init__(self):
        super().__init__()
        self.trunk = layers.Dense(6, activation="tanh", name="trunk")
        self.score = layers.Dense(3, name="score")
        self.value = layers.Dense(1, name="value")

    def call(self, x, training=False):
        hidden = self.trunk(x)
        return {"score": self.score(hidden), "value": self.value(hidden)}


def _two_heads(folder):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 4)).astype("float32")
    model = TwoHeads()
    model.compile(optimizer=optimizers.Adam(0.01),
                  loss={"score": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                        "value": "mse"}, jit_compile=False)
    model.fit(x, {"score": rng.integers(0, 3, 40), "value": x[:, :1]}, epochs=1, verbose=0)
    path = model.export(str(folder / "two_heads"), layers=["trunk"])
    return path, {"x": x[:7]}, model


def _lstm(folder):
    """The shipped LSTM recipe (a Keras LSTM in a recipe), trained small."""
    run = _recipe_run(folder, "sine_lstm.yaml", ["training.epochs=1", "data.n_samples=200"])
    x, _ = datasets.make_sine_sequences(n_samples=5, steps=20, noise=0.05, seed=3)
    return export_run(run, str(folder / "lstm")), {"x": x.astype("float32")}, \
        runner.load_run(run)[0].model


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """{case: (SavedModel path, raw inputs by name, the model, the raw inputs as the model
    takes them after preprocessing)} and the loading subprocess's results."""
    folder = tmp_path_factory.mktemp("exports")
    cases = {}
    run = _recipe_run(folder, "quickstart.yaml", ["training.epochs=1"])
    x, _ = datasets.load_digits()
    cases["digits"] = (export_run(run), {"x": x[:9].astype("float32")},
                       runner.load_run(run)[0].model, x[:9].astype("float32"))
    run = _recipe_run(folder, "breast_cancer_auc.yaml", ["training.epochs=1"])
    x, _ = datasets.load_breast_cancer()
    prepared, record = runner.load_run(run)
    raw = x[:9].astype("float32")
    cases["breast_cancer"] = (export_run(run, str(folder / "bc_export")), {"x": raw},
                              prepared.model, Standardizer.from_json(record["standardize"])(raw))
    run = _recipe_run(folder, "graph_classes.yaml", [
        "training.epochs=1", "data.n_graphs=48", "training.batch_size=16"])
    graphs, _ = datasets.make_graph_classes(48, seed=0, features="one_hot_degree")
    batch = graphs.batch(np.arange(6))
    cases["graphs"] = (export_run(run), batch, runner.load_run(run)[0].model, graphs[:6])
    for make in (_two_heads, _lstm):
        path, inputs, model = make(folder)
        cases[os.path.basename(path)] = (path, inputs, model, inputs["x"])
    listing = {}
    for name, (path, inputs, _, _) in cases.items():
        np.savez(str(folder / f"{name}.npz"), **inputs)
        listing[name] = {"path": path, "inputs": str(folder / f"{name}.npz")}
    (folder / "cases.json").write_text(json.dumps(listing))
    out = str(folder / "outputs.npz")
    done = subprocess.run([sys.executable, SCRIPT, str(folder / "cases.json"), out,
                           cases["graphs"][0]],
                          capture_output=True, text=True, timeout=240,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return cases, json.loads(lines[-1][len("RESULT "):]), dict(np.load(out))


def _predict(model, inputs):
    return model.predict(inputs, batch_size=None, verbose=0)


def test_the_loading_process_never_imported_graphfit(exported):
    assert exported[1]["graphfit_imported"] is False


def test_signatures_of_each_export(exported):
    report = exported[1]
    classifier = ["classify", "predict", "serving_default"]
    assert report["digits"]["signatures"] == classifier
    assert report["breast_cancer"]["signatures"] == classifier
    assert report["graphs"]["signatures"] == classifier
    assert report["two_heads"]["signatures"] == ["predict", "serving_default", "trunk"]
    assert report["lstm"]["signatures"] == ["predict", "serving_default"]


@pytest.mark.parametrize("case", ["digits", "breast_cancer", "graphs", "lstm"])
def test_predict_and_serving_default_equal_model_predict(exported, case):
    cases, _, outputs = exported
    _, _, model, model_inputs = cases[case]
    expected = _predict(model, model_inputs)
    for signature in ("predict", "serving_default"):
        np.testing.assert_allclose(outputs[f"{case}/{signature}/outputs"], expected, atol=ATOL)


def test_raw_rows_go_in_the_standardization_is_inside(exported):
    cases, _, outputs = exported
    _, inputs, model, standardized = cases["breast_cancer"]
    assert np.abs(inputs["x"] - standardized).max() > 10  # raw rows differ from the model's
    np.testing.assert_allclose(outputs["breast_cancer/predict/outputs"],
                               _predict(model, standardized), atol=ATOL)


def test_classify_gives_classes_and_probabilities(exported):
    cases, _, outputs = exported
    logits = _predict(cases["digits"][2], cases["digits"][3])
    np.testing.assert_allclose(outputs["digits/classify/probabilities"],
                               tf.nn.softmax(logits).numpy(), atol=ATOL)
    np.testing.assert_array_equal(outputs["digits/classify/class"], logits.argmax(axis=1))
    # binary with one logit: the two columns 1 - p and p
    logit = _predict(cases["breast_cancer"][2], cases["breast_cancer"][3])[:, 0]
    p = 1 / (1 + np.exp(-logit.astype(np.float64)))
    np.testing.assert_allclose(outputs["breast_cancer/classify/probabilities"],
                               np.stack([1 - p, p], axis=1), atol=ATOL)
    np.testing.assert_array_equal(outputs["breast_cancer/classify/class"], (p > 0.5) * 1)


def test_several_outputs_and_a_named_layer(exported):
    cases, _, outputs = exported
    _, inputs, model, _ = cases["two_heads"]
    expected = _predict(model, inputs["x"])
    for name in ("score", "value"):
        np.testing.assert_allclose(outputs[f"two_heads/predict/{name}"], expected[name],
                                   atol=ATOL)
    np.testing.assert_allclose(outputs["two_heads/trunk/outputs"],
                               model.trunk(inputs["x"]).numpy(), atol=ATOL)


def test_saved_model_cli_lists_every_signature(exported):
    # `saved_model_cli show --dir <the graphs export> --all`, run in the loading process.
    shown = exported[1]["saved_model_cli"]
    assert shown["status"] == 0, shown["stdout"][-2000:]
    for signature in ("serving_default", "predict", "classify"):
        assert f"signature_def['{signature}']" in shown["stdout"]
    for name in ("node_features", "graph_index", "node_counts", "senders", "receivers"):
        assert f"inputs['{name}']" in shown["stdout"]
    assert "shape: (-1, 9)" in shown["stdout"]  # node features: any number of nodes


def test_rest_request_bodies_give_the_same_answers(exported):
    cases, _, outputs = exported
    loaded = tf.saved_model.load(cases["breast_cancer"][0])
    rows = cases["breast_cancer"][1]["x"]
    expected = outputs["breast_cancer/predict/outputs"]
    by_rows = serving_call(loaded, json.dumps({"instances": rows.tolist()}))
    np.testing.assert_allclose(by_rows["outputs"], expected, atol=ATOL)
    by_columns = serving_call(loaded, {"inputs": {"x": rows.tolist()},
                                       "signature_name": "classify"})
    np.testing.assert_allclose(by_columns["probabilities"],
                               outputs["breast_cancer/classify/probabilities"], atol=ATOL)
    graphs = tf.saved_model.load(cases["graphs"][0])
    batch = {key: value.tolist() for key, value in cases["graphs"][1].items()}
    np.testing.assert_allclose(serving_call(graphs, {"inputs": batch})["outputs"],
                               outputs["graphs/predict/outputs"], atol=ATOL)
    with pytest.raises(ValueError, match="exactly one of"):
        serving_call(loaded, {"rows": []})
    with pytest.raises(ValueError, match="takes \\(30,\\)"):
        serving_call(loaded, {"instances": [[1.0, 2.0]]})
