"""The sections of a recipe, their keys, defaults and docs.

`RECIPE` is the whole schema; `graphfit print-config` shows a recipe with every default filled
in, and the README's table of sections is written from the docs here.
"""

from __future__ import annotations

import math
import re
import sys

from graphfit.recipes.reading import user_code
from graphfit.recipes.reading.callback_paths import check_callback_paths
from graphfit.recipes.reading.components import (
    CALLBACK,
    LOSS,
    METRIC,
    SCHEDULE,
    check_component,
    optimizer_family,
)
from graphfit.recipes.reading.data_schema import DATA_DOC, check_data_source
from graphfit.recipes.reading.distribute_schema import DISTRIBUTE_DOC, check_distribute
from graphfit.recipes.reading.many_fits_schema import check_many_fits_recipe
from graphfit.recipes.reading.model_schema import MODEL_DOC, check_model
from graphfit.recipes.reading.outline import is_many_fits
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
from graphfit.recipes.reading.tune_schema import TUNE_DOC, check_tune

__all__ = ["RECIPE", "SECTION_DOCS", "check_recipe", "import_user_modules"]


def _optimizer(value, path, checker):
    if isinstance(value, str):
        value = {"type": value}
    if isinstance(value, dict) and "type" not in value and "class_path" not in value:
        value = {"type": "Adam", **value}  # the default optimizer, with the arguments given
    if isinstance(value, dict) and isinstance(value.get("learning_rate"), dict):
        schedule = check_component(value["learning_rate"], path + ("learning_rate",), checker,
                                   SCHEDULE)
        if schedule is INVALID:
            return INVALID
    if isinstance(value, dict) and value.get("inner_optimizer") is not None:
        # A wrapper (LossScaleOptimizer): its optimizer is checked as one, key by key.
        inner = _optimizer(value["inner_optimizer"], path + ("inner_optimizer",), checker)
        if inner is INVALID:
            return INVALID
        value = {**value, "inner_optimizer": inner}
    if isinstance(value, dict) and isinstance(value.get("optimizer_map"), dict):
        routed = _optimizer_map(value["optimizer_map"], path + ("optimizer_map",), checker)
        if routed is INVALID:
            return INVALID
        value = {**value, "optimizer_map": routed}
    return check_component(value, path, checker, optimizer_family())


def _optimizer_map(value: dict, path, checker):
    """A MultiOptimizer's `optimizer_map: {default_optimizer: ..., optimizer_map: {pattern:
    ...}}`: each optimizer checked as one, each pattern as a regular expression."""
    checked, problems = dict(value), len(checker.problems)
    if "default_optimizer" in value:
        checked["default_optimizer"] = _optimizer(value["default_optimizer"],
                                                  path + ("default_optimizer",), checker)
    routes = value.get("optimizer_map")
    if isinstance(routes, dict):
        checked["optimizer_map"] = {}
        for pattern, optimizer in routes.items():
            try:
                re.compile(pattern)
            except (re.error, TypeError) as error:
                checker.report(path + ("optimizer_map", pattern),
                               f"the key {shown(pattern)} must be a regular expression over "
                               f"variable paths ({error})")
            checked["optimizer_map"][pattern] = _optimizer(
                optimizer, path + ("optimizer_map", pattern), checker)
    return INVALID if len(checker.problems) > problems else checked


def _name(value, path, checker):
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", value):
        checker.report(path, f"must be a folder-safe name (letters, digits, '_', '-', '.'), "
                             f"got {shown(value)}")
        return INVALID
    return value


def _component_list(family):
    return ListOf(Custom(lambda v, p, c: check_component(v, p, c, family),
                         f"a {family.kind} name or {{type: Name, ...}}"))


def _name_or_component(family, check_name, kind_text: str):
    """A Keras name (checked by `check_name`, which raises ValueError) or `{type: ...}`."""

    def check(value, path, checker):
        if isinstance(value, dict):
            return check_component(value, path, checker, family)
        if not isinstance(value, str):
            checker.report(path, f"must be {kind_text} or {{type: ..., ...}}, got "
                                 f"{shown(value)}")
            return INVALID
        try:
            check_name(value)
        except ValueError as error:
            checker.report(path, str(error))
            return INVALID
        return value

    return check


def _check_loss_name(name: str) -> None:
    from graphfit.training import losses
    losses.resolve_loss(name, _tf_float32())


def _check_metric_name(name: str) -> None:
    from graphfit.training.stage_metrics import check_metric_identifier
    check_metric_identifier(name)


_loss = _name_or_component(LOSS, _check_loss_name, "a loss name")
_metric_entry = _name_or_component(METRIC, _check_metric_name, "a metric name")


def _tf_float32():
    import tensorflow as tf
    return tf.float32


# graphfit.core.dtype_policy's names (that module imports TensorFlow; reading a recipe does not)
_POLICIES = String(("float32", "float64", "mixed_bfloat16", "mixed_float16"))


def _dtype_policy(value, path, checker):
    if value in ("bfloat16", "float16"):  # 16-bit variables: say which policy is meant
        checker.report(path, f"must be {_POLICIES.describe()}, got {value!r}; {value} "
                             f"variables lose the small updates training adds up: use "
                             f"'mixed_{value}' (compute in {value}, variables in float32)")
        return INVALID
    return _POLICIES.check(value, path, checker)


def _class_weight(value, path, checker):
    """fit's class_weight: {class id: weight}, checked without TensorFlow. YAML mapping keys
    arrive as strings: "0" is class 0. "balanced" (Keras / scikit-learn's formula, from the
    training split's labels) and class names as keys (a table's target of names) are
    resolved when the data loads."""
    if value == "balanced":
        return value

    def class_id(key):
        if isinstance(key, str) and key.isdigit():
            return int(key)
        if isinstance(key, str) and key.strip():
            return key  # a class name, looked up in the target's classes when data loads
        return key if isinstance(key, int) and not isinstance(key, bool) and key >= 0 else None

    def number(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < math.inf

    ids = [class_id(k) for k in value] if isinstance(value, dict) and value else [None]
    if None in ids or not all(number(v) for v in value.values()):
        checker.report(path, f"must be 'balanced' or a mapping from class ids (integers >= "
                             f"0) or class names to weights >= 0, e.g. {{0: 1.0, 1: 5.0}}, "
                             f"got {shown(value)}")
        return INVALID
    return dict(zip(ids, value.values()))


_TRAINING = Section({
    "epochs": Field(Integer(min=1), 10, "passes over the training split"),
    "batch_size": Field(Nullable(Integer(min=1)), 32, "samples per step; null trains on all "
                                                      "samples at once"),
    "steps_per_epoch": Field(Nullable(Integer(min=1)), None,
                             "batches per epoch (null: one pass over the training split); "
                             "epochs walk through a pass and end where it ends, as Keras's fit"),
    "steps_per_execution": Field(Either(String(("auto",)), Integer(min=1)), "auto",
                                 "training steps per compiled call"),
    "jit_compile": Field(Either(String(("auto",)), Boolean()), "auto", "XLA-compile the steps"),
    "dtype": Field(Custom(_dtype_policy, _POLICIES.describe()), "float32",
                   "dtype policy: float32 or float64 everywhere, or mixed_bfloat16 / "
                   "mixed_float16 (compute in 16 bits, variables, loss and metrics in float32)"),
    "shuffle": Field(Boolean(), True, "reshuffle the training samples every epoch"),
    "class_weight": Field(Nullable(Custom(_class_weight, "balanced, or a mapping from class "
                                                         "ids (or names) to weights")),
                          None, "the loss of each training sample weighted by its class "
                                "(fit's class_weight, single-output models)"),
    "validation_split": Field(Number(min=0.0, max=1.0, max_open=True), 0.15,
                              "fraction of the data held out for validation"),
    "test_split": Field(Number(min=0.0, max=1.0, max_open=True), 0.15,
                        "fraction of the data held out for the final test"),
    "validation_data": Field(Nullable(Custom(
        lambda v, p, c: check_data_source(v, p, c, training=False), "a data source")), None,
        "a separate validation source instead of validation_split"),
    "test_data": Field(Nullable(Custom(
        lambda v, p, c: check_data_source(v, p, c, training=False), "a data source")), None,
        "a separate test source instead of test_split"),
    "check_finite": Field(Boolean(), True, "refuse NaN or infinite inputs before training"),
    "cache_frozen": Field(Boolean(), False, "compute the frozen leading layers once and train "
                                            "the rest on their outputs (fit's cache_frozen)"),
    "test_freq": Field(Nullable(Integer(min=1)), None, "evaluate the test split every N epochs "
                                                       "(null: every epoch), as fit's test_freq"),
    "absolute_sigma": Field(Boolean(), False, "a curve fit's report: the sample weights are "
                                              "1/σ² of known errors (SciPy's absolute_sigma); "
                                              "false scales the errors by the reduced χ²"),
})

RECIPE = Section({
    "name": Field(Custom(_name, "a folder-safe name"), None,
                  "the run folder name: runs/<name>/<timestamp> (default: the file name)"),
    # numpy and set_seed take seeds below 2**32.
    "seed": Field(Integer(min=0, max=2 ** 32 - 1), 0, "seeds the splits, the initial weights "
                                                      "and the shuffling"),
    "imports": Field(ListOf(String()), [], "your modules to import first (registered layers, "
                                           "data functions)"),
    "data": Field(Custom(check_data_source, DATA_DOC), doc=DATA_DOC),
    "model": Field(Custom(check_model, MODEL_DOC), doc=MODEL_DOC),
    "loss": Field(Custom(_loss, "a loss"),
                  doc="a Keras loss name or {type: LossClass, ...arguments}"),
    "metrics": Field(ListOf(Custom(_metric_entry, "a metric")), [],
                     "Keras metric names or {type: MetricClass, ...}, for every stage"),
    "optimizer": Field(Custom(_optimizer, "an optimizer"), {"type": "Adam"},
                       "{type: SGD | Adam | ..., learning_rate: number or schedule, clipnorm, "
                       "global_clipnorm, clipvalue, weight_decay}"),
    "training": Field(_TRAINING, {}, "epochs, batch size, compilation, dtype, splits"),
    "callbacks": Field(_component_list(CALLBACK), [], "{type: Name, ...} entries"),
    "distribute": Field(Nullable(Custom(check_distribute, "a distribution strategy")), None,
                        DISTRIBUTE_DOC),
    "run_dir": Field(Nullable(String()), None, "where the run is written (default "
                                               "runs/<name>/<timestamp>); never overwritten"),
    "tune": Field(Nullable(Custom(check_tune, "a search space")), None, TUNE_DOC),
})

SECTION_DOCS = {key: field.doc for key, field in RECIPE.fields.items()}


def import_user_modules(data: dict, checker: Checker) -> None:
    """Imports the recipe's `imports:` (so their registered classes exist before checking).

    The recipe's folder is put on `sys.path` first, so a module next to the recipe is found
    (by `imports`, `class_path` and `data.function` alike), as Python does for a script.
    """
    folder = getattr(checker, "base_dir", None)
    if folder and folder not in sys.path:
        sys.path.insert(0, folder)  # also for class_path and data functions
    names = data.get("imports") if isinstance(data, dict) else None
    if not isinstance(names, list):
        return
    for index, name in enumerate(names):
        if not isinstance(name, str):
            continue
        try:
            user_code.check_importable(name)
            if not getattr(checker, "safe", False):  # safe mode imports nothing (it lists it)
                user_code.import_module(name)
        except ValueError as error:  # also what the module did: raise, sys.exit, bad syntax
            checker.report(("imports", index), str(error))


def check_recipe(checker: Checker, default_name: str) -> dict:
    """Checks the whole document, whose outline `outline.check_outline` found sound (a
    mapping); returns the resolved recipe (problems go to `checker`)."""
    data = checker.document.data
    if is_many_fits(data):  # another kind of recipe: one formula, many data sets, no model
        return check_many_fits_recipe(checker, data, default_name)
    import_user_modules(data, checker)
    resolved = RECIPE.check(data, (), checker)
    if resolved.get("tune") is None:
        resolved.pop("tune", None)  # only a study's recipe has one (`graphfit tune`)
    if resolved.get("name") is None:
        resolved["name"] = default_name
    _check_splits(resolved, checker)
    _check_learning_rate_callbacks(resolved, checker)
    check_callback_paths(resolved.get("callbacks"), checker)
    return resolved


def _check_learning_rate_callbacks(resolved: dict, checker: Checker) -> None:
    optimizer, entries = resolved.get("optimizer"), resolved.get("callbacks")
    while isinstance(optimizer, dict) and isinstance(optimizer.get("inner_optimizer"), dict):
        optimizer = optimizer["inner_optimizer"]  # a LossScaleOptimizer's rate is its inner's
    if not isinstance(optimizer, dict):
        return
    if isinstance(optimizer.get("learning_rate"), dict):
        clash = "optimizer.learning_rate is a schedule; use one or the other"
    elif not hasattr(_optimizer_class(optimizer.get("type")), "learning_rate"):
        clash = (f"{optimizer['type']} has no learning rate (it solves for the length of each "
                 f"step), so it would change nothing; remove the callback")
    else:
        return
    for index, entry in enumerate(entries if isinstance(entries, list) else []):
        if isinstance(entry, dict) and entry.get("type") in ("ReduceLROnPlateau",
                                                             "LearningRateScheduler"):
            checker.report(("callbacks", index, "type"),
                           f"{entry['type']} sets the learning rate, but {clash}")


def _optimizer_class(name):
    """The registered optimizer class of that name, found as `type:` finds it (Keras's
    lower-case "rmsprop" too), or None (an unknown or custom one)."""
    return optimizer_family().lookup(name) if isinstance(name, str) else None


def _check_splits(resolved: dict, checker: Checker) -> None:
    training = resolved.get("training")
    if not isinstance(training, dict):
        return
    if INVALID in (training["validation_split"], training["test_split"]):
        return
    for split, data in (("validation_split", "validation_data"), ("test_split", "test_data")):
        if training[data] in (None, INVALID):
            continue
        if checker.document.positions.get(("training", split)) is None:
            training[split] = 0.0  # a separate source replaces the default split
        elif training[split] > 0:
            checker.report(("training", split), f"give {split} or {data}, not both (set "
                                                f"{split}: 0 to use {data})")
    validation, test = training["validation_split"], training["test_split"]
    if validation + test >= 1.0:
        checker.report(("training", "test_split"),
                       f"validation_split + test_split must leave samples to train on; got "
                       f"{validation} + {test} >= 1")
