"""Built-in Keras 3 layers in a recipe, checked like graphfit's own layers.

Two forms, both wrapped in graphfit's `layers.KerasLayer` adapter (weights in graphfit's
collections, Keras state changes as update hooks):

    - {type: keras.LSTM, units: 32}                         # a class of keras.layers by name
    - {type: KerasLayer, layer: {class_name: MultiHeadAttention,
                                 config: {num_heads: 2, key_dim: 8}}}   # Keras's serialized form

Only classes of `keras.layers` are reachable, never an import path: a recipe is data, and the
only code it runs is code it names under `imports:` / `class_path:`. Keras layers that run a
Python function or load code from a file (`Lambda`, `TFSMLayer`, `JaxLayer`, ...) are refused,
also when nested inside another layer's configuration (a `Bidirectional`'s `layer`).

Checks, all before training: the class exists (did-you-mean among `keras.layers` names), every
argument is one its constructor (or a base class it passes `**kwargs` on to) accepts, required
ones are given, values have the kinds Keras's docstrings name, and the Keras constructor
accepts them (its own message, at the argument it names).

Example:

    >>> layer = build_keras_layer("keras.Dense", units=3)
    >>> type(layer).__name__, type(layer.keras_layer).__name__, layer.keras_layer.units
    ('KerasLayer', 'Dense', 3)
"""

from __future__ import annotations

import copy
import inspect

import keras

from graphfit.core.naming import names_unchanged, snake_case, unique_name
from graphfit.core.registry import closest, did_you_mean
from graphfit.recipes.reading.argument_types import argument_problem_at
from graphfit.recipes.reading.components import (
    clean_message,
    received_at,
    signature_arguments,
)
from graphfit.recipes.reading.problems import short_repr
from graphfit.recipes.reading.schema import INVALID, Checker, shown

__all__ = ["KERAS_PREFIX", "REFUSED", "keras_layer_classes", "keras_class",
           "accepted_arguments", "check_keras_entry", "build_keras_layer"]

KERAS_PREFIX = "keras."
_PLAIN = (type(None), bool, int, float, str)

_RUNS_CODE = ("a recipe is data and runs no Python it does not name under 'imports:'; write a "
              "layer of your own (registered with @graphfit.register_layer) in a module listed "
              "under 'imports:', or use a Formula layer for an expression")
# Keras layers a recipe may not name, and why.
REFUSED = {
    "Lambda": f"keras.Lambda runs an arbitrary Python function: {_RUNS_CODE}",
    "TFSMLayer": f"keras.TFSMLayer loads and runs a SavedModel's code from a file: {_RUNS_CODE}",
    "JaxLayer": f"keras.JaxLayer runs Python functions (call_fn, init_fn): {_RUNS_CODE}",
    "FlaxLayer": f"keras.FlaxLayer runs a Flax module (Python code): {_RUNS_CODE}",
    "TorchModuleWrapper": f"keras.TorchModuleWrapper runs a PyTorch module: {_RUNS_CODE}",
    "__lambda__": f"a serialized Python lambda is code: {_RUNS_CODE}",
    "InputLayer": "keras.InputLayer is not a layer to stack: the model takes its input from "
                  "the data (a graph model names its inputs under 'inputs')",
    "Layer": "keras.Layer is the abstract base class; name a concrete layer such as keras.Dense",
    "Wrapper": "keras.Wrapper is an abstract base class; name keras.TimeDistributed or "
               "keras.Bidirectional",
}
# Keys of Keras's serialized form ({class_name, config, module, ...}) besides the config.
_SERIALIZED_KEYS = ("class_name", "config", "module", "registered_name", "build_config",
                    "compile_config")


def keras_layer_classes() -> dict[str, type]:
    """{name: class} of the layers in `keras.layers` a recipe may name (not `REFUSED`)."""
    found = {}
    for name in dir(keras.layers):
        cls = getattr(keras.layers, name)
        if (isinstance(cls, type) and issubclass(cls, keras.layers.Layer)
                and name not in REFUSED):
            found[name] = cls
    return found


def keras_class(name: str, serialized: bool = False) -> type:
    """The `keras.layers` class a recipe's `keras.NAME` (or, with `serialized`, the
    `class_name: NAME` of Keras's serialized form) means.

    `keras.NAME` forgives case and underscores as graphfit's own layer names do
    (`keras.lstm`); a `class_name` is Keras's exact name.

    Raises:
        ValueError: for a refused layer (saying why), or an unknown one (with a did-you-mean).
    """
    prefix = "" if serialized else KERAS_PREFIX
    name = name[len(prefix):] if prefix and name.startswith(prefix) else name
    if name in REFUSED:
        raise ValueError(REFUSED[name])
    known = keras_layer_classes()
    if name in known:
        return known[name]
    folded = {key.lower().replace("_", ""): cls for key, cls in known.items()}
    if not serialized and name.lower().replace("_", "") in folded:
        return folded[name.lower().replace("_", "")]
    hint = did_you_mean(prefix + name, [prefix + key for key in known])
    form = "class_name: NAME" if serialized else "keras.NAME"
    raise ValueError(f"unknown Keras layer {short_repr(prefix + name)}.{hint} Any class of "
                     f"keras.layers may be named as {form} (python -c \"import keras; "
                     f"print(dir(keras.layers))\" lists them)")


def accepted_arguments(cls: type) -> tuple[dict[str, inspect.Parameter], set[str]]:
    """The keyword arguments a Keras layer class takes, and the required ones.

    A Keras constructor passes `**kwargs` on to its base class: the accepted names are those
    of every `__init__` up the chain until one without `**kwargs` (`keras.layers.Layer` ends it;
    its own `**kwargs` only take the deprecated input_shape/input_dim). Required are the
    class's own parameters without a default (a base's may be set by the class itself).
    """
    own, open_ended = signature_arguments(cls)
    accepted = dict(own)
    for base in cls.__mro__[1:]:
        if not open_ended or base is object:
            break
        named, open_ended = signature_arguments(base)
        for key, parameter in named.items():
            accepted.setdefault(key, parameter)
        if base is keras.layers.Layer:
            break
    required = {key for key, parameter in own.items()
                if parameter.default is inspect.Parameter.empty}
    return accepted, required


def _refused_inside(value, path: tuple):
    """(path, message) of the first refused or foreign class inside a configuration."""
    if isinstance(value, dict):
        name, module = value.get("class_name"), value.get("module")
        if isinstance(name, str) and name in REFUSED:
            return path + ("class_name",), REFUSED[name]
        if isinstance(module, str) and module != "keras" and not module.startswith("keras."):
            return path + ("module",), (f"only Keras's own classes may be named, got module "
                                        f"{short_repr(module)}; {_RUNS_CODE}")
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = _refused_inside(item, path + (key,))
        if found:
            return found
    return None


def _check_arguments(cls: type, arguments: dict, path: tuple, checker: Checker,
                     label: str, checked_apart: tuple[str, ...] = ()) -> bool:
    """Unknown, missing and wrongly typed arguments of `cls` (but those `checked_apart`);
    False after a problem."""
    accepted, required = accepted_arguments(cls)
    required -= set(checked_apart)
    before = len(checker.problems)
    for key in arguments:
        if key not in accepted:
            guess = closest(key, accepted)
            hint = f"; did you mean {guess!r}?" if guess else "."
            checker.report(path + (key,), f"{label} has no argument {short_repr(key)}{hint} "
                                          f"Its arguments: {', '.join(accepted)}")
    for key in sorted(required - set(arguments)):
        checker.report(path, f"{label} needs the argument {key!r}")
    for key, value in arguments.items():
        found = argument_problem_at(cls, key, value) if key in accepted else None
        if found:
            checker.report(path + (key,) + found[0], found[1])
    return len(checker.problems) == before


def _constructed(make, label: str, path: tuple, arguments: dict, checker: Checker) -> bool:
    """Runs `make()` (the Keras constructor); its own error is reported at the argument it
    names ("Received: units=-1"), else at the entry. False after a problem."""
    try:
        with names_unchanged():
            make()
    except KeyboardInterrupt:
        raise
    except Exception as error:  # Keras's own message is the most precise one
        # Keras's from_config wraps the constructor's error in "Error when deserializing...".
        message = clean_message(error).split("Exception encountered: ")[-1]
        prefix = "" if message.startswith(f"{label}:") else f"{label}: "
        checker.report(received_at(error, path, arguments), prefix + message)
        return False
    return True


def check_keras_entry(entry, path: tuple, checker: Checker, reserved: tuple[str, ...] = ()):
    """Checks a `keras.NAME` or `KerasLayer` layer entry; returns it resolved (the plain
    defaults of the Keras constructor filled in) or INVALID."""
    if isinstance(entry, str):
        entry = {"type": entry}
    if "class_path" in entry:
        checker.report(path, "give either 'type' or 'class_path', not both",
                       at=path + ("type",))
        return INVALID
    if entry["type"] == "KerasLayer":
        return _check_adapter_entry(entry, path, checker, reserved)
    try:
        cls = keras_class(entry["type"])
    except ValueError as error:
        checker.report(path + ("type",), str(error))
        return INVALID
    arguments = {k: v for k, v in entry.items() if k not in ("type", *reserved)}
    label = KERAS_PREFIX + cls.__name__
    found = _refused_inside(arguments, path)
    if found:
        checker.report(*found)
        return INVALID
    if not (_check_arguments(cls, arguments, path, checker, label)
            and _constructed(lambda: build_keras_layer(cls, **arguments), label, path,
                             arguments, checker)):
        return INVALID
    resolved = {"type": entry["type"], **arguments}
    for key, parameter in signature_arguments(cls)[0].items():
        if key not in resolved and isinstance(parameter.default, _PLAIN):
            resolved[key] = parameter.default
    resolved.update({k: entry[k] for k in reserved if k in entry})
    return resolved


def _check_serialized(layer, path: tuple, checker: Checker):
    """Checks Keras's serialized form `{class_name: NAME, config: {...}}`; returns the class
    or None after a problem."""
    if not isinstance(layer, dict):
        checker.report(path, f"must be a Keras layer in Keras's serialized form "
                             f"{{class_name: NAME, config: {{...}}}}, got {shown(layer)}")
        return None
    for key in layer:
        if key not in _SERIALIZED_KEYS:
            guess = closest(str(key), _SERIALIZED_KEYS)
            hint = f"; did you mean {guess!r}?" if guess else "."
            checker.report(path + (key,), f"unknown key {short_repr(key)} of a serialized "
                                          f"Keras layer{hint} Its keys: "
                                          f"{', '.join(_SERIALIZED_KEYS)}")
    found = _refused_inside(layer, path)
    if found:
        checker.report(*found)
        return None
    if not isinstance(layer.get("class_name"), str):
        checker.report(path if "class_name" not in layer else path + ("class_name",),
                       f"a serialized Keras layer needs 'class_name' (a keras.layers class "
                       f"name such as LSTM), got {shown(layer.get('class_name'))}")
        return None
    try:
        cls = keras_class(layer["class_name"], serialized=True)
    except ValueError as error:
        checker.report(path + ("class_name",), str(error))
        return None
    config = layer.get("config", {})
    if not isinstance(config, dict):
        checker.report(path + ("config",), f"must be a mapping of {cls.__name__}'s arguments, "
                                           f"got {shown(config)}")
        return None
    if not _check_arguments(cls, config, path + ("config",), checker, cls.__name__):
        return None
    return cls


def _check_adapter_entry(entry: dict, path: tuple, checker: Checker, reserved: tuple):
    """`{type: KerasLayer, layer: {class_name, config}, name, dtype, trainable}`."""
    from graphfit.layers import KerasLayer

    if "layer" not in entry:
        checker.report(path, "KerasLayer needs the argument 'layer': a Keras layer in Keras's "
                             "serialized form {class_name: NAME, config: {...}} (or write "
                             "{type: keras.NAME, ...arguments})")
        return INVALID
    arguments = {k: v for k, v in entry.items() if k not in ("type", "layer", *reserved)}
    before = len(checker.problems)
    cls = _check_serialized(entry["layer"], path + ("layer",), checker)
    _check_arguments(KerasLayer, arguments, path, checker, "KerasLayer", ("layer",))
    if cls is None or len(checker.problems) > before:
        return INVALID
    config = entry["layer"].get("config", {})
    if not _constructed(lambda: KerasLayer(copy.deepcopy(entry["layer"]), **arguments),
                        cls.__name__, path + ("layer", "config"), config, checker):
        return INVALID
    resolved = {"type": "KerasLayer", "layer": entry["layer"], "name": None, "dtype": None,
                "trainable": True, **arguments}
    resolved.update({k: entry[k] for k in reserved if k in entry})
    return resolved


def build_keras_layer(name, **arguments):
    """A `layers.KerasLayer` around `keras.layers.NAME` made from `arguments` (through
    Keras's deserialization, so nested layers and initializers may be given in Keras's
    serialized form). Without a `name` the adapter and the Keras layer share a fresh snake-case name
    ('lstm', 'lstm_1', ...).

    Args:
        name: `"keras.NAME"` (as in a recipe) or the Keras class itself.
        **arguments: the Keras constructor's arguments.
    """
    from graphfit.layers import KerasLayer

    cls = name if isinstance(name, type) else keras_class(name)
    config = copy.deepcopy(arguments)
    if config.get("name") is None:
        config["name"] = unique_name(snake_case(cls.__name__))
    serialized = {"class_name": cls.__name__, "config": config}
    return KerasLayer(serialized, name=config["name"], trainable=config.get("trainable", True))
