"""Recipes on typed tables (recipes/churn_table.yaml, recipes/text_folder.yaml): the known
reachable accuracy, statistics from the training split only, raw rows in and class names out
through `graphfit predict`, the SavedModel loaded by plain TensorFlow and a TF Serving REST
body, statistics reused by evaluate, and bad data reported at its recipe key with its file
and line."""

from __future__ import annotations

import csv
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from graphfit import cli
from graphfit.export import serving_call
from graphfit.recipes import RecipeError, load_recipe
from graphfit.recipes.running import runner, training_run
from graphfit.recipes.running.data_loading import load_splits

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CHURN = os.path.join(REPO, "recipes", "churn_table.yaml")
TEXT = os.path.join(REPO, "recipes", "text_folder.yaml")
FAST = ["training.jit_compile=false"]
# Raw rows as a person sends them: gaps, an unseen country, numbers as text.
NEW_ROWS = [
    {"customer_id": "N1", "age": "", "country": "ZZ", "plan": "basic", "monthly_charges": "50",
     "support_calls": "5", "has_partner": "yes", "signup_date": "2021-01-01"},
    {"customer_id": "N2", "age": "40", "country": "DE", "plan": "basic", "monthly_charges": "",
     "support_calls": "1", "has_partner": "", "signup_date": ""},
    {"customer_id": "N3", "age": "33", "country": "", "plan": "pro", "monthly_charges": "99.5",
     "support_calls": "0", "has_partner": "no", "signup_date": "2023-06-30"},
]


@pytest.fixture(scope="module")
def churn(tmp_path_factory):
    from graphfit import plots

    folder = tmp_path_factory.mktemp("churn")
    drawn = []  # the suite draws no PNG (GRAPHFIT_PLOTS=0): what the plots were given
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plots, "plot_finished_run",
                      lambda run, model=None, **kwargs: drawn.append(kwargs) or [])
        result = training_run.train(load_recipe(CHURN, FAST + ["training.epochs=20"]),
                                    run_dir=str(folder / "run"), verbose=0)
    result.drawn = drawn
    return result, folder


def test_churn_reaches_the_accuracy_its_rule_allows(churn):
    result, _ = churn
    # The label is a rule of visible columns (recipes/data/make_churn.py): 100 % reachable.
    assert result.metrics["test"]["binary_accuracy"] >= 0.9
    record = json.loads(open(os.path.join(result.run_dir, "preprocessing.json")).read())
    assert record["table"]["class_names"] == ["leave", "stay"]
    assert record["input_shape"] == [len(record["table"]["input_names"])]
    # The confusion matrix of the test split is drawn with the class names.
    assert result.drawn[0]["class_names"] == ["leave", "stay"]


def test_no_validation_or_test_row_changes_a_statistic(churn, tmp_path):
    result, _ = churn
    config = load_recipe(CHURN).config
    splits = load_splits(config)
    assert splits.table["preprocessor"] == json.loads(open(os.path.join(
        result.run_dir, "preprocessing.json")).read())["table"]["preprocessor"]
    # Change every validation and test row beyond recognition: the statistics stay.
    from graphfit.tabular import read_table, split_indices

    table = read_table(config["data"]["path"])
    _, val, test = split_indices(len(table), 0.15, 0.2, config["seed"], True,
                                 table.columns["churn"])
    held_out = set(val.tolist()) | set(test.tolist())
    with open(config["data"]["path"]) as handle:
        rows = list(csv.DictReader(handle))
    for index in held_out:
        rows[index].update(age="999", country="NEW", monthly_charges="12345",
                           has_partner="no", signup_date="1999-01-01")
    changed = tmp_path / "churn.csv"
    with open(changed, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    other = load_splits(load_recipe(CHURN, [f"data.path={changed}"]).config)
    assert other.table["preprocessor"] == splits.table["preprocessor"]
    assert other.table["oov_counts"]["val"] == {"country": len(val)}  # NEW: unseen, counted
    np.testing.assert_array_equal(other.train[0], splits.train[0])


def test_predict_the_saved_model_and_a_rest_body_give_the_same_answers(churn, capsys):
    result, folder = churn
    rows = folder / "new.csv"
    with open(rows, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(NEW_ROWS[0]))
        writer.writeheader()
        writer.writerows(NEW_ROWS)
    out = folder / "predictions.csv"
    assert cli.main(["predict", result.run_dir, "--input", str(rows), "--output", str(out),
                     "--id-column", "customer_id"]) == 0
    assert "country: 1 value(s) unseen in training" in capsys.readouterr().err
    with open(out) as handle:
        predicted = list(csv.DictReader(handle))
    assert list(predicted[0]) == ["customer_id", "class", "probability_stay"]
    assert [r["customer_id"] for r in predicted] == ["N1", "N2", "N3"]
    # The rule: N1 has 5 support calls, N2 is DE on basic; N3 stays.
    assert [r["class"] for r in predicted] == ["leave", "leave", "stay"]
    assert cli.main(["export", result.run_dir, "--output", str(folder / "served")]) == 0
    loaded = tf.saved_model.load(str(folder / "served"))  # plain TensorFlow
    columns = {"age": tf.constant([np.nan, 40.0, 33.0]),
               "country": tf.constant(["ZZ", "DE", ""]),
               "plan": tf.constant(["basic", "basic", "pro"]),
               "monthly_charges": tf.constant([50.0, np.nan, 99.5]),
               "support_calls": tf.constant([5.0, 1.0, 0.0]),
               "has_partner": tf.constant(["yes", "", "no"]),
               "signup_date": tf.constant(["2021-01-01", "", "2023-06-30"])}
    classified = loaded.signatures["classify"](**columns)
    assert [c.decode() for c in classified["class_name"].numpy()] == ["leave", "leave", "stay"]
    probability = [float(r["probability_stay"]) for r in predicted]
    np.testing.assert_allclose(classified["probabilities"].numpy()[:, 1], probability,
                               rtol=1e-5, atol=1e-7)
    # TF Serving's REST bodies: rows by column name (numbers as numbers, null for a gap)...
    instances = [{"age": None, "country": "ZZ", "plan": "basic", "monthly_charges": 50,
                  "support_calls": 5, "has_partner": True, "signup_date": "2021-01-01"},
                 {"age": 40, "country": "DE", "plan": "basic", "monthly_charges": None,
                  "support_calls": 1, "has_partner": None, "signup_date": ""},
                 {"age": 33, "country": "", "plan": "pro", "monthly_charges": 99.5,
                  "support_calls": 0, "has_partner": "no", "signup_date": "2023-06-30"}]
    body = {"signature_name": "classify", "instances": instances}
    np.testing.assert_allclose(serving_call(loaded, json.dumps(body))["probabilities"],
                               classified["probabilities"].numpy(), rtol=1e-6)
    # ... and the columnar form.
    inputs = {name: [row[name] for row in instances] for name in instances[0]}
    served = serving_call(loaded, {"signature_name": "classify", "inputs": inputs})
    assert served["class_name"].tolist() == [b"leave", b"leave", b"stay"]


def test_evaluate_reuses_the_runs_statistics(churn):
    result, _ = churn
    again = runner.evaluate_run(result.run_dir, write_logs=False)
    assert again["test"]["loss"] == pytest.approx(result.metrics["test"]["loss"], rel=1e-5)


def test_sample_weight_column_and_class_weight_by_name(tmp_path):
    table = tmp_path / "weighted.csv"
    with open(os.path.join(REPO, "recipes", "data", "churn.csv")) as handle:
        lines = handle.read().splitlines()
    table.write_text("\n".join([lines[0] + ",w"] + [line + ",0" for line in lines[1:]]) + "\n")
    overrides = FAST + [f"data.path={table}", "data.sample_weight=w", "training.epochs=1",
                        "training.class_weight={leave: 3.0, stay: 1.0}",
                        "training.validation_split=0", "training.test_split=0"]
    recipe = load_recipe(CHURN, overrides)
    splits = load_splits(recipe.config)
    assert splits.class_weight == {0: 3.0, 1: 1.0}
    assert "w" not in splits.table["input_names"] and splits.train_weight.tolist() == [0] * 400
    result = training_run.train(recipe, run_dir=str(tmp_path / "run"), verbose=0)
    assert result.history["loss"] == [0.0]  # every row weighs 0: fit got the weights


@pytest.mark.parametrize("edit,key,message", [
    (lambda text: text, "data.columns.height", "has no column 'height'"),
    (lambda text: text.replace("\nC0005,", "\nC0005,", 1).replace(",2,no,", ",two,no,", 1),
     "data.columns.support_calls", r"churn.csv, line \d+: column 'support_calls' is declared "
                                   r"numeric but holds 'two'"),
    (lambda text: "", "data.path", "is empty"),
])
def test_bad_tables_name_the_key_the_file_and_the_line(tmp_path, edit, key, message):
    source = open(os.path.join(REPO, "recipes", "data", "churn.csv")).read()
    (tmp_path / "churn.csv").write_text(edit(source))
    overrides = [f"data.path={tmp_path / 'churn.csv'}"]
    if key == "data.columns.height":
        overrides.append("data.columns.height={type: numeric}")
    with pytest.raises(RecipeError, match=message) as caught:
        runner.prepare(load_recipe(CHURN, overrides))
    assert key in str(caught.value)


def test_text_folder_learns_the_two_kinds_of_sentence(tmp_path, monkeypatch):
    result = training_run.train(load_recipe(TEXT, FAST + ["training.epochs=8"]),
                                run_dir=str(tmp_path / "run"), verbose=0)
    assert result.metrics["test"]["accuracy"] >= 0.95
    # --resume reads the statistics the run saved: nothing is adapted again.
    from graphfit.tabular import TablePreprocessor

    def refuse(*args, **kwargs):
        raise AssertionError("adapted again")

    monkeypatch.setattr(TablePreprocessor, "adapt", refuse)
    resumed = training_run.resume(result.run_dir, epochs=9, verbose=0)
    assert len(resumed.history["loss"]) == 9
    monkeypatch.undo()
    (tmp_path / "new.csv").write_text("text\nthe baker slices fresh bread\n"
                                      "a storm sweeps over the coast\n")
    assert cli.main(["predict", result.run_dir, "--input", str(tmp_path / "new.csv"),
                     "--output", str(tmp_path / "p.csv")]) == 0
    lines = (tmp_path / "p.csv").read_text().splitlines()
    assert lines[0] == "class,probability_cooking,probability_weather"
    assert [line.split(",")[0] for line in lines[1:]] == ["cooking", "weather"]
    shutil.rmtree(tmp_path / "run")


def test_tensorboard_shows_the_columns_and_class_names(churn):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    result, _ = churn
    events = EventAccumulator(os.path.join(result.run_dir, "logs"),
                              size_guidance={"tensors": 0})
    events.Reload()
    text = tf.make_ndarray(events.Tensors("recipe")[0].tensor_proto).item().decode()
    assert "classes of churn (id: name): 0: leave, 1: stay" in text
    assert "country: categorical (declared)" in text and "plan: categorical (inferred)" in text


def test_json_lines_and_parquet_tables_load_as_the_csv_does(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    with open(os.path.join(REPO, "recipes", "data", "churn.csv")) as handle:
        rows = list(csv.DictReader(handle))
    typed = [{k: (None if v == "" else float(v) if k in ("age", "monthly_charges",
                                                         "support_calls") else v)
              for k, v in row.items()} for row in rows]
    (tmp_path / "churn.jsonl").write_text("".join(json.dumps(r) + "\n" for r in typed))
    pq.write_table(pa.Table.from_pylist(typed), str(tmp_path / "churn.parquet"))
    expected = load_splits(load_recipe(CHURN).config)
    for name in ("churn.jsonl", "churn.parquet"):
        splits = load_splits(load_recipe(CHURN, [f"data.path={tmp_path / name}"]).config)
        np.testing.assert_array_equal(splits.train[0], expected.train[0])
        np.testing.assert_array_equal(splits.test[1], expected.test[1])


def test_ids_columns_are_named_inputs_for_an_embedding(tmp_path):
    recipe = tmp_path / "ids.yaml"
    recipe.write_text(f"""
data: {{source: table, path: {os.path.join(REPO, 'recipes', 'data', 'churn.csv')},
        target: churn, ignore: [customer_id],
        columns: {{country: {{type: categorical, encoding: ids}}}}}}
model:
  inputs: [features, country]
  nodes:
    - {{name: vectors, type: Embedding, input_dim: 7, output_dim: 3, inputs: country}}
    - {{name: joined, type: Concatenate, inputs: [features, vectors]}}
    - {{name: logit, type: Dense, units: 1, inputs: joined}}
  outputs: logit
loss: {{type: BinaryCrossentropy, from_logits: true}}
training: {{jit_compile: false}}
""")
    prepared = runner.prepare(load_recipe(str(recipe)))
    x = prepared.splits.train[0]
    assert set(x) == {"features", "country"} and x["country"].dtype == np.int64
    assert prepared.splits.table["vocabulary_sizes"]["country"] == 7  # 6 values and the OOV
    assert 0 <= x["country"].min() and x["country"].max() < 7


def test_a_class_unseen_in_training_is_an_error_with_its_line(tmp_path):
    (tmp_path / "val.csv").write_text(open(os.path.join(REPO, "recipes", "data", "churn.csv"))
                                      .read().replace(",stay\n", ",maybe\n", 1))
    overrides = ["training.validation_split=0",
                 f"training.validation_data={{source: table, path: {tmp_path / 'val.csv'}, "
                 f"target: churn}}"]
    with pytest.raises(RecipeError, match=r"val.csv, line 2: the target 'maybe' is not a class "
                                          r"of the training split \(leave, stay\)"):
        runner.prepare(load_recipe(CHURN, overrides))
