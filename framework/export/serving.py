"""TensorFlow Serving's REST request bodies, run on a SavedModel loaded with plain TensorFlow.

TensorFlow Serving's predict API (`POST /v1/models/NAME:predict`) takes a JSON body in one of
two shapes:

- row format, `{"instances": [...]}`: one entry per example; with one input each entry is
  that input's value, with several a dict `{input name: value}`;
- columnar format, `{"inputs": ...}`: the batch of the one input, or `{input name: batch}`;

and an optional `"signature_name"` (default `serving_default`). `serving_call` decodes such a
body into a call of the signature, so a test or a client checks what a server would answer
without one. For an export of a run trained on named columns, row entries may also be dicts
keyed by column name (`{"age": 61, "income": 4.2}`): they are put in the model's column order
(the SavedModel's `feature_names`). The helper needs only TensorFlow and NumPy.

Example:

    >>> import json
    >>> request = json.loads('{"instances": [[1.0, 2.0], [3.0, 4.0]]}')
    >>> sorted(request)
    ['instances']
"""

from __future__ import annotations

import base64
import binascii
import json

import numpy as np
import tensorflow as tf

__all__ = ["decode_request", "decode_arrays", "request_body", "serving_call",
           "missing_allowed"]


def _is_b64(value) -> bool:
    """TF Serving's form of binary data in JSON: {"b64": "<base64 text>"}."""
    return isinstance(value, dict) and list(value) == ["b64"]


def _json_cell(value, dtype: tf.DType):
    """A JSON value for a string input (numbers and booleans as text, null as "",
    {"b64": ...} as the bytes it encodes, as TF Serving reads it) or a float input (null as
    NaN: a missing value of a table's numeric column)."""
    if isinstance(value, list):
        return [_json_cell(v, dtype) for v in value]
    if dtype == tf.string:
        if _is_b64(value):
            try:
                return base64.b64decode(value["b64"], validate=True)
            except (binascii.Error, TypeError, ValueError):
                raise ValueError('a {"b64": ...} value is not valid base64 text') from None
        if value is None:
            return ""
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value)
    return float("nan") if value is None and dtype.is_floating else value


def _as_batch(values, spec: tf.TensorSpec, where: str, finite: bool = False) -> np.ndarray:
    if finite and spec.dtype.is_floating:
        _check_plain_numbers(values, where)
    if isinstance(values, list):
        values = _json_cell(values, spec.dtype)
    try:
        array = np.asarray(values, dtype=spec.dtype.as_numpy_dtype)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: cannot read the values as {spec.dtype.name}: {error}") \
            from None
    return _checked_batch(array, spec, where)


def _checked_batch(array: np.ndarray, spec: tf.TensorSpec, where: str) -> np.ndarray:
    if array.ndim == 0 or array.shape[0] == 0:
        raise ValueError(f"{where}: no examples (give a list with one entry per example)")
    if not spec.shape[1:].is_compatible_with(array.shape[1:]):
        raise ValueError(f"{where}: each example has shape {array.shape[1:]}, the signature "
                         f"takes {tuple(spec.shape[1:])}")
    return array


def _check_plain_numbers(values, where: str, index: tuple = ()) -> None:
    """A model without a table's missing-value handling takes finite numbers only: null,
    NaN, infinity and true/false are refused, naming the example and the position (the
    model would answer for them, with a number that means nothing)."""
    if isinstance(values, list):
        for i, value in enumerate(values):
            _check_plain_numbers(value, where, index + (i,))
        return
    bad = values is None or isinstance(values, bool) or (
        isinstance(values, float) and not np.isfinite(values))
    if bad:
        at = f"{where}[{']['.join(map(str, index))}]" if index else where
        raise ValueError(f"{at} is {json.dumps(values)}: this model takes finite numbers only "
                         f"(it was not trained on a table with missing-value handling). Fill "
                         f"or drop that value before sending it")


def _ordered_rows(instances: list, names: list[str]) -> list:
    """Dict rows keyed by column name, as rows in the model's column order."""
    for index, row in enumerate(instances):
        missing = [n for n in names if n not in row]
        if missing:
            where = "the request" if len(instances) == 1 else f"instances[{index}]"
            unknown = [str(key) for key in row if key not in names]
            also = f" and has the unknown column(s) {', '.join(unknown)}" if unknown else ""
            raise ValueError(f"{where} lacks the column(s) {', '.join(missing)}{also}; the "
                             f"model reads {', '.join(names)}")
        _no_unknown(row, names, "column", index, len(instances))
    return [[row[n] for n in names] for row in instances]


def _no_unknown(row: dict, names: list[str], what: str, index: int, count: int) -> None:
    unknown = [str(key) for key in row if key not in names]
    if unknown:
        where = "the request" if count == 1 else f"instances[{index}]"
        raise ValueError(f"{where} has the unknown {what}(s) {', '.join(unknown)}; the model "
                         f"reads {', '.join(names)}")


def request_body(body) -> dict:
    """The request body as a dict (JSON text parsed), or a ValueError."""
    if isinstance(body, (str, bytes)):
        try:
            body = json.loads(body)
        except json.JSONDecodeError as error:
            raise ValueError(f"the request body is not valid JSON ({error})") from None
    if not isinstance(body, dict):
        raise ValueError(f'a request body is a JSON object with "instances" or "inputs", got '
                         f"a {type(body).__name__}")
    return body


def _named_rows(rows: list, names: list[str]) -> list:
    """Each row's value of each input, for rows given as dicts {input name: value}."""
    for index, row in enumerate(rows):
        missing = [n for n in names if n not in row]
        if missing:
            unknown = [str(key) for key in row if key not in names]
            also = f" and has the unknown input(s) {', '.join(unknown)}" if unknown else ""
            raise ValueError(f"instances[{index}] lacks the input(s) {', '.join(missing)}{also}; "
                             f"the signature takes {', '.join(names)}")
        _no_unknown(row, names, "input", index, len(rows))
    return rows


def _columns(columns, specs: dict, feature_names: list[str], finite: bool = False
             ) -> dict[str, np.ndarray]:
    """The columnar format: the one input's batch, {input name: batch}, or (one input read
    by named columns) {column name: values}."""
    names = list(specs)
    if len(names) == 1 and not (isinstance(columns, dict) and names[0] in columns):
        if isinstance(columns, dict) and not feature_names:
            raise ValueError(f'"inputs" must give the input {names[0]} by name (got '
                             f'{", ".join(map(str, columns))})')
        if isinstance(columns, dict):
            rows = _ordered_rows([columns], feature_names)[0]
            columns = np.stack([np.asarray(column) for column in rows], axis=-1)
        columns = {names[0]: columns}
    if not isinstance(columns, dict) or set(columns) != set(names):
        given = f' (got {", ".join(map(str, columns))})' if isinstance(columns, dict) else ""
        raise ValueError(f'"inputs" must give the inputs {", ".join(names)} by name{given}')
    return {n: _as_batch(columns[n], specs[n], f'inputs["{n}"]', finite) for n in names}


def decode_request(body, signature, feature_names=()) -> dict[str, tf.Tensor]:
    """The keyword tensors for `signature` from a REST request body (a dict or JSON text).

    Args:
        body: `{"instances": [...]}` or `{"inputs": ...}` (see the module docstring).
        signature: a concrete function of a loaded SavedModel (`loaded.signatures[name]`).
        feature_names: the export's column names (`loaded.feature_names`), for rows given
            as dicts keyed by column name.

    Raises:
        ValueError: a body with neither or both keys, a missing input, values of the wrong
            shape or type.
    """
    arrays = decode_arrays(body, signature.structured_input_signature[1], feature_names)
    return {name: tf.constant(array) for name, array in arrays.items()}


def decode_arrays(body, specs: dict, feature_names=(), missing_allowed: bool = True
                  ) -> dict[str, np.ndarray]:
    """`decode_request` as NumPy arrays, for the signature's input `specs` ({name: spec});
    a server batches these before it calls the signature. Also refuses unknown columns or
    inputs, and, unless `missing_allowed` (a table's export, whose numeric columns fill a
    missing cell), null, NaN, infinite and true/false values of a floating input."""
    finite = not missing_allowed
    body = request_body(body)
    names = list(specs)
    if ("instances" in body) == ("inputs" in body):
        raise ValueError('a request body holds exactly one of "instances" (row format) or '
                         '"inputs" (columnar format)')
    feature_names = [n.decode() if isinstance(n, bytes) else str(n) for n in feature_names]
    if "inputs" in body:
        return _columns(body["inputs"], specs, feature_names, finite)
    rows = body["instances"]
    if not isinstance(rows, list) or not rows:
        raise ValueError('"instances" must be a non-empty list, one entry per example')
    dicts = [isinstance(row, dict) and not _is_b64(row) for row in rows]
    if any(dicts) and not all(dicts):
        raise ValueError("instances mix dicts and plain values: give every instance the same "
                         "way")
    if len(names) == 1 and not all(dicts):
        return {names[0]: _as_batch(rows, specs[names[0]], "instances", finite)}
    if len(names) == 1 and feature_names and names[0] not in rows[0]:
        return {names[0]: _as_batch(_ordered_rows(rows, feature_names), specs[names[0]],
                                    "instances", finite)}
    if not all(dicts):
        raise ValueError(f"with several inputs ({', '.join(names)}) each instance is a dict "
                         f"{{input name: value}}")
    rows = _named_rows(rows, names)
    return {n: _row_batch(rows, n, specs[n], finite) for n in names}


def _row_batch(rows: list, name: str, spec: tf.TensorSpec, finite: bool) -> np.ndarray:
    """Input `name`'s batch from dict rows; a cell that does not fit names its row."""
    try:
        return _as_batch([row[name] for row in rows], spec, f'instances[...]["{name}"]',
                         finite)
    except ValueError:
        for index, row in enumerate(rows):
            where = f'instances[{index}]["{name}"]'
            if finite and spec.dtype.is_floating:
                _check_plain_numbers(row[name], where)
            _as_batch([row[name]], spec, where)
        raise


def missing_allowed(loaded) -> bool:
    """Whether a loaded export fills missing values itself: a table's (its preprocessing
    layers impute a numeric column's gap); an export from before this was recorded too."""
    layers = getattr(loaded, "preprocessing_layers", None)
    return layers is None or len(layers) > 0


def serving_call(loaded, body) -> dict[str, np.ndarray]:
    """Runs a REST request body on a SavedModel loaded with `tf.saved_model.load`.

    Args:
        loaded: the loaded SavedModel.
        body: the request (dict or JSON text); its `signature_name` picks the signature.

    Returns:
        {output name: NumPy array}, as the signature returns them.
    """
    body = request_body(body)
    name = body.get("signature_name", "serving_default")
    if name not in loaded.signatures:
        raise ValueError(f"the SavedModel has no signature {name!r} (it has "
                         f"{', '.join(sorted(loaded.signatures))})")
    signature = loaded.signatures[name]
    names = getattr(loaded, "feature_names", None)
    names = [] if names is None else names.numpy().tolist()
    arrays = decode_arrays(body, signature.structured_input_signature[1], names,
                           missing_allowed(loaded))
    outputs = signature(**{key: tf.constant(array) for key, array in arrays.items()})
    return {key: value.numpy() for key, value in outputs.items()}
