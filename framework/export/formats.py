"""Export formats other than the SavedModel: TFLite (LiteRT) and ONNX, each checked at export.

Both start from the SavedModel graphfit writes (`export_model`), so the preprocessing inside
it (standardization, column order) goes along where the format can hold its ops:

- `tflite`: TensorFlow's `TFLiteConverter` on the `serving_default` signature, TFLite builtin
  ops only (a model that needs TensorFlow ops, string ops or lookup tables among them, is
  refused with the ops named, and their layers' name scopes: a Flex build of the runtime would
  be needed; the converter's full report goes to `FILE.tflite.log`). Optional
  post-training quantization: `float16` (weights stored as float16) or `dynamic_range`
  (weights as int8, activations quantized on the fly). Run by LiteRT's interpreter
  (`ai_edge_litert`, or `tf.lite.Interpreter` where it is not installed).
- `onnx`: tf2onnx on the `serving_default` signature (the inputs and outputs keep their
  names), run by onnxruntime. An op tf2onnx cannot convert, or that onnxruntime cannot run,
  is named in the error.

`check_export` runs the exported file in its own runtime on a sample of rows and compares
with graphfit's predictions; `ExportCheck` is what it found.

Example:

    >>> TOLERANCES["tflite"], TOLERANCES["tflite/float16"]
    (0.0001, 0.02)
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import sys
import tempfile
import warnings

import numpy as np
import tensorflow as tf

__all__ = ["FORMATS", "QUANTIZATIONS", "TOLERANCES", "ExportCheck", "convert_saved_model",
           "check_export", "export_as", "sample_inputs", "runtime_of", "run_export",
           "predictions"]

FORMATS = ("saved_model", "tflite", "onnx")
QUANTIZATIONS = ("float16", "dynamic_range")
# The largest |exported - graphfit| allowed, relative to max(1, max |graphfit's output|).
TOLERANCES = {"saved_model": 1e-5, "tflite": 1e-4, "onnx": 1e-4,
              "tflite/float16": 2e-2, "tflite/dynamic_range": 1e-1}
SIGNATURE = "serving_default"
ONNX_OPSET = 17


@dataclasses.dataclass(frozen=True)
class ExportCheck:
    """The export-time check: the exported model against graphfit on the same rows.

    Example:

        >>> check = ExportCheck("onnx", "m.onnx", "onnxruntime", 32, 2e-7, 1e-4)
        >>> check.passed, str(check).split(":")[0]
        (True, 'onnx check')
    """

    format: str
    path: str
    runtime: str
    rows: int
    max_difference: float
    tolerance: float

    @property
    def passed(self) -> bool:
        """Whether the largest difference is within the tolerance."""
        return bool(self.max_difference <= self.tolerance)

    def __str__(self) -> str:
        verdict = "ok" if self.passed else "FAILED"
        return (f"{self.format} check: {self.rows} rows through {self.runtime}, largest "
                f"difference from graphfit's predictions {self.max_difference:.3g} (tolerance "
                f"{self.tolerance:g} x max(1, |output|)): {verdict}")


def _check_format(format: str, quantize: str | None) -> str:
    if format not in FORMATS:
        raise ValueError(f"format={format!r}: graphfit exports {', '.join(FORMATS)}")
    if quantize is not None and quantize not in QUANTIZATIONS:
        raise ValueError(f"quantize={quantize!r}: choose {' or '.join(QUANTIZATIONS)} (or "
                         f"leave it out for float32)")
    if quantize is not None and format != "tflite":
        raise ValueError(f"quantize={quantize!r} applies to the tflite format only (got "
                         f"format={format!r})")
    return f"{format}/{quantize}" if quantize else format


def _tflite_bytes(saved_model: str, quantize: str | None, path: str) -> bytes:
    converter = tf.lite.TFLiteConverter.from_saved_model(saved_model, signature_keys=[SIGNATURE])
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    if quantize is not None:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if quantize == "float16":
        converter.target_spec.supported_types = [tf.float16]
    with _stderr_kept() as printed:  # the converter prints its MLIR diagnostics there
        try:
            return converter.convert()
        except Exception as error:  # its ConverterError lists the ops it could not take
            failure = error
    detail = f"{type(failure).__name__}: {failure}\n\n{''.join(printed)}"
    log = f"{path}.log"
    os.makedirs(os.path.dirname(log), exist_ok=True)
    with open(log, "w") as file:
        file.write(detail)
    raise ValueError(f"cannot convert to TFLite: {_refused_ops(detail)}. (String ops other "
                     f"than lookup tables need TensorFlow's Flex ops, which LiteRT's standard "
                     f"runtime lacks.) Serve the SavedModel instead, or move that part out of "
                     f"the model. The converter's full report: {log}") from None


def _refused_ops(detail: str) -> str:
    """Which TensorFlow ops TFLite's builtins cannot hold, and where (the node's name scope,
    a layer's name), from the converter's report; else its first lines."""
    ops = sorted(set(re.findall(r"'tf\.(\w+)' op is neither a custom op nor a flex op",
                                detail)))
    if not ops:
        return _first_lines(detail)
    places = sorted({node.rpartition("/")[0] for op, node in
                     re.findall(r'fused\["(\w+):", "([^"@]+)@', detail)
                     if op in ops and "/" in node})
    where = f" (in {', '.join(places[:5])})" if places else ""
    return f"TFLite's builtin ops cannot hold the TensorFlow op(s) {', '.join(ops)}{where}"


@contextlib.contextmanager
def _stderr_kept():
    """Holds what is written to the process's stderr (file descriptor 2, where TensorFlow's
    C++ code writes) in a temporary file: the list it gives holds that text once it ends."""
    import tempfile

    printed: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as held:
        os.dup2(held.fileno(), 2)
        try:
            yield printed
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            printed.append(held.read().decode(errors="replace"))


def _first_lines(text: str, count: int = 6) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return " | ".join(lines[:count]) or "the converter failed"


def _onnx_bytes(saved_model: str) -> bytes:
    try:
        import tf2onnx
    except ImportError:
        raise ValueError("the onnx format needs tf2onnx and onnxruntime: pip install "
                         "'graphfit[onnx]'") from None
    import inspect

    loaded = tf.saved_model.load(saved_model)  # kept alive: the signature uses its variables
    signature = loaded.signatures[SIGNATURE]
    specs = signature.structured_input_signature[1]
    names = list(specs)

    def call(*tensors):
        return signature(**dict(zip(names, tensors)))

    call.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])
    function = tf.function(call, autograph=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proto, _ = tf2onnx.convert.from_function(
            function, input_signature=[specs[n] for n in names], opset=ONNX_OPSET)
    import onnx.defs

    unconverted = sorted({node.op_type for node in proto.graph.node
                          if not onnx.defs.has(node.op_type, node.domain or "")})
    if unconverted:
        raise ValueError(
            f"cannot convert to ONNX: tf2onnx has no ONNX equivalent of the TensorFlow op(s) "
            f"{', '.join(unconverted)} (string ops and lookup tables of raw-column "
            f"preprocessing are among those it may lack); serve the SavedModel instead")
    del loaded
    return proto.SerializeToString()


def convert_saved_model(saved_model: str, path: str, format: str, *,
                        quantize: str | None = None) -> str:
    """Writes the SavedModel's `serving_default` signature at `path` in `format`.

    Args:
        saved_model: a SavedModel folder (as `export_model` writes it).
        path: the file to write (`.tflite`, `.onnx`); it must not exist.
        format: "tflite" or "onnx".
        quantize: TFLite only: "float16" or "dynamic_range"; None: float32.

    Returns:
        The file's absolute path.

    Raises:
        ValueError: an unknown format or quantization, an existing `path`, or ops the format
            cannot hold (named).
    """
    _check_format(format, quantize)
    if format == "saved_model":
        raise ValueError("format='saved_model': the SavedModel is already there; use "
                         "export_model to write one")
    path = os.path.abspath(path)
    if os.path.exists(path):
        raise ValueError(f"{path} already exists; export to a new file: an export never "
                         f"overwrites")
    content = _tflite_bytes(saved_model, quantize, path) if format == "tflite" \
        else _onnx_bytes(saved_model)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    staging = f"{path}.partial"
    with open(staging, "wb") as file:
        file.write(content)
    os.replace(staging, path)
    return path


def runtime_of(format: str) -> str:
    """The runtime that runs an export of `format` here (for the check's line)."""
    if format == "onnx":
        return "onnxruntime"
    if format == "tflite":
        try:
            import ai_edge_litert.interpreter  # noqa: F401
            return "LiteRT's interpreter (ai_edge_litert)"
        except ImportError:
            return "tf.lite.Interpreter"
    return "tf.saved_model.load"


def _run_tflite(path: str, inputs: dict) -> dict:
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        Interpreter = tf.lite.Interpreter
    with warnings.catch_warnings():  # tf.lite.Interpreter's deprecation notice
        warnings.simplefilter("ignore")
        interpreter = Interpreter(model_path=path)
    runner = interpreter.get_signature_runner(SIGNATURE)
    return dict(runner(**inputs))


def _run_onnx(path: str, inputs: dict) -> dict:
    import onnxruntime

    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    return dict(zip(names, session.run(names, inputs)))


def run_export(path: str, format: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """{output name: array}: the export at `path` run in its own runtime on `inputs`."""
    if format == "tflite":
        return _run_tflite(path, inputs)
    if format == "onnx":
        return _run_onnx(path, inputs)
    loaded = tf.saved_model.load(path)
    outputs = loaded.signatures[SIGNATURE](**{k: tf.constant(v) for k, v in inputs.items()})
    return {k: v.numpy() for k, v in outputs.items()}


def check_export(path: str, format: str, inputs: dict[str, np.ndarray], expected: dict,
                 quantize: str | None = None) -> ExportCheck:
    """Runs the export in its runtime on `inputs` and compares with `expected`.

    Args:
        path: the export (SavedModel folder, .tflite or .onnx file).
        format: its format.
        inputs: {input name: rows}, as the signature takes them.
        expected: {output name: graphfit's predictions on those rows}.
        quantize: the TFLite quantization it was written with (its tolerance is wider).

    Returns:
        The `ExportCheck` (look at `.passed`).
    """
    key = _check_format(format, quantize)
    outputs = run_export(path, format, inputs)
    difference, scale = 0.0, 1.0
    for name, want in expected.items():
        if name not in outputs:
            raise ValueError(f"the {format} export has no output {name!r} (it has "
                             f"{', '.join(outputs)})")
        want = np.asarray(want, np.float64)
        got = np.asarray(outputs[name], np.float64).reshape(want.shape)
        difference = max(difference, float(np.max(np.abs(got - want), initial=0.0)))
        scale = max(scale, float(np.max(np.abs(want), initial=0.0)))
    rows = len(next(iter(inputs.values())))
    return ExportCheck(key, path, runtime_of(format), rows, difference / scale,
                       TOLERANCES[key])


def sample_inputs(specs: dict, preprocessing=None, rows: int = 32,
                  seed: int = 0) -> dict[str, np.ndarray]:
    """Synthetic raw rows for each floating input: at the training data's scale (its
    standardization statistics) when known, else uniform in [0, 1).

    Raises:
        ValueError: an input that is not floating (strings, indices): pass real rows.
    """
    rng = np.random.default_rng(seed)
    sample = {}
    for name, spec in specs.items():
        if not spec.dtype.is_floating or not spec.shape[1:].is_fully_defined():
            raise ValueError(
                f"cannot make sample rows for the input {name!r} ({spec.dtype.name}, shape "
                f"{tuple(spec.shape)}): pass `sample=` (a few real rows, {{input name: "
                f"array}}) to check the export with")
        shape = (rows, *spec.shape[1:])
        values = rng.random(shape)
        mean = getattr(preprocessing, "mean", None)
        if mean is not None and (preprocessing.input_name in (None, name)):
            values = mean + preprocessing.std * rng.standard_normal((rows, mean.size))
        sample[name] = np.asarray(values, spec.dtype.as_numpy_dtype).reshape(shape)
    return sample


def export_as(model, path: str, format: str = "saved_model", *, preprocessing=None,
              quantize: str | None = None, sample: dict | None = None,
              classify: bool | None = None, layers=(), more_functions=None) -> ExportCheck:
    """Exports `model` in `format` at `path` and checks it in the format's runtime.

    Args:
        model: a built graphfit model.
        path: the SavedModel folder, or the .tflite / .onnx file, to create.
        format: "saved_model", "tflite" or "onnx".
        preprocessing: a `Preprocessing` to put inside (standardization, column order).
        quantize: TFLite only: "float16" or "dynamic_range".
        sample: {input name: raw rows} to check with; default `sample_inputs`.
        classify, layers, more_functions: as `export_model` (the SavedModel's extra
            signatures; TFLite and ONNX hold `serving_default` only).

    Returns:
        The `ExportCheck`; the export is removed and a ValueError raised when it fails.
    """
    from graphfit.export.saved_model import export_model
    from graphfit.export.signatures import input_specs

    _check_format(format, quantize)
    table = preprocessing.table_preprocessor() if preprocessing is not None else None
    specs = table.raw_specs() if table is not None else input_specs(model)
    if sample is not None:
        inputs = sample
    elif table is not None:  # the raw columns by name, in the training data's range
        inputs = table.example_columns()
    else:
        inputs = sample_inputs(specs, preprocessing)
    missing = [name for name in specs if name not in inputs]
    if missing:
        raise ValueError(f"sample lacks the input(s) {', '.join(missing)}; give {{input name: "
                         f"rows}} for {', '.join(specs)}")
    inputs = {name: np.asarray(inputs[name]) for name in specs}
    expected = predictions(model, preprocessing, inputs)
    if format == "saved_model":
        path = export_model(model, path, preprocessing=preprocessing, classify=classify,
                            layers=layers, more_functions=more_functions)
        return _verified(path, format, inputs, quantize, path, expected)
    if os.path.exists(path):
        raise ValueError(f"{os.path.abspath(path)} already exists; export to a new file: an "
                         f"export never overwrites")
    staging = tempfile.mkdtemp(prefix=".saved-model-")
    try:
        saved = export_model(model, os.path.join(staging, "model"), preprocessing=preprocessing,
                             classify=False)
        path = convert_saved_model(saved, path, format, quantize=quantize)
        return _verified(path, format, inputs, quantize, path, expected)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def predictions(model, preprocessing, inputs: dict) -> dict[str, np.ndarray]:
    """graphfit's own predictions on raw `inputs`: preprocessing on the host, then the model
    (as `graphfit predict` does), by the signature's output names."""
    from graphfit.export.signatures import input_specs

    table = preprocessing.table_preprocessor() if preprocessing is not None else None
    if table is not None:  # raw columns by name, through the run's Keras layers
        outputs = model.predict(table.transform_arrays(inputs), verbose=0)
        return dict(outputs) if isinstance(outputs, dict) else {"outputs": outputs}
    names = list(input_specs(model))
    spec = model.built_input_spec
    if isinstance(spec, dict):
        x = {n: inputs[n] for n in names}
    elif isinstance(spec, (list, tuple)):
        x = [inputs[n] for n in names]
    else:
        x = inputs[names[0]]
    if preprocessing is not None:
        x = preprocessing.apply_to_inputs(x)
    outputs = model.predict(x, verbose=0)
    return dict(outputs) if isinstance(outputs, dict) else {"outputs": outputs}


def _verified(path, format, inputs, quantize, remove, expected) -> ExportCheck:
    try:
        check = check_export(path, format, inputs, expected, quantize)
    except Exception:
        _remove(remove)
        raise
    if not check.passed:
        _remove(remove)
        raise ValueError(f"{check}; the export was removed")
    return check


def _remove(path: str) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.exists(path):
        os.remove(path)
