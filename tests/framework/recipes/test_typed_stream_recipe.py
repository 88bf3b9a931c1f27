"""Typed columns over a `stream` of CSV shards: the churn table (recipes/data/churn.csv) cut
into shards trains to the same statistics and the same weights as `source: table` over the
same rows in the same order; no validation file changes a statistic; raw CSV rows are
predicted and the export takes raw named columns, as for a table."""

from __future__ import annotations

import csv
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from graphfit import cli
from graphfit.recipes import load_recipe
from graphfit.recipes.running import training_run
from graphfit.recipes.running.data_loading import DataError, load_splits

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CHURN = os.path.join(REPO, "recipes", "data", "churn.csv")
COLUMNS = """\
    age: {type: numeric, missing: indicator}
    country: {type: categorical, max_size: 10}
    plan: {type: categorical}
    monthly_charges: {type: numeric, num_bins: 4}
    support_calls: {type: numeric}
    has_partner: {type: boolean}
    signup_date: {type: date}
"""
REST = """\
model: [{type: Dense, units: 16, activation: relu}, {type: Dense, units: 1}]
loss: {type: BinaryCrossentropy, from_logits: true}
metrics: [{type: BinaryAccuracy, threshold: 0.0}]
optimizer: {type: Adam, learning_rate: 0.02}
training: {epochs: 2, batch_size: 32, validation_split: VAL, test_split: 0,
           shuffle: false, jit_compile: false}
"""
TABLE = f"""\
seed: 0
data:
  source: table
  path: {CHURN}
  target: churn
  ignore: [customer_id]
  shuffle: false
  columns:
{COLUMNS}{REST.replace("VAL", "0")}"""
STREAM = f"""\
seed: 0
data:
  source: stream
  files: shards/*.csv
  target: churn
  shuffle: false
  cycle_length: 1
  columns:
{COLUMNS}    churn: string
{REST}"""


def _rows():
    with open(CHURN, newline="") as handle:
        return list(csv.DictReader(handle))


def _write_shards(folder, rows, count):
    os.makedirs(folder, exist_ok=True)
    size = len(rows) // count
    for shard in range(count):
        with open(os.path.join(folder, f"part-{shard}.csv"), "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows[shard * size:(shard + 1) * size])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The table run and the stream run (4 shards, read in order) of the same 400 rows."""
    base = tmp_path_factory.mktemp("typed_stream")
    _write_shards(base / "shards", _rows(), 4)
    (base / "table.yaml").write_text(TABLE)
    (base / "stream.yaml").write_text(STREAM.replace("VAL", "0"))
    table = training_run.train(load_recipe(str(base / "table.yaml")),
                               run_dir=str(base / "table_run"), verbose=0)
    stream = training_run.train(load_recipe(str(base / "stream.yaml")),
                                run_dir=str(base / "stream_run"), verbose=0)
    return base, table, stream


def _record(run):
    return json.loads(open(os.path.join(run.run_dir, "preprocessing.json")).read())


def _close(a, b):
    """Equal records, floats to float32's rounding (one adapt batch vs the whole column)."""
    if isinstance(a, dict):
        assert set(a) == set(b)
        for key in a:
            _close(a[key], b[key])
    elif isinstance(a, list) and a and isinstance(a[0], float):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    elif isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y)
    else:
        assert a == b


def test_the_stream_trains_as_the_table_does(runs):
    _, table, stream = runs
    expected, got = _record(table)["table"], _record(stream)["table"]
    assert got["preprocessor"] == expected["preprocessor"]  # one adapt batch: exact
    assert got["class_names"] == expected["class_names"] == ["leave", "stay"]
    assert got["input_names"] == expected["input_names"]
    assert _record(stream)["input_shape"] == _record(table)["input_shape"]
    for a, b in zip(table.model.get_weights(), stream.model.get_weights()):
        np.testing.assert_array_equal(a, b)  # the same rows in the same order
    assert stream.metrics["train"]["loss"] == pytest.approx(table.metrics["train"]["loss"],
                                                            rel=1e-5)


def test_no_validation_file_changes_a_statistic(runs, tmp_path):
    from graphfit import datasets
    from graphfit.recipes.running.table_loading import raw_columns
    from graphfit.tabular import TablePreprocessor, read_table

    base, _, _ = runs
    rows = _rows()
    _write_shards(tmp_path / "shards", rows, 5)
    (tmp_path / "stream.yaml").write_text(STREAM.replace("VAL", "0.2"))
    first = load_splits(load_recipe(str(tmp_path / "stream.yaml")).config).table
    validation = datasets.Stream(str(tmp_path / "shards" / "*.csv"), {"churn": "string"}) \
        .split(0.2, 0, seed=0)["val"].files
    assert len(validation) == 1
    with open(validation[0], "w", newline="") as handle:  # beyond recognition
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows([dict(r, age="999", country="XX", plan="mega", monthly_charges="1e6",
                               support_calls="77", churn="stay") for r in rows[:80]])
    again = load_splits(load_recipe(str(tmp_path / "stream.yaml")).config).table
    assert again["preprocessor"] == first["preprocessor"]
    # ... and they are a table's statistics of the training files' rows alone.
    shard = int(os.path.basename(validation[0])[5])
    table = read_table(CHURN)
    train = table.take([i for i in range(len(table)) if i // 80 != shard])
    prep = TablePreprocessor(first_columns := _columns(first))
    prep.adapt_arrays(raw_columns(train, first_columns, ("data",)))
    _close(prep.to_record(), first["preprocessor"])


def _columns(table_record):
    from graphfit.tabular import Column

    return [Column.from_record(c) for c in table_record["preprocessor"]["columns"]]


def test_raw_rows_predict_and_export_as_for_a_table(runs):
    base, table, stream = runs
    rows = base / "new.csv"
    with open(rows, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(_rows()[0]))
        writer.writeheader()
        writer.writerows(_rows()[:5] + [dict(_rows()[5], age="", country="ZZ")])
    outputs = {}
    for name, run in (("table", table), ("stream", stream)):
        out = base / f"{name}.csv"
        assert cli.main(["predict", run.run_dir, "--input", str(rows), "--output", str(out),
                         "--id-column", "customer_id"]) == 0
        with open(out) as handle:
            outputs[name] = list(csv.DictReader(handle))
    assert list(outputs["stream"][0]) == ["customer_id", "class", "class_name",
                                          "probability_stay"]
    assert [r["class_name"] for r in outputs["stream"]] == [
        r["class_name"] for r in outputs["table"]]
    np.testing.assert_allclose([float(r["probability_stay"]) for r in outputs["stream"]],
                               [float(r["probability_stay"]) for r in outputs["table"]],
                               rtol=1e-4, atol=1e-5)
    assert cli.main(["export", stream.run_dir, "--output", str(base / "served")]) == 0
    loaded = tf.saved_model.load(str(base / "served"))  # plain TensorFlow, raw columns
    raw = _rows()[:5]
    columns = {name: tf.constant([float(r[name]) if r[name] else np.nan for r in raw])
               if name in ("age", "monthly_charges", "support_calls")
               else tf.constant([r[name] for r in raw])
               for name in ("age", "country", "plan", "monthly_charges", "support_calls",
                            "has_partner", "signup_date")}
    classified = loaded.signatures["classify"](**columns)
    np.testing.assert_allclose(classified["probabilities"].numpy()[:, 1],
                               [float(r["probability_stay"]) for r in outputs["stream"][:5]],
                               rtol=1e-5, atol=1e-7)


def test_typed_columns_need_csv_shards_and_known_types(tmp_path):
    _write_shards(tmp_path / "shards", _rows()[:40], 2)
    (tmp_path / "bad.yaml").write_text(STREAM.replace("VAL", "0").replace(
        "plan: {type: categorical}", "plan: {type: categorical, max_size: -3}"))
    with pytest.raises(DataError) as caught:
        load_splits(load_recipe(str(tmp_path / "bad.yaml")).config)
    assert caught.value.path == ("data", "columns", "plan", "max_size")


def test_adapt_reads_its_dataset_once_and_equals_each_keras_layers_own_adapt():
    import keras

    from graphfit.tabular import Column, TablePreprocessor

    passes = []
    ages = np.array([20.0, np.nan, 40.0, 31.0, 55.0, 18.0], np.float32)
    countries = np.array(["FR", "DE", "FR", "", "IT", "FR"], object)

    def rows():
        passes.append(1)
        for start in range(0, 6, 4):  # batches of 4 and 2
            yield {"age": ages[start:start + 4], "country": countries[start:start + 4]}

    dataset = tf.data.Dataset.from_generator(rows, output_signature={
        "age": tf.TensorSpec([None], tf.float32), "country": tf.TensorSpec([None], tf.string)})
    prep = TablePreprocessor([Column("age", "numeric"), Column("country", "categorical")])
    prep.adapt(dataset)
    assert len(passes) == 1
    norm = keras.layers.Normalization(axis=-1)  # Keras's own adapt over the same batches
    norm.adapt(dataset.map(lambda r: tf.reshape(tf.boolean_mask(
        r["age"], tf.math.is_finite(r["age"])), [-1, 1])))
    statistics = prep.to_record()["statistics"]
    np.testing.assert_allclose(statistics["age"]["mean"], np.ravel(norm.mean), rtol=1e-7)
    np.testing.assert_allclose(statistics["age"]["variance"], np.ravel(norm.variance),
                               rtol=1e-7)
    lookup = keras.layers.StringLookup()
    lookup.adapt(dataset.map(lambda r: r["country"]))
    assert statistics["country"]["vocabulary"] == lookup.get_vocabulary()[1:]


def test_evaluate_and_resume_reuse_the_runs_statistics(runs):
    base, _, stream = runs
    record = _record(stream)
    config = load_recipe(os.path.join(stream.run_dir, "recipe.yaml")).config
    splits = load_splits(config, record)  # no adapting: the run's own numbers
    assert splits.table["preprocessor"] == record["table"]["preprocessor"]
    assert splits.class_names == ["leave", "stay"] and splits.steps_per_epoch == 13
    x, y = next(iter(splits.train))
    assert x.shape == (32, record["input_shape"][0]) and y.dtype == tf.int32


SEPARATE = """\
training: {epochs: 2, batch_size: 32, validation_split: 0, test_split: 0, shuffle: false,
           jit_compile: false,
           validation_data: VALIDATION,
           test_data: {source: table, path: TEST, target: churn, ignore: [customer_id]}}
"""


def _separate_recipe(base, data: str, validation: str) -> str:
    rest = REST[:REST.index("training:")]
    return (data[:data.index("model:")] + rest + SEPARATE.replace("VALIDATION", validation)
            .replace("TEST", str(base / "shards" / "part-3.csv")))


@pytest.fixture(scope="module")
def separate_runs(runs):
    """Shards 0-1 trained as a typed stream with shard 2 as a separate (inferred) stream and
    shard 3 as a separate table; and the table run of the same rows, the reference."""
    base = runs[0]
    rows = _rows()[:400]
    with open(base / "train.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows[:200])
    stream = STREAM.replace("shards/*.csv", "shards/part-[01].csv")
    (base / "sep_stream.yaml").write_text(_separate_recipe(
        base, stream, "{source: stream, files: shards/part-2.csv}"))
    (base / "sep_table.yaml").write_text(_separate_recipe(
        base, TABLE.replace(CHURN, str(base / "train.csv")),
        f"{{source: table, path: {base / 'shards' / 'part-2.csv'}, target: churn}}"))
    return [training_run.train(load_recipe(str(base / f"sep_{kind}.yaml")),
                               run_dir=str(base / f"sep_{kind}_run"), verbose=0)
            for kind in ("stream", "table")]


def test_separate_stream_and_table_sources_get_the_training_splits_preprocessing(
        separate_runs):
    stream, table = separate_runs
    assert _record(stream)["table"]["preprocessor"] == _record(table)["table"]["preprocessor"]
    for a, b in zip(table.model.get_weights(), stream.model.get_weights()):
        np.testing.assert_array_equal(a, b)
    for stage in ("val", "test"):
        for name, value in table.metrics[stage].items():
            assert stream.metrics[stage][name] == pytest.approx(value, rel=1e-5), (stage, name)


def test_separate_sources_a_typed_stream_cannot_preprocess_are_refused(runs):
    base = runs[0]
    stream = STREAM.replace("shards/*.csv", "shards/part-[01].csv")
    cases = {
        "{source: csv, path: shards/part-2.csv, target: churn}":
            (("training", "validation_data", "source"), "give validation_data as source: "
                                                       "stream or source: table"),
        "{source: stream, files: shards/part-2.csv, target: plan}":
            (("training", "validation_data", "target"), "read with the training data's "
                                                       "target 'churn'"),
        "{source: stream, files: shards/part-2.csv, columns: {age: float32, churn: string}}":
            (("training", "validation_data", "columns"), "leave columns out"),
    }
    for validation, (key, text) in cases.items():
        (base / "bad.yaml").write_text(_separate_recipe(base, stream, validation))
        with pytest.raises(DataError) as caught:
            load_splits(load_recipe(str(base / "bad.yaml")).config)
        assert caught.value.path == key and text in str(caught.value), validation
