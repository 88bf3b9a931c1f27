"""Typed columns over Parquet and TFRecord shards, inferred stream schemas, and weights on
streams: the churn table (recipes/data/churn.csv, plus a sample-weight column) cut into
Parquet and TFRecord shards trains to the same statistics, class weights and weights as
`source: table` over the same rows in the same order."""

from __future__ import annotations

import csv
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from graphfit import cli, datasets
from graphfit.recipes import load_recipe
from graphfit.recipes.running import training_run
from graphfit.recipes.running.data_loading import load_splits

from .test_typed_stream_recipe import CHURN, COLUMNS  # the same churn rows and types

NUMERIC = ("age", "monthly_charges", "support_calls", "weight")
REST = """\
model: [{type: Dense, units: 16, activation: relu}, {type: Dense, units: 1}]
loss: {type: BinaryCrossentropy, from_logits: true}
metrics: [{type: BinaryAccuracy, threshold: 0.0}]
optimizer: {type: Adam, learning_rate: 0.02}
training: {epochs: 1, batch_size: 32, validation_split: 0, test_split: 0,
           shuffle: false, jit_compile: false, class_weight: balanced}
"""
TABLE = f"""\
seed: 0
data:
  source: table
  path: weighted.csv
  target: churn
  ignore: [customer_id]
  sample_weight: weight
  shuffle: false
  columns:
{COLUMNS}{REST}"""
STREAM = f"""\
seed: 0
data:
  source: stream
  files: FILES
  target: churn
  sample_weight: weight
  shuffle: false
  cycle_length: 1
  columns:
{COLUMNS}    churn: string
    weight: float32
{REST}"""


def _rows():
    with open(CHURN, newline="") as handle:
        rows = list(csv.DictReader(handle))
    return [dict(r, weight=str(0.5 + (i % 3) * 0.5)) for i, r in enumerate(rows)]


def _cells(rows, name):
    """A column's values as a Parquet/TFRecord writer holds them: numbers (None for an
    empty cell; support_calls as integers), else strings."""
    if name == "support_calls":
        return [int(r[name]) for r in rows]
    if name in NUMERIC:
        return [float(r[name]) if r[name] else None for r in rows]
    return [r[name] for r in rows]


def _write_tfrecords(folder, rows, count):
    os.makedirs(folder, exist_ok=True)
    size = len(rows) // count
    for shard in range(count):
        with tf.io.TFRecordWriter(str(folder / f"part-{shard}.tfrecord")) as writer:
            for row in rows[shard * size:(shard + 1) * size]:
                feature = {}
                for name in row:
                    value = _cells([row], name)[0]
                    if isinstance(value, int):
                        feature[name] = tf.train.Feature(int64_list=tf.train.Int64List(
                            value=[value]))
                    elif name in NUMERIC:  # a gap: NaN
                        feature[name] = tf.train.Feature(float_list=tf.train.FloatList(
                            value=[np.nan if value is None else value]))
                    else:
                        feature[name] = tf.train.Feature(bytes_list=tf.train.BytesList(
                            value=[value.encode()]))
                writer.write(tf.train.Example(features=tf.train.Features(
                    feature=feature)).SerializeToString())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The table run, the Parquet stream run and the TFRecord stream run (4 shards each, read
    in order) of the same 400 weighted rows."""
    base = tmp_path_factory.mktemp("stream_types")
    rows = _rows()
    with open(base / "weighted.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    datasets.write_parquet_shards({name: _cells(rows, name) for name in rows[0]},
                                  base / "parquet", 4, row_group_size=37)
    _write_tfrecords(base / "tfrecord", rows, 4)
    (base / "table.yaml").write_text(TABLE)
    (base / "parquet.yaml").write_text(STREAM.replace("FILES", "parquet/*.parquet"))
    (base / "tfrecord.yaml").write_text(STREAM.replace("FILES", "tfrecord/*.tfrecord"))
    done = {name: training_run.train(load_recipe(str(base / f"{name}.yaml")),
                                     run_dir=str(base / f"{name}_run"), verbose=0)
            for name in ("table", "parquet", "tfrecord")}
    return base, done


def _record(run):
    return json.loads(open(os.path.join(run.run_dir, "preprocessing.json")).read())


@pytest.mark.parametrize("kind", ["parquet", "tfrecord"])
def test_typed_shards_train_as_the_table_does(runs, kind):
    _, done = runs
    table, stream = done["table"], done[kind]
    expected, got = _record(table)["table"], _record(stream)["table"]
    assert got["preprocessor"] == expected["preprocessor"]  # one adapt batch: exact
    assert got["class_names"] == expected["class_names"] == ["leave", "stay"]
    assert got["input_names"] == expected["input_names"]
    # the same rows, order, sample weights and balanced class weights: the same weights
    for a, b in zip(table.model.get_weights(), stream.model.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert stream.metrics["train"]["loss"] == pytest.approx(table.metrics["train"]["loss"],
                                                            rel=1e-5)


def test_balanced_class_weight_and_the_weight_column_reach_the_batches(runs):
    base, _ = runs
    config = load_recipe(str(base / "parquet.yaml")).config
    splits = load_splits(config)
    labels = [r["churn"] for r in _rows()]
    counts = {name: labels.count(name) for name in ("leave", "stay")}
    assert splits.class_weight == pytest.approx({
        i: len(labels) / (2 * counts[name]) for i, name in enumerate(["leave", "stay"])})
    x, y, w = next(iter(splits.train))
    np.testing.assert_allclose(w.numpy(), [0.5 + (i % 3) * 0.5 for i in range(32)])
    config["data"]["sample_weight"] = None
    config["data"]["columns"].pop("weight")
    config["training"]["class_weight"] = {"stay": 2.0}
    splits = load_splits(config)
    assert splits.class_weight == {1: 2.0} and len(next(iter(splits.train))) == 2


def test_a_stream_without_columns_infers_the_tables_types(runs, capsys):
    from graphfit.tabular import infer_type, read_table

    base, _ = runs
    (base / "inferred.yaml").write_text(
        STREAM.replace("FILES", "parquet/*.parquet").split("  columns:")[0]
        + "  ignore: [customer_id]\n" + REST)
    assert cli.main(["validate", str(base / "inferred.yaml")]) == 0
    printed = capsys.readouterr().out
    table = read_table(str(base / "weighted.csv"))
    for name in ("age", "country", "plan", "monthly_charges", "support_calls",
                 "has_partner", "signup_date"):
        assert f"  {name}: {infer_type(table.columns[name])} (inferred)" in printed
    assert "customer_id" not in printed and "target churn: classes leave, stay" in printed


def test_declared_columns_print_as_declared_and_a_text_feature_declared_a_number_is_named(
        runs, capsys):
    base, _ = runs
    declared = STREAM.replace("FILES", "tfrecord/*.tfrecord").replace(
        "    plan: {type: categorical}\n", "    plan: string\n").replace(
        "    support_calls: {type: numeric}\n", "    support_calls: float32\n")
    (base / "declared.yaml").write_text(declared)
    assert cli.main(["validate", str(base / "declared.yaml")]) == 0
    printed = capsys.readouterr().out
    assert "  plan: categorical (declared)" in printed
    assert "  support_calls: numeric (declared)" in printed
    country = "    country: {type: categorical, max_size: 10}\n"
    for declared_as in ("float32", "{type: numeric}"):  # a bytes feature of text values
        (base / "kind.yaml").write_text(declared.replace(country, f"    country: {declared_as}\n"))
        assert cli.main(["validate", str(base / "kind.yaml")]) != 0
        printed = capsys.readouterr()
        text = printed.err + printed.out
        assert "part-0.tfrecord, record 0 (counting from 0): column 'country' holds 'IT', " \
               "which is not a number, but the column is declared a number (float32); " \
               "declare it as text (string, or {type: categorical}) or fix the value" in text
        assert "StringToNumberOp" not in text


def test_a_parquet_stream_resumes_mid_pass_where_an_unbroken_one_is(runs):
    base, _ = runs
    stream = datasets.Stream(str(base / "parquet" / "*.parquet"),
                             {"age": {"dtype": "float32", "default": 0.0},
                              "support_calls": "int64"}, target="support_calls")
    start = tf.Variable([0, 0], dtype=tf.int64)

    def batches(count):
        data = stream.dataset(stream.files, 32, shuffle_buffer=50, seed=3, repeat=True,
                              start=start)
        return [y.numpy().tolist() for _, y in data.take(count)]

    unbroken = batches(20)  # 13 batches a pass (400 records)
    start.assign([1, 3 * 32])  # pass 1, 3 batches done
    assert batches(4) == unbroken[16:20]


def test_bad_shards_are_named(tmp_path):
    parquet = tmp_path / "p"
    datasets.write_parquet_shards({"a": [1.0, 2.0, 3.0, 4.0, None, 6.0],
                                   "b": ["1", "2", "x", "4", "5", "6"]}, parquet, 2)
    with pytest.raises(ValueError, match=r"columns \['c'\] are not in .*shard-00000"):
        datasets.Stream(str(parquet / "*.parquet"), {"a": "float32", "c": "float32"})
    stream = datasets.Stream(str(parquet / "*.parquet"), {"a": "float32", "b": "float32"})
    for count_or_statistics in (stream.count, stream.statistics):
        with pytest.raises(datasets.BadRecordError) as caught:
            count_or_statistics(stream.files)
        assert str(caught.value) == (f"{stream.files[0]}, record 2 (counting from 0): column "
                                     f"'b' holds 'x', which is not a number of its dtype "
                                     f"float32")  # the file and record once, no "ValueError:"
    with pytest.raises(tf.errors.InvalidArgumentError) as caught:  # iterated in Python
        list(stream.dataset(stream.files, 4, cycle_length=1))
    assert "row 2 (counting from 0), column \\'b\\' holds \\'x\\'" in caught.value.message
    assert "Traceback" not in caught.value.message and "File \"" not in caught.value.message
    assert stream.bad_record(stream.files, caught.value).record == 2
    stream = datasets.Stream(str(parquet / "*.parquet"), {"a": "float32"})
    with pytest.raises(datasets.BadRecordError) as caught:
        stream.statistics(stream.files)
    assert caught.value.file.endswith("shard-00001-of-00002.parquet")
    assert caught.value.record == 1 and "is empty (null)" in str(caught.value)
    import pyarrow
    import pyarrow.parquet as pq

    pq.write_table(pyarrow.table({"a": pyarrow.array([], pyarrow.float64())}),
                   str(parquet / "empty.parquet"))
    with pytest.raises(ValueError, match=r"empty\.parquet holds no row \(an empty shard\)"):
        datasets.Stream(str(parquet / "*.parquet"), {"a": "float32"})
    (tmp_path / "junk.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(ValueError, match="junk.parquet is not a readable Parquet file"):
        datasets.Stream(str(tmp_path / "junk.parquet"), {"a": "float32"})
    records = tmp_path / "r"
    datasets.write_tfrecord_shards(np.ones((4, 2)), np.arange(4), records, 2)
    with pytest.raises(ValueError, match=r"columns \['z'\] are not in the first record"):
        datasets.Stream(str(records / "*.tfrecord"), {"x": "float32", "z": "int64"})
    texts = tmp_path / "t"  # numbers stored as text: parsed, a bad one named
    datasets.write_tfrecord_shards(np.array([["1.5"], ["2"], ["abc"]]), np.arange(3), texts, 1)
    stream = datasets.Stream(str(texts / "*.tfrecord"), {"x": "float32", "y": "int64"},
                             target="y")
    with pytest.raises(datasets.BadRecordError, match=r"shard-00000-of-00001\.tfrecord, "
                                                      r"record 2 .*abc"):
        stream.statistics(stream.files)
    tf.io.TFRecordWriter(str(records / "empty.tfrecord")).close()
    with pytest.raises(ValueError, match=r"empty\.tfrecord holds no record"):
        datasets.Stream(str(records / "*.tfrecord"), {"x": {"dtype": "float32", "shape": [2]}})


def test_a_stream_refuses_stratify_and_a_negative_weight_is_found(tmp_path, capsys):
    datasets.write_parquet_shards({"a": [1.0, 2.0, 3.0, 4.0], "y": [0, 1, 0, 1],
                                   "w": [1.0, 1.0, -2.0, 1.0]}, tmp_path / "p", 2)
    recipe = tmp_path / "r.yaml"
    recipe.write_text("seed: 0\ndata: {source: stream, files: p/*.parquet, target: y, "
                      "sample_weight: w, stratify: y, columns: {a: float32, y: int64, "
                      "w: float32}}\nmodel: [{type: Dense, units: 1}]\n"
                      "loss: {type: MeanSquaredError}\n"
                      "optimizer: {type: SGD}\ntraining: {epochs: 1, batch_size: 2}\n")
    assert cli.main(["validate", str(recipe)]) != 0
    printed = capsys.readouterr()
    assert "1 problem found" in printed.err + printed.out
    assert "data.stratify: a stream cannot stratify" in printed.err + printed.out
    # cut by nothing: the advice to give a key column shows
    assert "give a key column" in printed.err and "source: table\n" in printed.err
    assert "…" not in printed.err
    from graphfit.recipes.reading.problems import Problem

    long = "v" * 300  # a value echoed back is still cut, quoted plainly or as bytes
    assert str(Problem((), f"got '{long}' and b'{long}'")) == (
        f"got '{long[:78]}… and b'{long[:78]}…")
    stream = datasets.Stream(str(tmp_path / "p" / "*.parquet"),
                             {"a": "float32", "y": "int64", "w": "float32"}, target="y",
                             sample_weight="w")
    found = stream.bad_record(stream.files)
    assert found.file.endswith("shard-00001-of-00002.parquet") and found.record == 0
    assert str(found) == (f"{found.file}, record 0 (counting from 0): the sample_weight column "
                          f"'w' holds -2.0, a weight that is negative or not finite; a weight "
                          f"must be finite and >= 0: fix the value or remove the record")


def test_rows_encoded_by_hand_parse_as_protobufs_examples():
    import pyarrow

    from graphfit.datasets.example_encoding import encode_rows
    from graphfit.datasets.streams import Column

    batch = pyarrow.record_batch({"f": [1.5, None, -3e38], "i": [-5, 2**40, 0],
                                  "s": [" a b ", None, "é"], "n": [1, None, 3]})
    columns = [Column("f", "float32", default=float("nan")), Column("i", "int64"),
               Column("s", "string", default=""), Column("n", "float64", default=-1.0)]
    rows = encode_rows(columns, batch, None)  # every column takes a fast path
    expected = [tf.train.Example(features=tf.train.Features(feature={
        "f": tf.train.Feature(float_list=tf.train.FloatList(value=[f])),
        "i": tf.train.Feature(int64_list=tf.train.Int64List(value=[i])),
        "s": tf.train.Feature(bytes_list=tf.train.BytesList(value=[s.encode()])),
        "n": tf.train.Feature(float_list=tf.train.FloatList(value=[n]))})).SerializeToString()
        for f, i, s, n in zip([1.5, np.nan, -3e38], [-5, 2**40, 0], ["a b", "", "é"],
                              [1.0, -1.0, 3.0])]
    specs = {c.name: tf.io.FixedLenFeature([], c.stored_dtype) for c in columns}
    got, want = tf.io.parse_example(rows, specs), tf.io.parse_example(expected, specs)
    for name in specs:
        np.testing.assert_array_equal(got[name].numpy(), want[name].numpy())
