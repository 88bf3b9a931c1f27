"""TensorFlow Serving's layout: `BASE/<name>/<version>/` SavedModels and their warm-up file.

TensorFlow Serving watches a model's base folder (`--model_base_path=BASE/<name>`) and serves
the highest numbered version folder in it (tensorflow/serving#266: a SavedModel that is not in
a numbered folder is not found). `export_to_serving_dir` writes the next free version number
(a new folder, moved into place once complete, so a watching server never sees half of it) with
`assets.extra/tf_serving_warmup_requests`: a TFRecord of `PredictionLog` protos, each a
`PredictRequest` on `serving_default`, that TensorFlow Serving (and `graphfit serve`) replays
before the version takes requests, so the first client does not wait for the graph to warm.

The warm-up records are protobuf bytes written here from the field numbers of
`tensorflow_serving/apis/prediction_log.proto` (PredictionLog.predict_log = 6,
PredictLog.request = 1, PredictRequest.model_spec = 1 and inputs = 2, ModelSpec.name = 1 and
signature_name = 3), with TensorFlow's own `TensorProto`: TensorFlow Serving's Python protos
(`tensorflow-serving-api`) are not needed to write them; the tests parse them with those.

Example:

    >>> next_version("/nonexistent/folder")
    1
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import tensorflow as tf

__all__ = ["WARMUP_FILE", "next_version", "versions", "warmup_record", "write_warmup",
           "read_warmup", "export_to_serving_dir"]

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")


def versions(base: str) -> list[int]:
    """The version numbers of the complete SavedModels in a model's base folder, ascending."""
    if not os.path.isdir(base):
        return []
    return sorted(int(name) for name in os.listdir(base)
                  if name.isdigit() and os.path.isfile(os.path.join(base, name,
                                                                    "saved_model.pb")))


def next_version(base: str) -> int:
    """One above the highest numbered folder in `base` (complete or not); 1 for a new one."""
    if not os.path.isdir(base):
        return 1
    taken = [int(name) for name in os.listdir(base) if name.isdigit()]
    return max(taken, default=0) + 1


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def warmup_record(inputs: dict, model_name: str, signature: str = "serving_default") -> bytes:
    """One serialized `PredictionLog` holding a `PredictRequest` of `inputs` ({name: rows})."""
    spec = _field(1, model_name.encode()) + _field(3, signature.encode())
    request = _field(1, spec)
    for name, rows in inputs.items():
        tensor = tf.make_tensor_proto(np.asarray(rows)).SerializeToString()
        request += _field(2, _field(1, name.encode()) + _field(2, tensor))
    return _field(6, _field(1, request))


def write_warmup(saved_model: str, inputs: dict, model_name: str, requests: int = 4) -> str:
    """Writes `requests` warm-up records (a few rows each) in the SavedModel's assets.extra."""
    path = os.path.join(saved_model, WARMUP_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    rows = len(next(iter(inputs.values())))
    with tf.io.TFRecordWriter(path) as writer:
        for start in range(0, min(rows, requests * 8), 8):
            part = {name: np.asarray(value)[start:start + 8] for name, value in inputs.items()}
            writer.write(warmup_record(part, model_name))
    return path


def _fields(data: bytes):
    """(field number, payload) of the length-delimited fields of a protobuf message."""
    position = 0
    while position < len(data):
        key, position = _read_varint(data, position)
        if key & 7 != 2:
            raise ValueError("not a warm-up record graphfit reads (a field that is not "
                             "length-delimited)")
        size, position = _read_varint(data, position)
        yield key >> 3, data[position:position + size]
        position += size


def _read_varint(data: bytes, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, position


def read_warmup(saved_model: str) -> list[dict[str, np.ndarray]]:
    """The inputs of each warm-up request in a SavedModel's assets.extra ([] without one)."""
    path = os.path.join(saved_model, WARMUP_FILE)
    if not os.path.isfile(path):
        return []
    found = []
    for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
        for number, log in _fields(record):
            if number != 6:
                continue
            request = dict(_fields(log)).get(1, b"")
            inputs = {}
            for field, entry in _fields(request):
                if field == 2:
                    parts = dict(_fields(entry))
                    proto = tf.make_tensor_proto(0)
                    proto.ParseFromString(parts.get(2, b""))
                    inputs[parts.get(1, b"").decode()] = tf.make_ndarray(proto)
            found.append(inputs)
    return found


def export_to_serving_dir(model, serving_dir: str, name: str, *, preprocessing=None,
                          sample: dict | None = None, layers=()):
    """Exports `model` as `serving_dir/name/<next version>/` with a warm-up file.

    Returns:
        (the version folder, the `ExportCheck` of the SavedModel against graphfit).

    Raises:
        ValueError: a `name` that is not a plain folder name, or what `export_as` refuses.
    """
    from graphfit.export.formats import export_as, sample_inputs
    from graphfit.export.signatures import input_specs

    if not name or name in (".", "..") or os.sep in name or "/" in name or ":" in name:
        raise ValueError(f"the model name {name!r} must be a plain folder name (no '/' or "
                         f"':'), as TensorFlow Serving's URLs use it")
    base = os.path.join(os.path.abspath(serving_dir), name)
    table = preprocessing.table_preprocessor() if preprocessing is not None else None
    if sample is None:
        sample = table.example_columns() if table is not None else \
            sample_inputs(input_specs(model), preprocessing)
    folder = os.path.join(base, str(next_version(base)))
    staging = os.path.join(base, f".staging-{os.getpid()}")
    check = export_as(model, staging, "saved_model", preprocessing=preprocessing,
                      sample=sample, layers=layers)
    write_warmup(staging, sample, name)
    os.replace(staging, folder)
    return folder, dataclasses.replace(check, path=folder)
