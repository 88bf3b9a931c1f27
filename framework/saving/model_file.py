"""One file for a whole model: `model.save("x.graphfit")` and `load_model("x.graphfit")`.

A `.graphfit` file is a zip archive, as Keras's `.keras` is, holding:

    metadata.json    the format and its version; graphfit's, TensorFlow's and Keras's versions
    config.json      the model: {"type": its registered class name, "config": get_config()},
                     the input specs it was built for, compile's arguments
                     (`compile_config`), and the module of every class it names
    weights/ckpt.*   a TensorFlow checkpoint of the model and its optimizer

JSON for what describes the model (data: read with `json.load`, never unpickled) and
TensorFlow's checkpoint for the state: the format `save_weights` and training checkpoints
use, which restores by object path, so every tracked state comes back (moving statistics,
Dropout generators, optimizer slots and iterations, a loss scale) and a file that does not
fit the rebuilt model is refused instead of loaded by position.

Classes are found by their registered names only (`graphfit.register_layer`, the optimizer
registry; Keras's serializer for losses and metrics). With `safe_mode=True`, the default,
loading imports no module: a class that is not registered is refused with the module that
defines it; `safe_mode=False` imports that module, for a file you trust.

Example:

    >>> import os, tempfile
    >>> import numpy as np, graphfit as gf
    >>> from graphfit import layers
    >>> model = gf.Sequential([layers.Dense(2)], input_shape=(3,))
    >>> model.compile(optimizer="adam", loss="mse")
    >>> path = model.save(os.path.join(tempfile.mkdtemp(), "model.graphfit"))
    >>> loaded = gf.models.load_model(path)
    >>> x = np.ones((1, 3), "float32")
    >>> bool(np.allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0)))
    True
"""

from __future__ import annotations

import datetime
import importlib
import json
import os
import tempfile
import zipfile

import keras
import tensorflow as tf

from graphfit.core.registry import LAYERS
from graphfit.saving import compile_config as compile_config_lib
from graphfit.saving.checkpoints import optimizer_parts
from graphfit.saving.weights_io import mismatch_reason

__all__ = ["save_model", "load_model", "model_to_json", "model_from_json", "EXTENSION",
           "FORMAT_VERSION"]

EXTENSION = ".graphfit"
FORMAT_VERSION = 1
_FORMAT = "graphfit-model"
_CHECKPOINT = "ckpt"
_WEIGHTS_DIR = "weights/"


# ------------------------------------------------------------------------------ paths
def _path(filepath, verb: str) -> str:
    if not isinstance(filepath, (str, os.PathLike)):
        raise TypeError(f"filepath must be a path ending in {EXTENSION!r}. "
                        f"Received: filepath={filepath!r}")
    path = os.fspath(filepath)
    if path.endswith((".keras", ".h5", ".hdf5")):
        kind = "a Keras .keras file" if path.endswith(".keras") else "an HDF5 file"
        advice = ("keras.saving.load_model(...) reads it into a Keras model" if verb == "load"
                  else f"save to a path ending in {EXTENSION!r} (model.export(...) writes a "
                       f"TensorFlow SavedModel for serving)")
        raise ValueError(f"{path!r} names {kind}, but graphfit {verb}s whole models as "
                         f"{EXTENSION} files: {advice}.")
    if not path.endswith(EXTENSION):
        raise ValueError(f"A graphfit model file's name ends in {EXTENSION!r}. "
                         f"Received: filepath={path!r}")
    return path


def _check_graphfit_model(model) -> None:
    module = type(model).__module__ or ""
    if module.split(".")[0] == "keras" or isinstance(model, keras.Model):
        raise ValueError(
            f"{type(model).__name__} is a Keras model; a .graphfit file holds graphfit models. "
            f"Save it with Keras: model.save('model.keras'), or build it with graphfit "
            f"(gf.Sequential, gf.GraphModel, a gf.Model subclass) to save it here.")
    if not callable(getattr(model, "get_config", None)) or not hasattr(model, "variables"):
        raise TypeError(f"save_model takes a graphfit Model. Received: {model!r}")


# ----------------------------------------------------------------------------- config
def _registered_name(cls: type) -> str:
    for name in LAYERS.names():
        if LAYERS.get(name) is cls:
            return name
    raise ValueError(
        f"{cls.__module__}.{cls.__qualname__} is not registered, so a saved config cannot "
        f"name it. Decorate the class with @graphfit.register_layer.")


def _named_classes(config, found: dict) -> dict:
    """{registered name: module} of every `{"type": name, "config": {...}}` entry in
    `config` (the layers of a Sequential, the nodes of a GraphModel, ...)."""
    if isinstance(config, dict):
        if isinstance(config.get("type"), str) and isinstance(config.get("config"), dict):
            name = config["type"]
            found[name] = LAYERS.get(name).__module__ if name in LAYERS else None
        for value in config.values():
            _named_classes(value, found)
    elif isinstance(config, list):
        for value in config:
            _named_classes(value, found)
    return found


def _encode_spec(spec):
    if isinstance(spec, tf.TensorSpec):
        return {"spec": {"shape": spec.shape.as_list(), "dtype": spec.dtype.name}}
    if isinstance(spec, dict):
        return {"dict": {key: _encode_spec(value) for key, value in spec.items()}}
    return {"list": [_encode_spec(value) for value in spec]}


def _decode_spec(encoded):
    if "spec" in encoded:
        return tf.TensorSpec(encoded["spec"]["shape"], encoded["spec"]["dtype"])
    if "dict" in encoded:
        return {key: _decode_spec(value) for key, value in encoded["dict"].items()}
    return [_decode_spec(value) for value in encoded["list"]]


def _model_config(model) -> dict:
    entry = {"type": _registered_name(type(model)), "config": model.get_config()}
    try:
        entry = json.loads(json.dumps(entry))
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"{type(model).__name__}.get_config() must return plain data (numbers, strings, "
            f"lists, dicts) to be saved: {error}") from None
    unloadable = _unloadable_objects(entry["config"], "")
    if unloadable:
        raise ValueError(
            f"The model cannot be saved: load_model could not rebuild "
            f"{'; '.join(unloadable)}: a function, a lambda, or a Keras class not registered "
            f"with @keras.saving.register_keras_serializable. Use a Keras object "
            f"(keras.regularizers.L2(0.01), keras.constraints.NonNeg()) or register the class.")
    spec = model.built_input_spec
    return {"model": entry, "build": None if spec is None else _encode_spec(spec),
            "compile": compile_config_lib.compile_config(model),
            "classes": _named_classes(entry, {})}


def _unloadable_objects(config, where: str) -> list[str]:
    """Where `config` holds a Keras-serialized object that deserializing cannot find again:
    a lambda, or a function or class outside Keras that Keras's registry does not know."""
    found = []
    if isinstance(config, dict):
        lambda_ = config.get("class_name") == "__lambda__"
        outside = "module" in config and not str(config["module"]).startswith("keras")
        if lambda_ or (outside and "class_name" in config
                       and keras.saving.get_registered_object(config.get("registered_name"))
                       is None):
                found.append(f"{where or 'the model'} ({config['class_name']} from "
                             f"{config.get('module')})")
        for key, value in config.items():
            found += _unloadable_objects(value, f"{where}.{key}" if where else str(key))
    elif isinstance(config, list):
        for index, value in enumerate(config):
            found += _unloadable_objects(value, f"{where}[{index}]")
    return found


def _metadata() -> dict:
    import graphfit

    return {"format": _FORMAT, "format_version": FORMAT_VERSION,
            "graphfit_version": graphfit.__version__, "tensorflow_version": tf.__version__,
            "keras_version": keras.__version__,
            "saved_at": datetime.datetime.now(datetime.timezone.utc).isoformat()}


# ------------------------------------------------------------------------------- save
def save_model(model, filepath, overwrite: bool = True) -> str:
    """Writes `model` (config, weights, compile arguments, optimizer state) to one file.

    The file is written next to its destination and renamed over it, so an interrupted
    save leaves any earlier file whole.

    Args:
        model: a graphfit model whose class is registered (`Sequential`, `GraphModel`, or a
            subclass decorated with `@graphfit.register_layer`) and whose `get_config()`
            rebuilds it with `from_config`.
        filepath: where to write; the name must end in ".graphfit".
        overwrite: replace an existing file (False: refuse).

    Returns:
        The path written.

    Raises:
        ValueError: for another extension, a Keras model, an unregistered class, or compile
            arguments a file cannot hold.
        FileExistsError: when the file exists and `overwrite` is False.
    """
    path = _path(filepath, "save")
    _check_graphfit_model(model)
    if not overwrite and os.path.exists(path):
        raise FileExistsError(f"{path!r} exists; pass overwrite=True to replace it.")
    config = _model_config(model)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    handle, staging = tempfile.mkstemp(prefix=".graphfit-save-", suffix=".tmp", dir=folder)
    os.close(handle)
    try:
        with tempfile.TemporaryDirectory() as weights, \
                zipfile.ZipFile(staging, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("metadata.json", json.dumps(_metadata(), indent=1))
            archive.writestr("config.json", json.dumps(config, indent=1))
            if model.built_input_spec is not None:
                _checkpoint(model).write(os.path.join(weights, _CHECKPOINT))
                for name in sorted(os.listdir(weights)):
                    archive.write(os.path.join(weights, name), _WEIGHTS_DIR + name)
        os.replace(staging, path)
    finally:
        if os.path.exists(staging):
            os.remove(staging)
    return path


def _checkpoint(model, with_model: bool = True,
                with_optimizer: bool = True) -> tf.train.Checkpoint:
    objects = {"model": model} if with_model else {}
    if with_optimizer:
        objects.update(optimizer_parts(getattr(model, "optimizer", None)))
    return tf.train.Checkpoint(**objects)


# ------------------------------------------------------------------------------- load
def _read_json(archive: zipfile.ZipFile, name: str, path: str) -> dict:
    try:
        return json.loads(archive.read(name).decode("utf-8"))
    except KeyError:
        raise ValueError(f"{path!r} is not a graphfit model file: it has no {name}.") from None
    except (zipfile.BadZipFile, UnicodeDecodeError, json.JSONDecodeError, OSError) as error:
        raise ValueError(f"{path!r} is damaged: its {name} cannot be read ({error}).") from None


def _check_metadata(metadata: dict, path: str) -> None:
    if not isinstance(metadata, dict) or metadata.get("format") != _FORMAT:
        raise ValueError(f"{path!r} is not a graphfit model file (its metadata.json does not "
                         f"name the format {_FORMAT!r}).")
    version = metadata.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise ValueError(
            f"{path!r} was written in format version {version!r} by graphfit "
            f"{metadata.get('graphfit_version')}; this graphfit reads versions up to "
            f"{FORMAT_VERSION}. Load it with a newer graphfit.")


def _find_classes(classes: dict, custom_objects, safe_mode: bool) -> None:
    """Makes every class the config names findable in the layer registry, or refuses."""
    for name, cls in (custom_objects or {}).items():
        LAYERS.register(cls, name=name)
    missing = {name: module for name, module in classes.items() if name not in LAYERS}
    if missing and not safe_mode:
        for module in sorted({m for m in missing.values() if m}):
            importlib.import_module(module)  # safe_mode=False: the file's modules may run
        missing = {name: module for name, module in missing.items() if name not in LAYERS}
    if missing:
        described = ", ".join(f"{name!r} (module {module!r})" for name, module in
                              sorted(missing.items()))
        advice = ("import the module that defines them (its @graphfit.register_layer "
                  "registers them) or pass custom_objects={name: class} before loading; for "
                  "a file you trust, load_model(..., safe_mode=False) imports the modules")
        if not safe_mode:
            advice = "the modules were imported but do not register them with " \
                     "@graphfit.register_layer"
        raise ValueError(f"The model file names classes that are not registered: "
                         f"{described}. {advice[0].upper()}{advice[1:]}.")


def _restore(model, archive: zipfile.ZipFile, path: str) -> None:
    names = [n for n in archive.namelist() if n.startswith(_WEIGHTS_DIR)]
    if not names:
        raise ValueError(f"{path!r} is damaged: it holds a built model but no weights.")
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None:  # its slots, as fit would create them, for the restore to fill
        optimizer.build(model.trainable_variables)
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            target = os.path.join(folder, os.path.basename(name))
            try:
                with open(target, "wb") as out:
                    out.write(archive.read(name))
            except (zipfile.BadZipFile, OSError) as error:
                raise ValueError(f"{path!r} is damaged: {name} cannot be read "
                                 f"({error}).") from None
        prefix = os.path.join(folder, _CHECKPOINT)
        try:
            status = _checkpoint(model, with_optimizer=False).read(prefix)
            status.assert_existing_objects_matched()
            status.expect_partial()
            if optimizer is not None:
                _checkpoint(model, with_model=False).read(prefix).expect_partial()
        except (AssertionError, ValueError, IndexError, tf.errors.OpError) as error:
            raise ValueError(f"{path!r} is damaged or does not match the model its config "
                             f"describes: {mismatch_reason(error, model)}") from None


def load_model(filepath, custom_objects: dict | None = None, compile: bool = True,
               safe_mode: bool = True):
    """Reads a model written by `model.save` / `save_model`: the same class, configuration,
    weights and state; compiled as it was, with its optimizer's state (so `fit` carries on
    as the saved model's would).

    Args:
        filepath: a ".graphfit" file.
        custom_objects: {registered name: class} for classes of your own the file names
            (registered in the layer registry, as `@graphfit.register_layer` does).
        compile: compile the model as it was saved (with its optimizer state); False returns
            it uncompiled.
        safe_mode: import no module (default); False imports the modules of unregistered
            classes the file names, for a file you trust.

    Returns:
        The model.

    Raises:
        FileNotFoundError: when there is no file at `filepath`.
        ValueError: for another extension, a file that is not a graphfit model file or is
            damaged, or a class that is not registered.
    """
    path = _path(filepath, "load")
    importlib.import_module("graphfit.models")  # registers Sequential and GraphModel
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No graphfit model file at {path!r}.")
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise ValueError(f"{path!r} is not a graphfit model file, or it is damaged: it is "
                         f"not a zip archive.") from None
    with archive:
        _check_metadata(_read_json(archive, "metadata.json", path), path)
        config = _read_json(archive, "config.json", path)
        _find_classes(config.get("classes") or {}, custom_objects, safe_mode)
        entry = config.get("model")
        if not isinstance(entry, dict) or not {"type", "config"} <= entry.keys():
            raise ValueError(f"{path!r} is not a graphfit model file, or it is damaged: its "
                             f"config.json does not describe a model.")
        model = LAYERS.get(entry["type"]).from_config(entry["config"])
        if config.get("build") is not None:
            model.build_for(_decode_spec(config["build"]))
        if compile and config.get("compile") is not None:
            model.compile_from_config(config["compile"])  # a class may override it (Keras)
        if config.get("build") is not None:
            _restore(model, archive, path)
    return model


# ------------------------------------------------------------------------------- JSON
def model_to_json(model, **kwargs) -> str:
    """The model's architecture as JSON, without weights (Keras's `model.to_json`): its
    registered type, `get_config()` and the module of every class it names. `kwargs` go to
    `json.dumps` (`indent=2`)."""
    _check_graphfit_model(model)
    config = _model_config(model)
    return json.dumps({**config["model"], "classes": config["classes"]}, **kwargs)


def model_from_json(json_string: str, custom_objects: dict | None = None,
                    safe_mode: bool = True):
    """A new, unbuilt model from `model_to_json`'s text (Keras's `model_from_json`): same
    classes and configuration, fresh weights. `custom_objects` and `safe_mode` as in
    `load_model`.

    Example:
        >>> import graphfit as gf
        >>> from graphfit import layers
        >>> model = gf.Sequential([layers.Dense(2, name="out")], input_shape=(3,))
        >>> copy = gf.models.model_from_json(model.to_json())
        >>> type(copy).__name__, copy.get_layer("out").units
        ('Sequential', 2)
    """
    importlib.import_module("graphfit.models")  # registers Sequential and GraphModel
    try:
        entry = json.loads(json_string)
        name, config = entry["type"], entry["config"]
    except (TypeError, ValueError, KeyError) as error:
        raise ValueError(f"model_from_json needs the text model.to_json() wrote "
                         f'({{"type": ..., "config": ...}}); reading it failed: {error}') from None
    _find_classes(entry.get("classes") or {}, custom_objects, safe_mode)
    return LAYERS.get(name).from_config(config)
