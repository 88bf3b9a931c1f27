"""The `data:` section (and `training.validation_data` / `test_data`): where samples come from.

Each source has its own keys; unknown keys are checked against that source's keys. Files are
checked when the recipe is (they exist, the CSV columns and `.npz` keys are there), and their
paths are resolved against the recipe's folder (against the working directory for a `--set`
override) and stored absolute, so a saved recipe runs from anywhere.
"""

from __future__ import annotations

import inspect
import os

from graphfit import datasets
from graphfit.datasets.graphs import NODE_FEATURE_KINDS
from graphfit.recipes.reading import column_types, user_code
from graphfit.recipes.reading.file_sources import FILE_SOURCES, check_file_source
from graphfit.recipes.reading.problems import short_repr
from graphfit.recipes.reading.schema import (
    INVALID,
    Boolean,
    Checker,
    Custom,
    Either,
    Field,
    Integer,
    ListOf,
    Nullable,
    Number,
    Section,
    String,
    shown,
)
from graphfit.tabular.readers import FORMATS

__all__ = ["SOURCES", "check_data_source", "DATA_DOC", "base_dir", "check_names"]

def _no_stratify(value, path, checker):
    """`stratify:` of a stream: refused (a stream's splits are by file or by a key's hash)."""
    checker.report(path, f"a stream cannot stratify (got {shown(value)}): its splits are by "
                         f"file or by a hash of `key`, the same on every pass and worker, "
                         f"never a random draw of records; give a key column (its hash "
                         f"spreads every class over the splits), write each class's records "
                         f"across the shards, or load the data whole with source: table")
    return INVALID


_SAMPLES = Field(Integer(min=1), 500, "how many samples to generate")
_NOISE = Field(Number(min=0.0), 0.1, "standard deviation of the Gaussian noise")

_COLUMNS = Custom(column_types.check_columns, "a mapping {column: {type: ..., options}}")
_TEXT_OPTIONS = Custom(column_types.check_text_options, "text column options")

SOURCES: dict[str, dict[str, Field]] = {
    "digits": {"as_images": Field(Boolean(), False, "8x8x1 images (for Conv2D) instead of 64 "
                                                    "features")},
    "breast_cancer": {},
    "moons": {"n_samples": _SAMPLES, "noise": _NOISE},
    "spirals": {"n_samples": Field(Integer(min=1), 600, "how many samples to generate"),
                "classes": Field(Integer(min=2), 2, "number of spiral arms (classes)"),
                "turns": Field(Number(min=0.0, min_open=True), 1.5, "turns of each arm"),
                "noise": _NOISE},
    "blobs": {"n_samples": _SAMPLES,
              "centers": Field(Integer(min=1), 3, "number of blobs (classes)"),
              "features": Field(Integer(min=1), 2, "dimensions of each sample"),
              "cluster_std": Field(Number(min=0.0), 1.0, "spread of each blob")},
    "sinc": {"n_samples": _SAMPLES,
             "noise": Field(Number(min=0.0), 0.05, "standard deviation of the noise on y"),
             "low": Field(Number(), -10.0, "smallest x"),
             "high": Field(Number(), 10.0, "largest x")},
    "sine_sequences": {
        "n_samples": Field(Integer(min=1), 1000, "how many windows to generate"),
        "steps": Field(Integer(min=1), 20, "observations per window (the sequence length)"),
        "noise": Field(Number(min=0.0), 0.05, "standard deviation of the observation noise"),
        "min_frequency": Field(Number(min=0.0, min_open=True, max=0.5), 0.025,
                               "lowest sine frequency, in cycles per step"),
        "max_frequency": Field(Number(min=0.0, min_open=True, max=0.5), 0.1,
                               "highest sine frequency, in cycles per step (at most 0.5)")},
    "graph_classes": {
        "n_graphs": Field(Integer(min=1), 800, "how many graphs to generate (one class per "
                                               "structure: cycle, path, star, ...)"),
        "min_nodes": Field(Integer(min=9), 10, "fewest nodes of a graph (at least 9)"),
        "max_nodes": Field(Integer(min=9), 30, "most nodes of a graph"),
        "features": Field(String(NODE_FEATURE_KINDS), "constant",
                          "node features: constant (1 on every node), degree, or "
                          "one_hot_degree (max_degree + 1 columns)"),
        "max_degree": Field(Integer(min=1), 8, "with one_hot_degree: degrees from this one "
                                               "up share the last column")},
    "csv": {"path": Field(String(), doc="the CSV file (with a header row)"),
            "target": Field(Either(String(), ListOf(String(), min_length=1)),
                            doc="the label column(s)"),
            "features": Field(Nullable(ListOf(String(), min_length=1)), None,
                              "feature columns (null: every column but the target)"),
            "delimiter": Field(String(), ",", "the column separator")},
    "table": {"path": Field(String(), doc="the table: .csv/.tsv (optionally .gz), .jsonl or "
                                          ".parquet (pip install graphfit[tabular])"),
              "format": Field(Nullable(String(FORMATS)), None,
                              "csv | json_lines | parquet (null: from the extension)"),
              "target": Field(Nullable(String()), doc="the label column (class names or "
                                                      "numbers); null: none"),
              "features": Field(Nullable(ListOf(String(), min_length=1)), None,
                                "feature columns (null: every column but the target, the "
                                "sample_weight and the id columns)"),
              "columns": Field(_COLUMNS, {}, "{column: {type: numeric | categorical | text "
                                             "| boolean | date, options}}; the others are "
                                             "inferred"),
              "delimiter": Field(Nullable(String()), None, "a CSV's separator (null: comma, "
                                                           "tab for .tsv)"),
              "stratify": Field(Nullable(String()), None, "a column whose classes every "
                                                          "split keeps in proportion"),
              "sample_weight": Field(Nullable(String()), None, "a numeric column weighting "
                                                               "each training row's loss"),
              "ignore": Field(ListOf(String()), [], "columns that are neither features nor "
                                                    "target (ids)")},
    "text_folder": {"path": Field(String(), doc="a folder with one subfolder of .txt files "
                                                "per class"),
                    "text": Field(_TEXT_OPTIONS, {}, "the text column's options (max_tokens, "
                                                     "output_mode, ngrams)"),
                    "stratify": Field(Boolean(), False, "keep each class's share in every "
                                                        "split")},
    "npz": {"path": Field(String(), doc="the .npz file (numpy.savez)"),
            "x_key": Field(String(), "x", "the array of features"),
            "y_key": Field(Nullable(String()), "y", "the array of labels")},
    "function": {"function": Field(String(), doc="package.module:function returning (x, y) "
                                                 "or a batched tf.data.Dataset"),
                 "arguments": Field(Section({}), {}, "keyword arguments for the function")},
    "stream": {
        "files": Field(Either(String(), ListOf(String(), min_length=1)),
                       doc="CSV, TFRecord or Parquet shards: a glob or a list (read from the "
                           "recipe's folder), streamed by tf.data, never loaded whole"),
        "columns": Field(Nullable(Section({})), None,
                         "name: dtype, or name: {dtype, shape}, or name: {type: ...}, for "
                         "every column read (dtypes float32, float64, int32, int64, string); "
                         "null: every column, typed as inferred from a sample of the "
                         "training files"),
        "target": Field(Nullable(String()), None, "the label column (null: no labels)"),
        "key": Field(Nullable(String()), None, "a column whose hash picks each record's split "
                                               "(null: split by file)"),
        "format": Field(String(("auto", "tfrecord", "csv", "parquet")), "auto",
                        "auto: from the extension (.tfrecord, .csv, .parquet; a further .gz: "
                        "GZIP)"),
        "sample_weight": Field(Nullable(String()), None, "a numeric column weighting each "
                                                         "training record's loss"),
        "ignore": Field(ListOf(String()), [], "columns left out when the columns are "
                                              "inferred (ids)"),
        "inference_sample": Field(Integer(min=1), 1000, "records of the training files the "
                                                        "column types are inferred from"),
        "stratify": Field(Nullable(Custom(_no_stratify, "null")), None,
                          "refused: a stream splits by file or by key"),
        "compression": Field(String(("auto", "none", "GZIP", "ZLIB")), "auto",
                             "auto: from the extension"),
        "delimiter": Field(String(), ",", "the CSV separator"),
        "shuffle_buffer": Field(Integer(min=0), 10000, "records in the shuffle buffer"),
        "cycle_length": Field(Integer(min=1), 4, "files read at once (interleaved)"),
        "statistics_sample": Field(Nullable(Integer(min=1)), None,
                                   "standardize from the first N training records (null: "
                                   "all, in one pass)")},
}
SOURCES.update(FILE_SOURCES)  # image_folder, timeseries
_COMMON = {
    "source": Field(String(tuple(SOURCES)), doc="where the samples come from"),
}
_TRAINING_ONLY = {
    "standardize": Field(Boolean(), False, "scale features to mean 0, std 1, with statistics "
                                           "of the training split only"),
    "shuffle": Field(Boolean(), True, "shuffle the samples (from the seed) before splitting"),
}
DATA_DOC = ("the samples: source " + " | ".join(SOURCES) + ", its options, standardize, shuffle")


class _Arguments(Section):
    """`arguments:` of a function source: any keyword arguments (checked by the call)."""

    def check(self, value, path, checker):
        if value is None:
            return {}
        if not isinstance(value, dict):
            checker.report(path, f"must be a mapping of keyword arguments, got {shown(value)}")
            return INVALID
        return dict(value)


SOURCES["function"]["arguments"] = Field(_Arguments({}), {}, "keyword arguments for the function")
SOURCES["stream"]["columns"] = Field(Nullable(_Arguments({})), None,
                                     SOURCES["stream"]["columns"].doc)


def base_dir(path, checker: Checker) -> str:
    """The folder a relative path at `path` is read from: the recipe's (the working
    directory for a `--set` override)."""
    position = checker.document.position(path)
    if position is None or position.source.startswith("--set"):
        return os.getcwd()
    return getattr(checker, "base_dir", os.getcwd())


def _resolve_path(resolved: dict, path, checker: Checker) -> str | None:
    """`resolved["path"]` made absolute (from the recipe's folder; a `--set` override's from
    the working directory) and stored back; None when there is no valid path."""
    location = resolved.get("path")
    if location is INVALID or location is None:
        return None
    full = os.path.abspath(os.path.join(base_dir(path + ("path",), checker),
                                        os.path.expanduser(location)))
    resolved["path"] = full
    return full


def _check_file(resolved: dict, path, checker: Checker) -> None:
    full = _resolve_path(resolved, path, checker)
    if full is None:
        return
    if not getattr(checker, "data_files", True):
        return  # a finished run's recipe, read to predict or export: its data may be gone
    if resolved["source"] in FILE_SOURCES:
        check_file_source(resolved, full, path, checker)
        return
    if os.path.isdir(full):
        checker.report(path + ("path",), f"{full} is a folder; give the data file in it")
        return
    if not os.path.isfile(full):
        checker.report(path + ("path",), f"file not found: {full} (a relative path is read "
                                         f"from the recipe's folder)")
        return
    if resolved["source"] == "table":
        return  # its columns are read with the data (types, values, line numbers)
    try:
        if resolved["source"] == "csv":
            available = datasets.csv_columns(full, delimiter=resolved["delimiter"])
            check_names(resolved, path, checker, available, ("target", "features"), "column")
        else:
            available = datasets.npz_keys(full)
            check_names(resolved, path, checker, available, ("x_key", "y_key"), "array")
    except (OSError, ValueError) as error:
        checker.report(path + ("path",), f"cannot read {full}: {error}")


def _check_folder(resolved: dict, path, checker: Checker) -> None:
    full = _resolve_path(resolved, path, checker)
    if full is not None and getattr(checker, "data_files", True) and not os.path.isdir(full):
        checker.report(path + ("path",), f"folder not found: {full} (a relative path is read "
                                         f"from the recipe's folder)")


def check_names(resolved, path, checker, available, keys, what) -> None:
    """Reports each name under `keys` of `resolved` (a string or a list) that is not among
    `available` (a file's columns or arrays), with a "did you mean"."""
    from graphfit.core.registry import did_you_mean
    for key in keys:
        names = resolved.get(key)
        if names is None or names is INVALID:
            continue
        for index, name in enumerate([names] if isinstance(names, str) else names):
            if name not in available:
                hint = did_you_mean(name, available, "; did you mean {!r}?", otherwise=".")
                where = path + (key,) if isinstance(names, str) else path + (key, index)
                checker.report(where, f"no {what} {short_repr(name)} in the file{hint} It has: "
                                      f"{', '.join(available)}")


def _check_function(resolved: dict, path, checker: Checker) -> None:
    """The data function exists and may be run, and takes the arguments given (unless the
    recipe is read in safe mode, which imports no user code)."""
    reference = resolved["function"]
    if getattr(checker, "safe", False):  # only what the name alone tells
        try:
            user_code.check_not_standard_library(reference)
        except ValueError as error:
            checker.report(path + ("function",), str(error))
        return
    try:
        function = user_code.import_attribute(reference, ":")
        user_code.check_runnable(function, reference)
    except ValueError as error:
        checker.report(path + ("function",), str(error))
        return
    arguments = resolved.get("arguments")
    if isinstance(arguments, dict):
        try:
            inspect.signature(function).bind(**arguments)
        except TypeError as error:
            checker.report(path + ("arguments",), f"{reference} does not take these "
                                                  f"arguments: {error}")
        except ValueError:
            pass  # no signature to compare with; the call will tell


def check_data_source(value, path, checker: Checker, training: bool = True):
    """Checks a data source mapping; returns it resolved (defaults, absolute paths)."""
    if not isinstance(value, dict):
        checker.report(path, f"must be a mapping with 'source' ({' | '.join(SOURCES)}), "
                             f"got {shown(value)}")
        return INVALID
    common = dict(_COMMON, **(_TRAINING_ONLY if training else {}))
    source = value.get("source")
    if "source" not in value:
        checker.report(path, f"missing required key 'source' ({' | '.join(SOURCES)})")
        return INVALID
    if not isinstance(source, str) or source not in SOURCES:
        String(tuple(SOURCES)).check(source, path + ("source",), checker)
        return INVALID  # the other keys depend on the source
    resolved = Section(dict(common, **SOURCES[source])).check(value, path, checker)
    if source in ("csv", "npz", "table", *FILE_SOURCES):
        _check_file(resolved, path, checker)
    if source == "text_folder":
        _check_folder(resolved, path, checker)
    if source == "function" and isinstance(resolved.get("function"), str):
        _check_function(resolved, path, checker)
    if source == "stream":
        _check_stream(resolved, path, checker)
    ranges = {"graph_classes": ("min_nodes", "max_nodes"),
              "sine_sequences": ("min_frequency", "max_frequency")}
    if source in ranges:
        _check_range(resolved, path, checker, *ranges[source])
    if source == "sinc" and resolved["low"] is not INVALID and resolved["high"] is not INVALID \
            and resolved["low"] >= resolved["high"]:
        checker.report(path + ("high",), f"must be greater than low ({resolved['low']}), got "
                                         f"{resolved['high']}")
    return resolved


def _check_stream(resolved: dict, path, checker: Checker) -> None:
    """Resolves the shards' paths against the recipe's folder and opens the stream (its
    files exist, its columns are declared right, its CSV headers have them)."""
    files = resolved.get("files")
    if files is INVALID or files is None or resolved.get("columns") is INVALID:
        return
    base = base_dir(path + ("files",), checker)
    absolute = lambda f: os.path.abspath(os.path.join(base, os.path.expanduser(f)))  # noqa: E731
    resolved["files"] = absolute(files) if isinstance(files, str) else [absolute(f)
                                                                         for f in files]
    if not getattr(checker, "data_files", True) or resolved.get("columns") is None:
        return  # inferred columns: read (and checked) when the data is loaded
    from graphfit.recipes.running.stream_loading import stream_options

    try:
        datasets.Stream(**stream_options(resolved))
    except (OSError, ValueError) as error:
        text = str(error)
        key = next((k for k in ("columns", "target", "key", "format", "compression")
                    if text.startswith(k)), "files")
        checker.report(path + (key,), text)


def _check_range(resolved: dict, path: tuple, checker, low: str, high: str) -> None:
    """Reports `high` when it is below `low` (both valid)."""
    if INVALID not in (resolved[low], resolved[high]) and resolved[high] < resolved[low]:
        checker.report(path + (high,), f"must be at least {low} ({resolved[low]}), got "
                                       f"{resolved[high]}")

