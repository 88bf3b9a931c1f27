"""The recipe's `tune:` section: a hyperparameter search space and how to search it.

`graphfit tune RECIPE` reads it (see `graphfit.tuning`); `graphfit train` ignores it. The
space is keyed by the dotted paths `--set` takes, each with a distribution:

    tune:
      metric: val_accuracy            # a key of the per-epoch logs (val_* or the training's)
      direction: maximize             # minimize | maximize | auto (loss: min, accuracy: max)
      n_trials: 20
      sampler: tpe                    # tpe | random | grid | cmaes, or {type: tpe, ...options}
      pruner: median                  # none | median | successive_halving, or {type: ..., ...}
      space:
        optimizer.learning_rate: {log_uniform: [1.0e-4, 1.0e-1]}
        model.layers.0.units: {int: [16, 256], step: 16}
        model.layers.2.rate: {uniform: [0.0, 0.5]}
        optimizer.type:               # a choice whose options need keys of their own: the
          choice:                     # section is rebuilt from {type: option} + its keys
            SGD: {optimizer.momentum: {uniform: [0.0, 0.95]}, optimizer.nesterov: true}
            Adam: {}

Only the shape of the space is checked here (no Optuna, no TensorFlow); that every point of
it makes a valid recipe is checked by `graphfit.tuning` before the first trial.

Example:

    >>> from graphfit.recipes.reading.yaml_source import parse_yaml
    >>> checker = Checker(parse_yaml(
    ...     "tune:\\n  space:\\n    optimizer.learning_rate: {log_uniform: [1, 0.1]}\\n",
    ...     "my.yaml"))
    >>> _ = check_tune(checker.document.data["tune"], ("tune",), checker)
    >>> print(checker.problems[0])  # doctest: +ELLIPSIS
    my.yaml:3:5: tune.space.optimizer.learning_rate: the range [1, 0.1] is empty: ...
"""

from __future__ import annotations

import copy
import math

from graphfit.core.registry import did_you_mean
from graphfit.recipes.reading.overrides import parse_key
from graphfit.recipes.reading.schema import (
    INVALID,
    Checker,
    Custom,
    Field,
    Integer,
    Nullable,
    Number,
    Section,
    String,
    shown,
)
from graphfit.recipes.reading.yaml_source import Document

__all__ = ["check_tune", "TUNE_DOC", "DISTRIBUTIONS", "SAMPLERS", "PRUNERS", "is_type_path"]

TUNE_DOC = ("a hyperparameter search for `graphfit tune`: {metric, direction, n_trials, "
            "timeout, sampler, pruner, space: {dotted.key: {log_uniform | uniform | int | "
            "choice: ...}}}")
DISTRIBUTIONS = ("log_uniform", "uniform", "int", "choice", "value")
_OPTIONS = {"log_uniform": (), "uniform": ("step",), "int": ("step", "log"), "choice": (),
            "value": ()}
SAMPLERS = ("tpe", "random", "grid", "cmaes")
PRUNERS = ("none", "median", "successive_halving")
_MAXIMIZED = ("accuracy", "acc", "auc", "precision", "recall", "f1_score", "r2_score")


def is_type_path(path: tuple) -> bool:
    """A choice at `....type` rebuilds its section from the option's own keys."""
    return len(path) > 1 and path[-1] == "type"


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value)


def _range(spec: dict, kind: str, path, checker: Checker):
    bounds = spec[kind]
    if not (isinstance(bounds, list) and len(bounds) == 2 and all(map(_is_number, bounds))):
        checker.report(path, f"{kind} takes [low, high], two numbers, got {shown(bounds)}")
        return None
    low, high = bounds
    if kind == "int" and not all(isinstance(b, int) for b in bounds):
        checker.report(path, f"int takes two integers [low, high], got {shown(bounds)}; use "
                             f"uniform for real numbers")
        return None
    if low >= high:
        checker.report(path, f"the range {bounds} is empty: low must be below high "
                             f"(a fixed value is {{value: {low}}}, or no entry)")
        return None
    log = kind == "log_uniform" or spec.get("log") is True
    if log and low <= 0:
        checker.report(path, f"a log scale needs low > 0, got {bounds}")
        return None
    step = spec.get("step")
    if step is not None:
        if log:
            checker.report(path, "step and a log scale cannot go together (Optuna samples "
                                 "either); drop one")
            return None
        if not _is_number(step) or step <= 0 or step > high - low or (
                kind == "int" and not isinstance(step, int)):
            checker.report(path, f"step must be a {'whole ' if kind == 'int' else ''}number "
                                 f"> 0 and at most high - low ({high - low}), got {shown(step)}")
            return None
    if "log" in spec and not isinstance(spec["log"], bool):
        checker.report(path, f"log must be true or false, got {shown(spec['log'])}")
        return None
    return {"type": "int" if kind == "int" else "float", "low": low, "high": high,
            "log": log, "step": step}


def _choice(spec: dict, path, checker: Checker, depth: int):
    options = spec["choice"]
    if isinstance(options, dict):  # {option: {its own dotted keys}}
        if not options:
            checker.report(path, "choice has no options; give at least two")
            return None
        branches = {}
        for option, nested in options.items():
            where = path + ("choice", option)
            if nested is None:
                nested = {}
            if depth > 0:
                checker.report(where, "a choice inside a choice's option is not supported; "
                                      "tune it at the top of the space")
                return None
            branches[option] = _space(nested, where, checker, depth + 1)
        if None in branches.values():
            return None
        return {"type": "choice", "choices": list(options), "branches": branches}
    if isinstance(options, list) and not options:
        checker.report(path, "choice has no options; give at least two")
        return None
    if not isinstance(options, list):
        checker.report(path, f"choice takes a list of values (or {{option: {{its keys}}}}), "
                             f"got {shown(options)}")
        return None
    seen = []
    for index, value in enumerate(options):
        if _fixed(value, path + ("choice", index), checker) is None:
            return None
        if value in seen:
            checker.report(path, f"choice lists {shown(value)} twice; give each option once")
            return None
        seen.append(value)
    return {"type": "choice", "choices": list(options), "branches": None}


def _fixed(value, path, checker: Checker):
    """A fixed value of the space (plain or `{value: x}`): NaN and infinity are refused here,
    as everywhere a recipe means a finite number."""
    if isinstance(value, float) and not math.isfinite(value):
        checker.report(path, f"must be a finite number, got {shown(value)}")
        return None
    return {"type": "value", "value": value}


def _parameter(spec, path, checker: Checker, depth: int):
    if not isinstance(spec, dict):
        return _fixed(spec, path, checker)  # a fixed value (in a choice's option)
    kinds = [key for key in spec if key in DISTRIBUTIONS]
    unknown = [key for key in spec if key not in DISTRIBUTIONS and key not in ("step", "log")]
    if len(kinds) != 1 or unknown:
        key = (unknown or kinds or ["?"])[0]
        hint = did_you_mean(str(key), DISTRIBUTIONS, "; did you mean {!r}?", otherwise="")
        checker.report(path, f"must be one of {{log_uniform: [low, high]}}, {{uniform: [low, "
                             f"high]}}, {{int: [low, high]}}, {{choice: [...]}} or {{value: "
                             f"x}}, got {shown(spec)}{hint}")
        return None
    kind = kinds[0]
    extra = [key for key in spec if key != kind and key not in _OPTIONS[kind]]
    if extra:
        checker.report(path, f"{kind} takes no {extra[0]!r} (its options: "
                             f"{', '.join(_OPTIONS[kind]) or 'none'})")
        return None
    if kind == "value":
        return _fixed(spec["value"], path + ("value",), checker)
    if kind == "choice":
        return _choice(spec, path, checker, depth)
    return _range(spec, kind, path, checker)


def _space(value, path, checker: Checker, depth: int = 0):
    if not isinstance(value, dict):
        checker.report(path, f"must be a mapping of dotted keys to distributions, e.g. "
                             f"{{optimizer.learning_rate: {{log_uniform: [1.0e-4, 0.1]}}}}, "
                             f"got {shown(value)}")
        return None
    space, problems = {}, len(checker.problems)
    for key, spec in value.items():
        where = path + (key,)
        try:
            parse_key(str(key))
        except ValueError as error:
            checker.report(where, str(error))
            continue
        if key.split(".")[0] == "tune":
            checker.report(where, "the search cannot tune its own tune: section")
            continue
        space[key] = _parameter(spec, where, checker, depth)
    return None if len(checker.problems) > problems else space


def _walk(space: dict, path: tuple):
    """(dotted key, its spec, its position path) of every entry, options' entries too."""
    for key, spec in space.items():
        yield key, spec, path + (key,)
        for option, branch in (spec.get("branches") or {}).items():
            yield from _walk(branch, path + (key, "choice", option))


def _check_contradictions(space: dict, path: tuple, checker: Checker) -> None:
    """The same key tuned twice, with other ranges (an option's keys may repeat in several
    options with the same range), or both at the top and inside an option."""
    top = set(space)
    seen: dict[str, dict] = {}
    for key, spec, where in _walk(space, path):
        nested = len(where) > len(path) + 1
        if nested and key in top:
            checker.report(where, f"{key} is tuned at the top of the space too; tune it in "
                                  f"one place")
        elif nested and key in seen and seen[key] != spec:
            checker.report(where, f"{key} has another distribution in another option; give "
                                  f"it the same one in each (Optuna keeps one per name) or "
                                  f"tune it at the top of the space")
        seen.setdefault(key, spec)


def _space_field(value, path, checker: Checker):
    if value is None or value == {}:
        checker.report(path, "the search space is empty: add dotted keys with distributions, "
                             "e.g. optimizer.learning_rate: {log_uniform: [1.0e-4, 0.1]}")
        return INVALID
    space = _space(value, path, checker)
    if space is None:
        return INVALID
    if all(spec["type"] == "value" for spec in space.values()):
        checker.report(path, "the search space holds only fixed values: nothing to search")
        return INVALID
    _check_contradictions(space, path, checker)
    # As written: the resolved recipe stays a recipe (print-config, a run's recipe.yaml).
    return copy.deepcopy(value)


def space_of(value: dict) -> dict:
    """The checked space as written (`tune.space` of a resolved recipe) in its parsed form:
    {dotted key: {"type": "float" | "int" | "choice" | "value", ...}}."""
    checker = Checker(Document(value, {}))
    space = _space(value, (), checker)
    if space is None:
        raise ValueError("; ".join(str(problem) for problem in checker.problems))
    return space


def _component(names: tuple, kind: str):
    """`name` or {type: name, ...its Optuna options}: resolved to a mapping."""

    def check(value, path, checker):
        if isinstance(value, str):
            value = {"type": value}
        if not isinstance(value, dict) or "type" not in value:
            checker.report(path, f"must be a {kind} name ({', '.join(names)}) or {{type: name, "
                                 f"...options}}, got {shown(value)}")
            return INVALID
        if String(names).check(value["type"], path + ("type",), checker) is INVALID:
            return INVALID
        return dict(value)

    return Custom(check, f"a {kind}")


TUNE = Section({
    "metric": Field(Nullable(String()), None,
                    "the per-epoch log key to optimize (default: val_loss, or loss "
                    "without a validation split)"),
    "direction": Field(String(("auto", "minimize", "maximize")), "auto",
                       "auto: minimize losses, maximize accuracy, AUC, precision, recall"),
    "n_trials": Field(Integer(min=1), 20, "trials in the whole study (all processes)"),
    "timeout": Field(Nullable(Number(min=0.0, min_open=True)), None,
                     "seconds after which no new trial starts (per tune process)"),
    "sampler": Field(_component(SAMPLERS, "sampler"), {"type": "tpe"}, "tpe, random, "
                     "grid, cmaes, or {type: ..., Optuna's options}"),
    "pruner": Field(_component(PRUNERS, "pruner"), {"type": "none"}, "none, median, "
                    "successive_halving, or {type: ..., Optuna's options}; fed the metric "
                    "after every epoch"),
    "seed": Field(Nullable(Integer(min=0, max=2 ** 32 - 1)), None,
                  "the sampler's seed (default: the recipe's seed)"),
    "study_name": Field(Nullable(String()), None, "the study's name in its storage "
                                                  "(default: the recipe's name)"),
    "heartbeat_interval": Field(Integer(min=1), 10, "seconds between a running trial's "
                                                    "heartbeats in the storage"),
    "grace_period": Field(Integer(min=2), 30, "seconds without a heartbeat after which a "
                                              "trial is marked failed (its process died)"),
    "space": Field(Custom(_space_field, "a search space"), None, "dotted keys -> "
                   "{log_uniform | uniform | int | choice | value}"),
})


def check_tune(value, path, checker: Checker):
    """Checks the `tune:` section (see the module's docstring); INVALID after a problem."""
    if not isinstance(value, dict):
        checker.report(path, f"must be a mapping ({TUNE_DOC}), got {shown(value)}")
        return INVALID
    resolved = TUNE.check(value, path, checker)
    if "space" not in value:
        checker.report(path, "has no space: add space: {dotted.key: {log_uniform: [low, "
                             "high]}, ...}")
        return INVALID
    if resolved.get("grace_period") not in (None, INVALID) and \
            resolved.get("heartbeat_interval") not in (None, INVALID) and \
            resolved["grace_period"] <= resolved["heartbeat_interval"]:
        checker.report(path + ("grace_period",), "must be longer than heartbeat_interval, "
                                                 "or live trials would be marked failed")
    direction = resolved.get("direction")
    metric = resolved.get("metric")
    if direction == "auto" and isinstance(metric, str) and not metric.endswith("loss") \
            and not any(metric.endswith(name) for name in _MAXIMIZED):
        checker.report(path + ("metric",), f"cannot tell whether {metric!r} should go up or "
                                           f"down; set tune.direction: minimize or maximize")
    return resolved


def direction_of(tune: dict) -> str:
    """The resolved direction: "minimize" or "maximize"."""
    if tune["direction"] != "auto":
        return tune["direction"]
    metric = tune["metric"] or "val_loss"
    return "minimize" if metric.endswith("loss") else "maximize"


__all__ += ["direction_of", "TUNE", "space_of"]
