"""graphfit.tabular: typed columns on Keras preprocessing layers, compared with the same Keras
layers adapted on the same rows; statistics from the given rows only; saved and rebuilt;
stratified splits; bad data quoted with its file and line."""

from __future__ import annotations

import json
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from graphfit import tabular
from graphfit.tabular import Column, TableError, TablePreprocessor

AGE = np.array([31.0, np.nan, 45.0, 22.0, 60.0, np.nan, 38.0, 51.0], np.float32)
COUNTRY = np.array(["FR", "DE", "FR", "", "ES", "FR", "DE", "IT"], object)
TEXT = np.array(["red apple", "green apple pie", "red wine", "", "blue sky", "red sky",
                 "green wine", "apple"], object)
PARTNER = np.array(["yes", "no", "", "yes", "true", "0", "no", "yes"], object)
SIGNUP = np.array(["2024-03-05", "2023-12-31", "", "2020-02-29", "2021-07-04", "2022-01-01",
                   "2024-01-01", "2019-05-20"], object)
RAW = {"age": AGE, "country": COUNTRY, "text": TEXT, "partner": PARTNER, "signup": SIGNUP}
COLUMNS = [Column("age", "numeric", {"missing": "indicator"}),
           Column("country", "categorical", {"max_size": 3}),
           Column("text", "text", {"max_tokens": 6}),
           Column("partner", "boolean"), Column("signup", "date")]


@pytest.fixture(scope="module")
def prep():
    prep = TablePreprocessor(COLUMNS)
    prep.adapt_arrays(RAW)
    return prep


def test_same_outputs_as_keras_layers_adapted_on_the_same_rows(prep):
    out = prep.transform_arrays(RAW)
    names = prep.output_names()
    # numeric: Keras Normalization adapted on the present values; a gap gets the mean (0).
    norm = keras.layers.Normalization()
    norm.adapt(AGE[~np.isnan(AGE)][:, None])
    expected_age = np.where(np.isnan(AGE), 0.0, np.asarray(norm(np.nan_to_num(AGE)[:, None]))[:, 0])
    np.testing.assert_allclose(out[:, 0], expected_age, atol=1e-6)
    np.testing.assert_array_equal(out[:, 1], np.isnan(AGE))  # age_missing
    # categorical: StringLookup (max_size 3 + 1 OOV) then one-hot CategoryEncoding.
    lookup = keras.layers.StringLookup(max_tokens=4)
    lookup.adapt(COUNTRY.astype(str))
    one_hot = keras.layers.CategoryEncoding(num_tokens=4, output_mode="one_hot")
    start = names.index("country=[UNK]")
    np.testing.assert_array_equal(out[:, start:start + 4],
                                  np.asarray(one_hot(lookup(COUNTRY.astype(str)))))
    # text: TextVectorization multi_hot.
    vectorize = keras.layers.TextVectorization(max_tokens=6, output_mode="multi_hot")
    vectorize.adapt(TEXT.astype(str))
    start = names.index("text=[UNK]")
    np.testing.assert_array_equal(out[:, start:start + 6], np.asarray(vectorize(TEXT.astype(str))))
    # boolean: 1/0, a gap the more frequent value (true).
    np.testing.assert_array_equal(out[:, names.index("partner")], [1, 0, 1, 1, 1, 0, 0, 1])


def test_date_parts_and_weekday(prep):
    start = prep.output_names().index("signup.year")
    parts = prep.parts["signup"].parts(tf.constant(SIGNUP.astype(str))).numpy()
    import datetime

    for text, row in zip(SIGNUP, parts):
        if text:
            day = datetime.date.fromisoformat(text)
            assert row.tolist() == [day.year, day.month, day.day, day.weekday()]
        else:
            assert np.isnan(row).all()
    assert start > 0


def test_a_part_constant_in_training_is_centered_not_blown_up():
    # One year of sign-ups: the year part has variance 0, where Keras's Normalization divides
    # by 1e-7 and a later year would reach the model as 1e7.
    prep = TablePreprocessor([Column("signup", "date"), Column("age", "numeric")])
    prep.adapt_arrays({"signup": np.array(["2023-01-05", "2023-06-01", "2023-11-30"], object),
                       "age": np.array([30.0, 30.0, 30.0], np.float32)})
    new = {"signup": np.array(["2024-06-01"], object), "age": np.array([42.0], np.float32)}
    out = prep.transform_arrays(new)[0]
    names = prep.output_names()
    assert out[names.index("signup.year")] == 1.0 and out[names.index("age")] == 12.0
    rebuilt = TablePreprocessor.from_record(json.loads(json.dumps(prep.to_record())))
    np.testing.assert_array_equal(rebuilt.transform_arrays(new)[0], out)
    # A record written before (variance 0 saved) reads the same way.
    record = json.loads(json.dumps(prep.to_record()))
    record["statistics"]["age"]["variance"] = [0.0]
    record["statistics"]["signup"]["variance"][0] = 0.0
    np.testing.assert_array_equal(TablePreprocessor.from_record(record).transform_arrays(new)[0],
                                  out)


def test_record_round_trip_gives_the_same_outputs_and_is_plain_json(prep):
    record = json.loads(json.dumps(prep.to_record()))
    again = TablePreprocessor.from_record(record)
    np.testing.assert_array_equal(again.transform_arrays(RAW), prep.transform_arrays(RAW))
    assert record["statistics"]["country"]["vocabulary"][0] == "FR"  # the most frequent first


def test_statistics_come_only_from_the_rows_adapted_on(prep):
    changed = {name: values.copy() for name, values in RAW.items()}
    changed["age"][:4] = 1000.0
    other = TablePreprocessor(COLUMNS)
    other.adapt_arrays({name: values[4:] for name, values in RAW.items()})
    twice = TablePreprocessor(COLUMNS)
    twice.adapt_arrays({name: values[4:] for name, values in changed.items()})
    assert other.to_record() == twice.to_record()
    assert other.to_record() != prep.to_record()


def test_adapt_takes_a_dataset_of_raw_rows(prep):
    rows = tf.data.Dataset.from_tensor_slices(
        {name: (values.astype(str) if values.dtype == object else values)
         for name, values in RAW.items()})  # unbatched: one dict per row
    again = TablePreprocessor(COLUMNS)
    again.adapt(rows)
    assert again.to_record() == prep.to_record()


def test_transform_runs_in_dataset_map_and_counts_oov(prep):
    dataset = tf.data.Dataset.from_tensor_slices(
        {name: (values.astype(str) if values.dtype == object else values)
         for name, values in RAW.items()}).batch(3).map(prep.transform)
    np.testing.assert_array_equal(np.concatenate(list(dataset.as_numpy_iterator())),
                                  prep.transform_arrays(RAW))
    unseen = np.array(["XX", "FR", "YY", "DE", "FR", "FR", "DE", "ZZ"], object)
    assert prep.oov_counts({**RAW, "country": unseen}) == {"country": 3}


def test_hash_and_ids_encodings_and_missing_fills():
    columns = [Column("c", "categorical", {"encoding": "hash", "num_bins": 5}),
               Column("k", "categorical", {"encoding": "ids", "missing": "mode"}),
               Column("x", "numeric", {"missing": {"constant": -1.0}, "standardize": False}),
               Column("b", "numeric", {"bins": [0.0, 10.0]})]
    raw = {"c": np.array(["a", "b", "a"], object), "k": np.array(["u", "", "u"], object),
           "x": np.array([2.0, np.nan, 3.0], np.float32),
           "b": np.array([-1.0, 5.0, 20.0], np.float32)}
    prep = TablePreprocessor(columns)
    prep.adapt_arrays(raw)
    out = prep.transform_arrays(raw)
    hashing = keras.layers.Hashing(num_bins=5)
    np.testing.assert_array_equal(out["features"][:, :5], np.asarray(
        keras.layers.CategoryEncoding(5, output_mode="one_hot")(hashing(raw["c"].astype(str)))))
    np.testing.assert_array_equal(out["features"][:, 5], [2.0, -1.0, 3.0])
    np.testing.assert_array_equal(out["features"][:, 6:], np.eye(3))  # 3 buckets
    assert out["k"].tolist() == [1, 1, 1]  # the gap filled with the mode "u"


def test_constant_fills_are_cells_of_the_column():
    columns = [Column("b", "boolean", {"missing": {"constant": "yes"}}),
               Column("d", "date", {"missing": {"constant": "2024-03-05"},
                                    "standardize": False}),
               Column("x", "numeric", {"missing": {"constant": "5"}, "standardize": False})]
    raw = {"b": np.array(["no", ""], object), "d": np.array(["2020-01-01", ""], object),
           "x": np.array([1.0, np.nan], np.float32)}
    prep = TablePreprocessor(columns)
    prep.adapt_arrays(raw)
    assert prep.transform_arrays(raw).tolist() == [[0, 2020, 1, 1, 2, 1],
                                                   [1, 2024, 3, 5, 1, 5]]
    from graphfit.tabular.columns import option_problems

    assert option_problems("numeric", {"missing": {"constant": "many"}}) == [
        ("missing", "the constant 'many' is not a value of a numeric column")]


def test_infers_types():
    assert [tabular.infer_type(c) for c in (["1", "2.5", ""], ["a", "b", "a"], ["yes", "no"],
                                            ["2024-01-02", ""], ["the red fox", "a cat sat",
                                                                 "dogs run fast"])] == \
        ["numeric", "categorical", "boolean", "date", "text"]
    # Python's float reads "1_000" as 1000; a table's cell "1_000" is not a number.
    assert tabular.infer_type(["1", "2", "1_000"]) == "categorical"


def test_stratified_split_is_deterministic_disjoint_and_in_proportion():
    labels = np.array(["a"] * 70 + ["b"] * 25 + ["c"] * 5)
    np.random.default_rng(3).shuffle(labels)
    first = tabular.split_indices(100, 0.2, 0.2, seed=7, shuffle=True, strata=labels)
    again = tabular.split_indices(100, 0.2, 0.2, seed=7, shuffle=True, strata=labels)
    assert all((x == y).all() for x, y in zip(first, again))
    joined = np.concatenate(first)
    assert sorted(joined.tolist()) == list(range(100))  # disjoint, complete
    for rows in first:
        for value in "abc":
            expected = len(rows) * np.mean(labels == value)
            assert abs(np.sum(labels[rows] == value) - expected) <= 1.0


def test_balanced_class_weight_matches_the_keras_and_sklearn_formula():
    y = np.array([0] * 6 + [1] * 3 + [2])
    weights = tabular.balanced_class_weight(y, 3)
    assert weights == pytest.approx({0: 10 / 18, 1: 10 / 9, 2: 10 / 3})


def test_bad_data_is_quoted_with_file_and_line(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("age,country\n31,FR\n\nforty,DE\n")
    (tmp_path / "inf.csv").write_text("age,country\n31,FR\n-Infinity,DE\n")
    for name, match in (("t.csv", r"t.csv, line 4: column 'age' is declared numeric but holds "
                                  r"'forty'"),
                        ("inf.csv", r"inf.csv, line 3: column 'age' is declared numeric but "
                                    r"holds '-Infinity', which is not a finite number")):
        table = tabular.read_table(str(tmp_path / name))
        with pytest.raises(TableError, match=match):
            tabular.raw_values(Column("age", "numeric"), table.columns["age"], table.lines,
                               table.path)
    table = tabular.read_table(str(path))
    # New rows for a finished run whose type was inferred: no "declare" advice.
    with pytest.raises(TableError, match=r"column 'age' is inferred numeric but holds 'forty', "
                                         r"which is not a number; fix the value \(the run "
                                         r"reads the column as numeric\)"):
        tabular.raw_values(Column("age", "numeric", inferred=True), table.columns["age"],
                           table.lines, table.path, retypable=False)
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(TableError, match="is empty"):
        tabular.read_table(str(tmp_path / "empty.csv"))
    (tmp_path / "header.csv").write_text("a,b\n")
    with pytest.raises(TableError, match="no data rows"):
        tabular.read_table(str(tmp_path / "header.csv"))
    with pytest.raises(TableError, match="no column 'height'"):
        tabular.feature_columns(table, {"height": {"type": "numeric"}})


def test_json_lines_and_parquet_read_the_same_cells(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"age": 31, "country": "FR"}, {"age": None, "country": "DE"}]
    (tmp_path / "t.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    pq.write_table(pa.Table.from_pylist(rows), str(tmp_path / "t.parquet"))
    for name in ("t.jsonl", "t.parquet"):
        table = tabular.read_table(str(tmp_path / name))
        columns = tabular.feature_columns(table, None)
        assert [(c.name, c.type) for c in columns] == [("age", "numeric"),
                                                       ("country", "categorical")]
        np.testing.assert_array_equal(tabular.raw_values(columns[0], table.columns["age"]),
                                      [31.0, np.nan])


@pytest.mark.parametrize("date, flag, message", [
    ("2022-13-45", "yes", "column 'signup' holds a date that does not exist"),
    ("2022-02-30", "yes", "column 'signup' holds a date that does not exist"),
    ("2023-01-01", "maybe", "column 'partner' holds a value that is not a boolean"),
])
def test_a_served_cell_of_the_wrong_type_fails_in_the_graph(date, flag, message):
    # Files are checked when read (`raw_values`); a request to an export reaches the graph.
    prep = TablePreprocessor([Column("signup", "date"), Column("partner", "boolean")])
    prep.adapt_arrays({"signup": np.array(["2023-01-05", "2024-02-29"], object),
                       "partner": np.array(["yes", "no"], object)})
    good = prep.transform_arrays({"signup": np.array(["2024-02-29", ""], object),
                                  "partner": np.array(["t", ""], object)})
    assert np.isfinite(good).all()
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        prep.transform_arrays({"signup": np.array([date], object),
                               "partner": np.array([flag], object)})


def test_a_word_among_numbers_warns_that_the_column_became_categorical():
    from graphfit.tabular.readers import Table
    from graphfit.tabular.schema import feature_columns

    cells = [str(i % 5) for i in range(100)]
    cells[7] = "two"
    table = Table("calls.csv", ["calls", "y"], {"calls": cells, "y": ["a"] * 100},
                  list(range(2, 102)))
    with pytest.warns(UserWarning, match=r"calls.csv: column 'calls' is inferred categorical "
                                         r"because 1 of its 100 cells are not numbers \(line 9 "
                                         r"holds 'two'\)"):
        assert [c.type for c in feature_columns(table, None, target="y")] == ["categorical"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # declared, or plainly categorical: no warning
        feature_columns(table, {"calls": {"type": "categorical"}}, target="y")
        words = Table("w.csv", ["city"], {"city": ["Bern", "Zug"] * 50}, None)
        feature_columns(words, None)
