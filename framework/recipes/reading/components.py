"""Checking `type:` / `class_path:` entries of a recipe against the real classes.

A layer, loss, metric, optimizer, schedule or callback in a recipe is a mapping that names its
class and gives constructor arguments next to it (`{type: Dense, units: 64}`). Checks, all
before any training: the class exists (with a "did you mean" among the registered names), every
argument is one the constructor's signature accepts, required ones are present, and the
constructor itself accepts the values (its own `ValueError` is reported at the argument it
names). The resolved entry lists every plain default, so `print-config` shows them.
"""

from __future__ import annotations

import inspect
import re
from typing import Callable

import keras

from graphfit.core.layer import Layer
from graphfit.core.naming import names_unchanged
from graphfit.core.registry import LOSSES, closest, did_you_mean
from graphfit.recipes.reading import user_code
from graphfit.recipes.reading.argument_types import argument_problem_at
from graphfit.recipes.reading.problems import short_repr
from graphfit.recipes.reading.schema import INVALID, Checker, shown
from graphfit.training import losses as losses_module

__all__ = ["ComponentFamily", "NOT_IMPORTED", "check_component", "clean_message",
           "import_attribute", "received_at", "signature_arguments", "optimizer_family",
           "LAYER", "LOSS", "METRIC", "CALLBACK", "SCHEDULE"]

_PLAIN = (type(None), bool, int, float, str)
NOT_IMPORTED = object()  # a class named by a recipe read in safe mode: not imported, unchecked
_LAYER_BASE_ARGUMENTS = ("name", "dtype", "trainable")


class ComponentFamily:
    """Where the classes of one kind of entry come from.

    Args:
        kind: "layer", "loss", ... (used in messages).
        names: a function giving {recipe name: class} of the known classes.
        base: the class every entry must derive from.
        allow_class_path: whether `class_path: package.module.Class` may name user classes.
        fallback: a function giving the factory for a name `names` lacks (`keras.LSTM`), or
            None for a name it does not know either.
    """

    def __init__(self, kind: str, names: Callable[[], dict], base: type,
                 allow_class_path: bool = False, fallback: Callable | None = None):
        self.kind = kind
        self.names = names
        self.base = base
        self.allow_class_path = allow_class_path
        self.fallback = fallback

    def lookup(self, name: str):
        known = self.names()
        if name in known:
            return known[name]
        folded = {key.lower().replace("_", ""): cls for key, cls in known.items()}
        found = folded.get(name.lower().replace("_", ""))
        if found is None and self.fallback is not None:
            found = self.fallback(name)
        return found


def import_attribute(reference: str, separator: str):
    """`package.module.Class` (separator ".") or `package.module:function` (":").

    Raises:
        ValueError: saying which part could not be imported or found (a `UserCodeError`
            showing the user's own error when the module fails while it is imported).
    """
    return user_code.import_attribute(reference, separator)


def clean_message(error: Exception) -> str:
    """An exception's message, without the "in user code:" stack that tf.function adds."""
    text = str(error).strip()
    if "in user code:" in text:
        lines = text.splitlines()
        last = max((i for i, line in enumerate(lines)
                    if re.match(r"\s*\w+(Error|Exception): ", line)), default=None)
        if last is not None:
            text = "\n".join(lines[last:]).strip()
            text = re.sub(r"^\w+(Error|Exception): ", "", text)
    return " ".join(text.split()) or type(error).__name__


def signature_arguments(cls: type) -> tuple[dict[str, inspect.Parameter], bool]:
    """The constructor's keyword parameters, and whether it also takes **kwargs."""
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    named = {p.name: p for p in parameters
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    open_ended = any(p.kind is p.VAR_KEYWORD for p in parameters)
    if open_ended and issubclass(cls, Layer):
        base = inspect.signature(Layer.__init__).parameters
        named.update({name: base[name] for name in _LAYER_BASE_ARGUMENTS if name not in named})
        open_ended = False  # a Layer's **kwargs end at Layer.__init__, whose names we know
    from graphfit.optimizers.optimizer import Optimizer  # the optimizers import the models

    if issubclass(cls, Optimizer):
        # Its from_config takes Keras's base arguments (use_ema, ...) whatever its signature.
        base = inspect.signature(Optimizer.__init__).parameters
        named.update({name: p for name, p in base.items()
                      if p.kind is p.KEYWORD_ONLY and name not in named})
        open_ended = False
    return named, open_ended


def _find_class(entry: dict, family: ComponentFamily, path, checker: Checker):
    has_type, has_path = "type" in entry, "class_path" in entry
    if has_type and has_path:
        checker.report(path, "give either 'type' or 'class_path', not both", at=path + ("type",))
        return None
    if has_path and not family.allow_class_path:
        checker.report(path + ("class_path",), f"{_a(family.kind)} is named with 'type'")
        return None
    if has_path:
        reference = entry["class_path"]
        if not isinstance(reference, str):
            checker.report(path + ("class_path",), f"must be a string, got {shown(reference)}")
            return None
        if getattr(checker, "safe", False):  # safe mode imports no user code (it is listed)
            try:
                user_code.check_not_standard_library(reference)
            except ValueError as error:
                checker.report(path + ("class_path",), str(error))
                return None
            return NOT_IMPORTED
        try:
            cls = import_attribute(reference, ".")
            user_code.check_runnable(cls, reference)
        except ValueError as error:
            checker.report(path + ("class_path",), str(error))
            return None
        if not (isinstance(cls, type) and issubclass(cls, family.base)):
            checker.report(path + ("class_path",),
                           f"{reference} is not a subclass of {family.base.__name__}")
            return None
        return cls
    if not has_type:
        how = "'type' (or 'class_path' for your own class)" if family.allow_class_path else "'type'"
        checker.report(path, f"{_a(family.kind)} needs {how}; got keys "
                             f"{', '.join(entry) or 'none'}")
        return None
    name = entry["type"]
    if not isinstance(name, str):
        checker.report(path + ("type",), f"must be {_a(family.kind)} name, got {shown(name)}")
        return None
    cls = family.lookup(name)
    if cls is None and getattr(checker, "safe", False) and checker.document.data.get("imports"):
        return NOT_IMPORTED  # may be registered by an `imports:` module, not imported here
    if cls is None:
        known = sorted(family.names())
        hint = did_you_mean(name, known)
        extra = (" A class of your own needs 'imports:' of its module (registered with "
                 "@graphfit.register_layer) or 'class_path:'." if family.allow_class_path else "")
        checker.report(path + ("type",), f"unknown {family.kind} {short_repr(name)}.{hint} Known: "
                                         f"{', '.join(known)}.{extra}")
    return cls


def _a(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


# Names users carry over from other libraries, which string similarity cannot guess.
_FAMILIAR = {"lr": "learning_rate", "decay": "weight_decay", "num_units": "units",
             "filters_out": "filters", "dropout": "rate"}

# "Received: units=-2", or an entry inside an argument: "Received: schedule[0]='0.1'".
_RECEIVED = re.compile(r"Received:?\s+(\w+)((?:\[(?:\d+|'[^'\]]*')\])*)=")
_INDEX = re.compile(r"\[(\d+|'[^'\]]*')\]")


def received_at(error: Exception, path: tuple, arguments: dict) -> tuple:
    """The key path a constructor's "Received: name[index]=..." names, as deep as it exists
    in the entry's arguments; else the entry itself."""
    named = _RECEIVED.search(str(error))
    if not named or named.group(1) not in arguments:
        return path
    at, value = path + (named.group(1),), arguments[named.group(1)]
    for part in _INDEX.findall(named.group(2)):
        key = int(part) if part.isdigit() else part[1:-1]
        if isinstance(value, list) and isinstance(key, int) and key < len(value):
            value = value[key]
        elif isinstance(value, dict) and key in value:
            value = value[key]
        else:
            break
        at += (key,)
    return at


def check_component(entry, path: tuple, checker: Checker, family: ComponentFamily,
                    reserved: tuple[str, ...] = ()):
    """Checks one entry and returns it with plain defaults filled in (or INVALID).

    Args:
        entry: a mapping `{type: Name, **arguments}`, or a bare name string.
        reserved: keys that belong to the recipe around the entry (a graph node's `inputs`),
            not to the constructor.
    """
    if family is LAYER and _names_keras_layer(entry):
        from graphfit.recipes.reading import keras_layers
        return keras_layers.check_keras_entry(entry, path, checker, reserved)
    if isinstance(entry, str):
        entry = {"type": entry}
    if not isinstance(entry, dict):
        checker.report(path, f"must be {_a(family.kind)} name or a mapping with 'type', got "
                             f"{shown(entry)}")
        return INVALID
    cls = _find_class(entry, family, path, checker)
    if cls is None:
        return INVALID
    if cls is NOT_IMPORTED:
        return dict(entry)
    arguments = {k: v for k, v in entry.items() if k not in ("type", "class_path", *reserved)}
    accepted, open_ended = signature_arguments(cls)
    problems_before = len(checker.problems)
    refused = set()  # the arguments already reported
    if not open_ended:
        for key in arguments:
            if key not in accepted:
                refused.add(key)
                guess = closest(key, accepted) or (
                    _FAMILIAR.get(key) if _FAMILIAR.get(key) in accepted else None)
                hint = f"; did you mean {guess!r}?" if guess else "."
                checker.report(path + (key,), f"{cls.__name__} has no argument "
                                              f"{short_repr(key)}{hint} Its arguments: "
                                              f"{', '.join(accepted)}")
    missing = [key for key, parameter in accepted.items()
               if parameter.default is inspect.Parameter.empty and key not in arguments]
    for key in missing:
        checker.report(path, f"{cls.__name__} needs the argument {key!r}")
    for key, value in arguments.items():
        found = argument_problem_at(cls, key, value) if key in accepted else None
        if found:
            refused.add(key)
            checker.report(path + (key,) + found[0], found[1])
    if len(checker.problems) > problems_before:
        if not missing:
            _construct_without(cls, arguments, refused, path, checker)
        return INVALID
    constructed = _with_checked_functions(cls, arguments, path, checker)
    if constructed is None or not _constructs(cls, constructed, arguments, path, checker):
        return INVALID
    resolved = {k: entry[k] for k in ("type", "class_path") if k in entry}
    for key, parameter in accepted.items():
        if key in arguments:
            resolved[key] = arguments[key]
        elif isinstance(parameter.default, _PLAIN):
            resolved[key] = parameter.default
    resolved.update({k: entry[k] for k in reserved if k in entry})
    return resolved


def _constructs(cls, constructed: dict, arguments: dict, path: tuple, checker: Checker) -> bool:
    """Whether `cls(**constructed)` runs; else its refusal is reported where it points."""
    try:
        with names_unchanged():
            cls(**constructed)
    except KeyboardInterrupt:
        raise
    except SystemExit as error:  # a user class must not end graphfit
        checker.report(path, f"{cls.__name__}: {user_code.describe_error(error)}")
        return False
    except Exception as error:  # the constructor's own message is the most precise one
        message = clean_message(error)
        at = received_at(error, path, arguments)
        prefix = "" if message.startswith(f"{cls.__name__}:") else f"{cls.__name__}: "
        checker.report(at, prefix + message)
        return False
    return True


def _construct_without(cls, arguments: dict, refused: set, path: tuple,
                       checker: Checker) -> None:
    """After some arguments were refused, the constructor still checks the others (with the
    refused ones at their defaults), so that one report lists every problem: a constructor
    stops at its first. User functions are not loaded for this trial."""
    rest = {key: value for key, value in arguments.items() if key not in refused}
    if any(key in rest for key in getattr(cls, "function_arguments", ())):
        return
    before = len(checker.problems)
    if not _constructs(cls, rest, rest, path, checker) and any(
            problem.path == path for problem in checker.problems[before:]):
        # Refused as a whole (not at one of the other arguments): perhaps only because a
        # refused argument is missing; that one is reported already.
        del checker.problems[before:]


def _placeholder_function(*args, **kwargs):
    """Stands in for a user function that safe mode does not import."""


def _with_checked_functions(cls, arguments: dict, path: tuple, checker: Checker):
    """The arguments to construct `cls` with, once the user functions they name
    (`Layer.function_arguments`) are checked as `data.function` is; None after a problem.

    Safe mode imports no user code: it checks the reference's form and that it is not the
    standard library, and constructs the layer with a placeholder in its place, so that the
    layer's other arguments are still checked (the reference itself is listed as user code).
    """
    safe = getattr(checker, "safe", False)
    constructed = dict(arguments)
    for key in getattr(cls, "function_arguments", ()):
        reference = arguments.get(key)
        if not isinstance(reference, str):
            continue
        try:
            if safe:
                module, _, name = reference.strip().rpartition(":")
                if not module or not name:
                    raise user_code.UserCodeError(
                        f"must look like 'package.module:function', got {reference!r}")
                user_code.check_not_standard_library(reference)
                constructed[key] = _placeholder_function
            else:
                user_code.check_runnable(import_attribute(reference, ":"), reference)
        except ValueError as error:
            checker.report(path + (key,), str(error))
            return None
    return constructed


def _names_keras_layer(entry) -> bool:
    """`keras.NAME` or `{type: KerasLayer, ...}`: a Keras layer, checked by keras_layers."""
    name = entry if isinstance(entry, str) else (
        entry.get("type") if isinstance(entry, dict) else None)
    return isinstance(name, str) and (name.startswith("keras.") or name == "KerasLayer")


def _keras_layer_factory(name: str):
    """What builds `keras.NAME` (a `KerasLayer` around it); None for another name."""
    if not name.startswith("keras."):
        return None
    import functools

    from graphfit.recipes.reading import keras_layers
    return functools.partial(keras_layers.build_keras_layer, name)


def _layers() -> dict:
    from graphfit.core.registry import LAYERS
    return {name: LAYERS.get(name) for name in LAYERS.names()}


def _optimizers() -> dict:
    from graphfit.core.registry import OPTIMIZERS
    return {name: OPTIMIZERS.get(name) for name in OPTIMIZERS.names()}


def _callbacks() -> dict:
    from graphfit.core.registry import CALLBACKS
    return {name: CALLBACKS.get(name) for name in CALLBACKS.names()}


def _losses() -> dict:
    """Keras's losses and those registered in `core.registry.LOSSES` (graphfit's own)."""
    own = {name: LOSSES.get(name) for name in LOSSES.names()}
    return {**{cls.__name__: cls for cls in losses_module.loss_classes().values()}, **own}


def _metrics() -> dict:
    return {name: getattr(keras.metrics, name) for name in dir(keras.metrics)
            if isinstance(getattr(keras.metrics, name), type)
            and issubclass(getattr(keras.metrics, name), keras.metrics.Metric)
            and name != "Metric"}


def _schedules() -> dict:
    from graphfit.optimizers import schedules
    return {name: getattr(schedules, name) for name in schedules.BUILT_IN}


LAYER = ComponentFamily("layer", _layers, Layer, allow_class_path=True,
                        fallback=_keras_layer_factory)
LOSS = ComponentFamily("loss", _losses, keras.losses.Loss)
METRIC = ComponentFamily("metric", _metrics, keras.metrics.Metric)
CALLBACK = ComponentFamily("callback", _callbacks, object)
SCHEDULE = ComponentFamily("learning-rate schedule", _schedules, object)


def optimizer_family() -> ComponentFamily:
    """The optimizer family (built when asked, as the optimizers import the models)."""
    from graphfit.optimizers import Optimizer
    return ComponentFamily("optimizer", _optimizers, Optimizer)
