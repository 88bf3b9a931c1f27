"""`TablePreprocessor`: typed columns in, the model's input out, on Keras preprocessing layers.

Each column gets Keras preprocessing layers by its type:

- numeric: `Normalization` (standardize, the default); or `Discretization` (`bins`
  boundaries or `num_bins` quantiles) then a one-hot `CategoryEncoding`, one column per bucket;
- boolean: TensorFlow ops (true/yes/1 and false/no/0 to 1 and 0), one column;
- date: TensorFlow ops (year, month, day, weekday), `Normalization`, four columns;
- categorical: `StringLookup` (`max_size`, `num_oov_indices`) then a one-hot
  `CategoryEncoding`; `Hashing` (`encoding: hash`, `num_bins`) then one-hot; or the lookup's
  ids alone (`encoding: ids`);
- text: `TextVectorization` (`max_tokens`, `output_mode` multi_hot or count, `ngrams`).

`missing:` per column: `mean` (numeric, date: the training mean, taken from the adapted
`Normalization`), `mode` (categorical: the most frequent token, the first of the adapted
`StringLookup`'s vocabulary; boolean: the more frequent value), `{constant: VALUE}`, or
`indicator` (the default fill and one more 0/1 column, `NAME_missing`). Defaults: mean for
numeric and date, mode for boolean, the empty string as a category of its own for
categorical (an OOV when training had none) and no tokens for text.

The model input is one float32 vector per row (every column's part concatenated, in the
columns' order), so any Dense model takes it. With `encoding: ids` columns the input is a
dict: `features` (the vector, when some column goes into it) and, per such column, its int64
ids under the column's name (for an `Embedding` in a graph model; `input_dim` is the
column's `vocabulary_size`).

`adapt` takes a `tf.data.Dataset` of raw column dicts (see `graphfit.tabular.columns` for the
raw form), batched or not; `transform` is TensorFlow ops only, so it runs inside
`dataset.map` and inside an exported SavedModel. `to_record` gives the statistics as JSON
(vocabularies, means, variances, bucket boundaries); `from_record` rebuilds the layers from
them without adapting.

Example:

    >>> import numpy as np
    >>> from graphfit.tabular.columns import Column
    >>> prep = TablePreprocessor([Column("age", "numeric"), Column("country", "categorical")])
    >>> prep.adapt_arrays({"age": np.array([20.0, np.nan, 40.0], np.float32),
    ...                    "country": np.array(["FR", "DE", "FR"], object)})
    >>> prep.output_names()
    ['age', 'country=[UNK]', 'country=FR', 'country=DE']
    >>> prep.transform_arrays({"age": np.array([np.nan], np.float32),
    ...                        "country": np.array(["IT"], object)}).tolist()
    [[0.0, 1.0, 0.0, 0.0]]
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from graphfit.tabular.columns import FALSE_WORDS, TRUE_WORDS, Column, TableError

__all__ = ["TablePreprocessor", "FEATURES"]

FEATURES = "features"  # the vector's input name when the model also takes ids
_DATE_PARTS = ("year", "month", "day", "weekday")


def _keras():
    import keras

    return keras.layers


def _constant(column: Column):
    missing = column.missing
    return missing.get("constant") if isinstance(missing, dict) else None


def _no_values(column: Column) -> TableError:
    return TableError(f"column {column.name!r} has no value in the training split (every "
                      f"cell is empty): nothing to learn its statistics from; drop it, or fill "
                      f"it with missing: {{constant: VALUE}}", column.name)


def _one_hot(part, size: int):
    """The part's `CategoryEncoding` of `size` tokens, made once."""
    encoder = getattr(part, "encoder", None)
    if encoder is None or encoder.num_tokens != size:
        part.encoder = encoder = _keras().CategoryEncoding(num_tokens=size,
                                                           output_mode="one_hot")
    return encoder


def _scaled_variance(variance):
    """The variance a part is standardized by: 1 where the training rows held one value.
    Keras's `Normalization` divides by max(std, 1e-7) there, so a later value (a date's
    year after a year of data) would arrive at the model 1e7 times too large; a constant
    part carries no information, and 1 keeps it centered and in range."""
    variance = np.asarray(variance, np.float64)
    return np.where(variance > 0, variance, 1.0).astype(np.float32)


class _Numbers:
    """numeric, boolean and date columns: float parts, missing cells NaN until filled."""

    def __init__(self, column: Column, record: dict | None):
        layers = _keras()
        self.column, options = column, column.options
        self.width = 4 if column.type == "date" else 1
        stats = record or {}
        if "mean" in stats:
            self.norm = layers.Normalization(axis=-1, mean=stats["mean"],
                                             variance=_scaled_variance(stats["variance"]))
            self.norm.build((None, self.width))  # sets its mean and variance
        else:
            self.norm = layers.Normalization(axis=-1)
        self.bins = None
        if column.type == "numeric" and ("bins" in options or "num_bins" in options):
            boundaries = stats.get("bin_boundaries", options.get("bins"))
            self.bins = layers.Discretization(bin_boundaries=boundaries) if boundaries \
                else layers.Discretization(num_bins=options["num_bins"])
        self.adapted = "mean" in stats

    def parts(self, raw):
        """[batch, width] floats, NaN where missing."""
        if self.column.type == "numeric":
            return tf.reshape(tf.cast(raw, tf.float32), [-1, 1])
        text = tf.strings.lower(tf.strings.strip(tf.reshape(raw, [-1])))
        if self.column.type == "boolean":
            true = tf.reduce_any(tf.equal(text[:, None], tf.constant(TRUE_WORDS)), axis=1)
            false = tf.reduce_any(tf.equal(text[:, None], tf.constant(FALSE_WORDS)), axis=1)
            # A served request is checked here (files are checked when read, `raw_values`):
            # an unknown word would otherwise pass as a missing cell.
            known = tf.debugging.assert_equal(
                tf.reduce_all(true | false | tf.equal(text, "")), True, message=(
                    f"column {self.column.name!r} holds a value that is not a boolean "
                    f"({'/'.join(TRUE_WORDS + FALSE_WORDS)}, or empty for a missing cell)"))
            with tf.control_dependencies([known]):
                value = tf.where(true, 1.0, tf.where(false, 0.0, np.nan))
            return tf.reshape(value, [-1, 1])
        return _date_parts(text, self.column.name)

    def adapt(self, data) -> None:
        """Statistics of `data`: one 1-D tensor (`begin`, `update`, `finish`)."""
        self.begin()
        self.update(data)
        self.finish()

    def _quantiles(self) -> bool:
        return self.bins is not None and not self.column.options.get("bins")

    def begin(self) -> None:
        """Starts statistics over batches (`update` each, then `finish`)."""
        self.moments = (0, None, None)
        if self._quantiles():
            self.bins.reset_state()

    def update(self, raw) -> None:
        """Adds a 1-D batch of raw cells: its present rows' moments (merged as Keras's
        `Normalization.adapt` merges a dataset's batches) and quantile summary."""
        parts = self.parts(raw)
        present = tf.boolean_mask(parts, tf.reduce_all(tf.math.is_finite(parts), axis=1))
        if int(tf.shape(present)[0]) == 0:
            return
        self.moments = _merged_moments(self.moments, present)
        if self._quantiles():
            self.bins.update_state(present)

    def finish(self) -> None:
        """The adapted layers, from the batches given to `update`."""
        count, mean, variance = self.moments
        if count == 0:
            raise _no_values(self.column)
        if not self.norm.built:
            self.norm.build((None, self.width))
        self.norm.adapt_mean.assign(mean)
        self.norm.adapt_variance.assign(_scaled_variance(variance))
        self.norm.finalize_state()
        if self._quantiles():
            self.bins.finalize_state()
        self.adapted = True

    def fill_value(self):
        constant = _constant(self.column)
        if constant is not None:  # the constant as a raw cell of the column, in parts
            return self.parts(tf.constant([constant if self.column.type != "numeric"
                                           else float(constant)]))
        mean = tf.reshape(tf.cast(self.norm.mean, tf.float32), [1, self.width])
        return tf.round(mean) if self.column.missing == "mode" else mean

    def __call__(self, raw):
        parts = self.parts(raw)
        missing = tf.math.is_nan(parts)
        filled = tf.where(missing, self.fill_value(), parts)
        if self.bins is not None:
            out = _one_hot(self, len(self.boundaries()) + 1)(self.bins(filled[:, 0]))
        elif self.column.type == "boolean" or not self.column.options.get("standardize", True):
            out = filled
        else:
            out = self.norm(filled)
        out = tf.cast(out, tf.float32)
        if self.column.missing == "indicator":
            out = tf.concat([out, tf.cast(tf.reduce_any(missing, 1, keepdims=True),
                                          tf.float32)], axis=1)
        return out

    def boundaries(self) -> list:
        return [float(b) for b in self.bins.bin_boundaries]

    def names(self) -> list[str]:
        name = self.column.name
        if self.bins is not None:
            names = [f"{name}[bin {i}]" for i in range(len(self.boundaries()) + 1)]
        elif self.column.type == "date":
            names = [f"{name}.{part}" for part in _DATE_PARTS]
        else:
            names = [name]
        return names + ([f"{name}_missing"] if self.column.missing == "indicator" else [])

    def record(self) -> dict:
        record = {"mean": np.asarray(self.norm.mean).reshape(-1).tolist(),
                  "variance": np.asarray(self.norm.variance).reshape(-1).tolist()}
        if self.bins is not None:
            record["bin_boundaries"] = self.boundaries()
        return record

    def layers(self) -> list:
        return [self.norm] + ([self.bins] if self.bins is not None else [])


def _merged_moments(moments, batch):
    """(count, mean, variance) with `batch` [rows, width] merged in, by Keras 3's
    `Normalization.adapt` formula for a dataset (float32, the lack-of-fit sum of squares),
    so that one pass over many columns gives what each layer's own `adapt` gives."""
    from keras import ops

    count, mean, variance = moments
    rows = int(batch.shape[0])
    batch_mean, batch_variance = ops.mean(batch, axis=0), ops.var(batch, axis=0)
    if mean is None:
        mean = variance = ops.zeros_like(batch_mean)
    count += rows
    weight = float(rows) / count
    merged = mean * (1.0 - weight) + batch_mean * weight
    variance = (variance + (mean - merged) ** 2) * (1.0 - weight) + (
        batch_variance + (batch_mean - merged) ** 2) * weight
    return count, merged, variance


_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _date_parts(text, name: str = "date"):
    """[batch, 4] year, month, day, weekday (Monday 0) of YYYY-MM-DD strings, NaN for "";
    a date that does not exist (2022-13-45, 2022-02-30) fails with the column's name."""
    present = tf.strings.length(text) >= 10
    safe = tf.where(present, text, "1970-01-01")
    year = tf.strings.to_number(tf.strings.substr(safe, 0, 4), tf.int64)
    month = tf.strings.to_number(tf.strings.substr(safe, 5, 2), tf.int64)
    day = tf.strings.to_number(tf.strings.substr(safe, 8, 2), tf.int64)
    leap = ((year % 4 == 0) & (year % 100 != 0)) | (year % 400 == 0)
    days = tf.gather(tf.constant(_MONTH_DAYS, tf.int64), tf.clip_by_value(month - 1, 0, 11)) \
        + tf.cast(leap & tf.equal(month, 2), tf.int64)
    real = (month >= 1) & (month <= 12) & (day >= 1) & (day <= days)
    exists = tf.debugging.assert_equal(tf.reduce_all(real | ~present), True, message=(
        f"column {name!r} holds a date that does not exist (YYYY-MM-DD: a month 1 to 12 "
        f"and a day that month has)"))
    with tf.control_dependencies([exists]):
        year = tf.identity(year)
    # Days since 1970-01-01 (the proleptic Gregorian calendar), then the weekday.
    y = year - tf.cast(month <= 2, tf.int64)
    era = tf.math.floordiv(y, 400)
    yoe = y - era * 400
    doy = (153 * (month + tf.where(month > 2, tf.constant(-3, tf.int64), 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    weekday = tf.math.floormod(era * 146097 + doe - 719468 + 3, 7)
    parts = tf.cast(tf.stack([year, month, day, weekday], axis=1), tf.float32)
    return tf.where(present[:, None], parts, np.nan)


class _Tokens:
    """categorical (StringLookup / Hashing) and text (TextVectorization) columns."""

    def __init__(self, column: Column, record: dict | None):
        layers = _keras()
        self.column, options = column, column.options
        stats = record or {}
        vocabulary = stats.get("vocabulary")
        self.oov = int(options.get("num_oov_indices", 1))
        if column.type == "text":
            self.lookup = layers.TextVectorization(
                max_tokens=options.get("max_tokens"), vocabulary=vocabulary,
                output_mode=options.get("output_mode", "multi_hot"),
                ngrams=options.get("ngrams"))
        elif column.encoding == "hash":
            self.lookup = layers.Hashing(num_bins=options.get("num_bins", 32))
        else:
            size = options.get("max_size")
            self.lookup = layers.StringLookup(
                max_tokens=None if size is None else size + self.oov,
                num_oov_indices=self.oov, vocabulary=vocabulary, output_mode="int")
        self.fill = stats.get("fill", _constant(column))
        self.adapted = vocabulary is not None or column.encoding == "hash"

    def filled(self, raw):
        raw = tf.reshape(tf.strings.strip(tf.cast(raw, tf.string)), [-1])
        if self.fill is None or self.fill == "":
            return raw
        return tf.where(tf.equal(raw, ""), tf.constant(str(self.fill)), raw)

    def adapt(self, data) -> None:
        """The vocabulary of `data`: one 1-D tensor (`begin`, `update`, `finish`)."""
        self.begin()
        self.update(data)
        self.finish()

    def _hashed(self) -> bool:
        return self.column.encoding == "hash" and self.column.type != "text"

    def begin(self) -> None:
        """Starts a vocabulary over batches (`update` each, then `finish`)."""
        if not self._hashed():
            self.lookup.reset_state()

    def update(self, raw) -> None:
        """Counts the tokens of a 1-D batch of raw cells (the layer's `update_state`, as
        its `adapt` does per batch of a dataset)."""
        if self._hashed():
            return
        if self.column.missing == "mode":
            raw = tf.boolean_mask(raw, tf.not_equal(tf.strings.strip(raw), ""))
        self.lookup.update_state(self.filled(raw))

    def finish(self) -> None:
        """The vocabulary (the mode's fill too), from the batches given to `update`."""
        if not self._hashed():
            self.lookup.finalize_state()
        if self.column.missing == "mode":
            tokens = self.lookup.get_vocabulary(include_special_tokens=False)
            if not tokens:
                raise _no_values(self.column)
            self.fill = str(tokens[0])  # adapt orders the vocabulary by count: the mode
        self.adapted, self.size = True, None

    def vocabulary_size(self) -> int:
        if self.column.encoding == "hash" and self.column.type != "text":
            return int(self.column.options.get("num_bins", 32))
        if getattr(self, "size", None) is None:  # known once adapted; kept for traced calls
            self.size = int(self.lookup.vocabulary_size())
        return self.size

    def ids(self, raw):
        return self.lookup(self.filled(raw))

    def __call__(self, raw):
        if self.column.type == "text":
            out = tf.cast(self.lookup(self.filled(raw)), tf.float32)
        else:
            out = tf.cast(_one_hot(self, self.vocabulary_size())(self.ids(raw)), tf.float32)
        if self.column.missing == "indicator":
            empty = tf.equal(tf.reshape(tf.strings.strip(tf.cast(raw, tf.string)), [-1, 1]), "")
            out = tf.concat([out, tf.cast(empty, tf.float32)], axis=1)
        return out

    def oov_count(self, raw):
        """How many values went to an OOV bucket (0 for hashing)."""
        if self.column.type == "text" or self.column.encoding == "hash":
            return tf.constant(0, tf.int64)
        return tf.reduce_sum(tf.cast(self.ids(raw) < self.oov, tf.int64))

    def tokens(self) -> list[str]:
        if self.column.encoding == "hash" and self.column.type != "text":
            return [f"hash {i}" for i in range(self.vocabulary_size())]
        return [str(t) for t in self.lookup.get_vocabulary()]

    def names(self) -> list[str]:
        names = [f"{self.column.name}={t}" for t in self.tokens()]
        return names + ([f"{self.column.name}_missing"]
                        if self.column.missing == "indicator" else [])

    def record(self) -> dict:
        if self.column.encoding == "hash" and self.column.type != "text":
            return {}
        special = self.column.type == "text"
        record = {"vocabulary": [str(t) for t in self.lookup.get_vocabulary(
            **({} if special else {"include_special_tokens": False}))]}
        if self.fill not in (None, ""):
            record["fill"] = self.fill
        return record

    def layers(self) -> list:
        return [self.lookup]


class TablePreprocessor:
    """The preprocessing of a table's feature columns (see the module docstring).

    Args:
        columns: the feature columns, in the order their parts enter the model's input.
        record: statistics from `to_record` (then nothing is adapted), or None.

    Example:

        >>> prep = TablePreprocessor([Column("plan", "categorical")])
        >>> prep.adapt_arrays({"plan": np.array(["pro", "basic", "pro"], object)})
        >>> again = TablePreprocessor.from_record(prep.to_record())  # no adapting
        >>> again.output_names(), again.transform_arrays({"plan": np.array(["basic"], object)})
        (['plan=[UNK]', 'plan=pro', 'plan=basic'], array([[0., 0., 1.]], dtype=float32))
    """

    def __init__(self, columns, record: dict | None = None):
        self.columns = list(columns)
        stats = (record or {}).get("statistics", {})
        self.parts = {c.name: (_Numbers if c.type in ("numeric", "boolean", "date")
                               else _Tokens)(c, stats.get(c.name)) for c in self.columns}
        self.built = False
        if record is not None:
            self._build()

    @property
    def adapted(self) -> bool:
        return all(part.adapted for part in self.parts.values())

    def raw_specs(self) -> dict:
        """{column name: tf.TensorSpec([None], float32 or string)}: the raw inputs."""
        return {c.name: tf.TensorSpec([None], c.raw_dtype, name=c.name) for c in self.columns}

    def example_columns(self, rows: int = 32, seed: int = 0) -> dict[str, np.ndarray]:
        """Synthetic raw columns in the training data's range, to check an export with when
        the table itself is gone: numbers around the adapted mean, categories and words
        drawn from the vocabularies (and one empty cell per column), dates in 2000-2029.

        Example:

            >>> from graphfit.tabular.columns import Column
            >>> prep = TablePreprocessor([Column("age", "numeric")])
            >>> prep.adapt_arrays({"age": np.array([20.0, 40.0], np.float32)})
            >>> prep.example_columns(rows=3)["age"].shape
            (3,)
        """
        rng = np.random.default_rng(seed)
        statistics = self.to_record()["statistics"]
        columns = {}
        for column in self.columns:
            stats = statistics.get(column.name, {})
            if column.type == "numeric":
                mean = float(np.mean(stats.get("mean", [0.0])))
                spread = float(np.sqrt(np.mean(stats.get("variance", [1.0]))))
                values = (mean + spread * rng.standard_normal(rows)).astype(np.float32)
                values[0] = np.nan
            elif column.type == "boolean":
                values = rng.choice(["true", "false"], rows).astype(object)
            elif column.type == "date":
                values = np.array([f"{2000 + int(rng.integers(30))}-{1 + int(rng.integers(12)):02d}"
                                   f"-{1 + int(rng.integers(28)):02d}" for _ in range(rows)],
                                  object)
            else:
                words = [w for w in stats.get("vocabulary", []) if w and w != "[UNK]"] or ["x"]
                count = 3 if column.type == "text" else 1
                values = np.array([" ".join(rng.choice(words, count)) for _ in range(rows)],
                                  object)
            if column.type != "numeric":
                values[0] = ""
            columns[column.name] = values
        return columns

    def id_columns(self) -> list[str]:
        return [c.name for c in self.columns if c.type == "categorical" and c.encoding == "ids"]

    def adapt(self, dataset, on_batch=None) -> None:
        """Computes every column's statistics from `dataset` (raw column dicts, batched or
        not) in ONE pass over it: each batch updates every column's layers (their
        `update_state`; `Normalization`'s moments merged as its own `adapt` merges a
        dataset's batches), so a stream of files larger than memory is read once.
        `on_batch`: called with each batch too (a target's class names, a count).

        Raises:
            TableError: a column without any value to learn from.
        """
        if dataset.element_spec[self.columns[0].name].shape.rank == 0:
            dataset = dataset.batch(1024)
        parts = [self.parts[column.name] for column in self.columns]
        for part in parts:
            part.begin()
        for batch in dataset:
            for column, part in zip(self.columns, parts):
                part.update(tf.reshape(batch[column.name], [-1]))
            if on_batch is not None:
                on_batch(batch)
        for part in parts:
            part.finish()
        self._build()

    def adapt_arrays(self, columns: dict) -> None:
        """`adapt` on in-memory raw columns {name: 1-D array}: the same statistics, each
        layer adapted on the whole column at once (no tf.data pipeline to trace)."""
        tensors = _tensors(columns, self.columns)
        for column in self.columns:
            self.parts[column.name].adapt(tensors[column.name])
        self._build()

    def _build(self) -> None:
        """Runs the layers once eagerly, so that a traced function (`dataset.map`, an export)
        finds them built."""
        self.built = True
        dummy = {c.name: np.array([np.nan] if c.type == "numeric" else [""],
                                  np.float32 if c.type == "numeric" else object)
                 for c in self.columns}
        self.transform(_tensors(dummy, self.columns))

    def transform(self, features: dict):
        """The model's input from raw column tensors `features` {name: [batch]}: the float32
        vector, or a dict with the ids of `encoding: ids` columns (module docstring)."""
        if not self.built:
            raise ValueError("the TablePreprocessor has no statistics yet: call adapt (on the "
                             "training split) first, or build it from a record")
        ids = set(self.id_columns())
        vector = [self.parts[c.name](features[c.name]) for c in self.columns
                  if c.name not in ids]
        vector = tf.concat(vector, axis=1) if vector else None
        if not ids:
            return vector
        out = {} if vector is None else {FEATURES: vector}
        out.update({name: self.parts[name].ids(features[name]) for name in sorted(ids)})
        return out

    def transform_arrays(self, columns: dict, batch_size: int = 4096):
        """`transform` on in-memory raw columns, as NumPy (the vector, or a dict)."""
        tensors = _tensors(columns, self.columns)
        count = int(tf.shape(next(iter(tensors.values())))[0]) if tensors else 0
        pieces = [self.transform({name: t[start:start + batch_size]
                                  for name, t in tensors.items()})
                  for start in range(0, max(count, 1), batch_size)]
        return tf.nest.map_structure(lambda *parts: np.concatenate(
            [np.asarray(p) for p in parts]), *pieces)

    def oov_counts(self, columns: dict) -> dict:
        """{categorical column: how many of `columns`' values went to its OOV bucket}."""
        tensors = _tensors(columns, self.columns)
        return {c.name: int(self.parts[c.name].oov_count(tensors[c.name]))
                for c in self.columns if c.type == "categorical"}

    def output_names(self) -> list[str]:
        """A name per column of the input vector (ids columns not included)."""
        ids = set(self.id_columns())
        return [name for c in self.columns if c.name not in ids
                for name in self.parts[c.name].names()]

    def vocabulary_sizes(self) -> dict:
        return {c.name: self.parts[c.name].vocabulary_size() for c in self.columns
                if c.type in ("categorical", "text")}

    def keras_layers(self) -> list:
        """The Keras layers holding the statistics (an export tracks them)."""
        return [layer for part in self.parts.values() for layer in part.layers()]

    def to_record(self) -> dict:
        """JSON: the columns and, per column, its statistics."""
        return {"columns": [c.to_record() for c in self.columns],
                "statistics": {c.name: self.parts[c.name].record() for c in self.columns}}

    @classmethod
    def from_record(cls, record: dict) -> "TablePreprocessor":
        """Rebuilt from `to_record`'s JSON, with the same statistics."""
        return cls([Column.from_record(c) for c in record["columns"]], record)


def _tensors(columns: dict, specs) -> dict:
    return {c.name: tf.constant(np.asarray(columns[c.name]).astype(
        np.float32 if c.type == "numeric" else str), tf.float32 if c.type == "numeric"
        else tf.string) for c in specs}
