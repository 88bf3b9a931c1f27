"""The `model:` section: a Sequential list of layers, or a graph of named nodes.

    model:
      layers:
        - {type: Dense, units: 64}
        - {type: Dense, units: 10}

    model:
      inputs: [pixels]
      nodes:
        - {name: trunk, type: Dense, units: 64, inputs: pixels}
        - {name: digit, type: Dense, units: 10, inputs: trunk}
      outputs: digit

A bare list (`model: [...]`) is the Sequential form. `base: {run: DIR}` starts a Sequential
model from the layers of a finished run (weights loaded, frozen unless `trainable: true`),
dropping its last `drop` layers, for fine-tuning a new head.
"""

from __future__ import annotations

import dataclasses

from graphfit.core.registry import did_you_mean
from graphfit.recipes.reading.components import LAYER, check_component
from graphfit.recipes.reading.problems import short_repr
from graphfit.recipes.reading.schema import (
    INVALID,
    Boolean,
    Checker,
    Either,
    Field,
    Integer,
    ListOf,
    Nullable,
    Section,
    Spec,
    String,
    shown,
)
from graphfit.recipes.running import run_directory

__all__ = ["check_model", "MODEL_DOC"]

MODEL_DOC = "the network: 'layers' (Sequential) or 'inputs', 'nodes', 'outputs' (graph)"

_KEYS = ("name", "layers", "base", "inputs", "nodes", "outputs")
_BASE = Section({
    "run": Field(String(), doc="the run directory of the trained base (or runs/<name>/latest)"),
    "drop": Field(Integer(min=0), 1, "how many of its last layers to drop (its old head)"),
    "trainable": Field(Boolean(), False, "false freezes the base"),
})
_SHAPE = Nullable(ListOf(Integer(min=1)))
_NAMES = ListOf(String(), min_length=1, single_ok=True)


def _check_layers(value, path, checker):
    checked = ListOf(_LayerEntry(), min_length=1).check(value, path, checker)
    if checked is not INVALID:
        _check_unique([(entry.get("name"), path + (i, "name")) for i, entry in enumerate(value)
                       if isinstance(entry, dict) and isinstance(entry.get("name"), str)],
                      checker)
    return checked


class _LayerEntry(Spec):
    def describe(self) -> str:
        return "a layer ({type: Name, ...arguments})"

    def check(self, value, path, checker):
        return check_component(value, path, checker, LAYER)


def _check_unique(named: list, checker: Checker) -> None:
    seen = {}
    for name, where in named:
        if name in seen:
            checker.report(where, f"the name {short_repr(name)} is used twice; layer and node "
                                  f"names must be unique")
        seen.setdefault(name, where)


def _check_inputs(value, path, checker):
    if isinstance(value, dict):
        return {name: _SHAPE.check(shape, path + (name,), checker)
                for name, shape in value.items()}
    return _NAMES.check(value, path, checker)


def _check_nodes(value, path, checker, input_names):
    if not isinstance(value, list) or not value:
        checker.report(path, f"must be a non-empty list of nodes, got {shown(value)}")
        return INVALID
    resolved, named = [], []
    for index, node in enumerate(value):
        where = path + (index,)
        before = len(checker.problems)
        if isinstance(node, dict):
            for key in ("name", "inputs"):
                if key not in node:
                    checker.report(where, f"a node needs {key!r}")
            if isinstance(node.get("name"), str):
                named.append((node["name"], where + ("name",)))
            elif "name" in node:
                checker.report(where + ("name",), f"must be a string, got {shown(node['name'])}")
            if "inputs" in node:
                _NAMES.check(node["inputs"], where + ("inputs",), checker)
        if len(checker.problems) > before:
            resolved.append(INVALID)  # the layer would only repeat the problem
            continue
        resolved.append(check_component(node, where, checker, LAYER, reserved=("inputs",)))
    _check_unique(named, checker)
    known = list(input_names) + [name for name, _ in named]
    for index, node in enumerate(value):
        if isinstance(node, dict):
            refs = node.get("inputs")
            refs = [refs] if isinstance(refs, str) else (refs if isinstance(refs, list) else [])
            _check_references(refs, path + (index, "inputs"), checker, known,
                              single=isinstance(node.get("inputs"), str))
    return resolved, known


def _check_references(refs, path, checker, known, single) -> None:
    for position, ref in enumerate(refs):
        if isinstance(ref, str) and ref not in known:
            hint = did_you_mean(ref, known, "; did you mean {!r}?", otherwise=".")
            checker.report(path if single else path + (position,),
                           f"no input or node named {short_repr(ref)}{hint} Known: "
                           f"{', '.join(known)}")


def _check_base(value, path, checker):
    resolved = _BASE.check(value, path, checker)
    if resolved is INVALID or resolved["run"] is INVALID:
        return resolved
    try:
        # Relative to the working directory, like the runs/ folder that train writes.
        resolved["run"] = run_directory.find_run(resolved["run"])
    except ValueError as error:
        checker.report(path + ("run",), str(error))
        return resolved
    try:
        count, references = _base_outline(resolved["run"], set())
    except (OSError, ValueError) as error:
        checker.report(path + ("run",), f"cannot read the base run's recipe: {error}")
        return resolved
    where = checker.document.position(path + ("run",))
    checker.base_references = getattr(checker, "base_references", []) + [
        dataclasses.replace(reference, path=path + ("run",), position=where,
                            reference=f"{reference.reference} (from the base run's recipe)")
        for reference in references]
    drop = resolved["drop"]
    if count is not None and drop is not INVALID and drop >= count:
        checker.report(path + ("drop",), f"drop {drop} would drop every layer of the base "
                                         f"model, which has {count}; drop fewer (its old "
                                         f"head is usually 1), or leave out 'base'")
    return resolved


def _base_outline(run: str, seen: set) -> tuple[int | None, list]:
    """How many layers a base run's model has, and the user code its recipe runs; read from
    its saved recipe without importing anything (its own base counted the same way)."""
    from graphfit.recipes.reading.user_code import code_references
    from graphfit.recipes.reading.yaml_source import parse_yaml

    recipe_file = run_directory.read_recipe(run)
    with open(recipe_file, encoding="utf-8") as handle:
        document = parse_yaml(handle.read(), recipe_file)
    references = code_references(document.data, document.position)
    model = document.data.get("model") if isinstance(document.data, dict) else None
    if not isinstance(model, dict) or not isinstance(model.get("layers"), list):
        return None, references  # a graph model: its layers are not a stack to count
    count = len(model["layers"])
    base = model.get("base")
    if isinstance(base, dict) and isinstance(base.get("run"), str) and base["run"] not in seen:
        inner, more = _base_outline(base["run"], seen | {run})
        if inner is not None and isinstance(base.get("drop", 1), int):
            count += max(inner - base.get("drop", 1), 0)
        references += more
    return count, references


def _alias_positions(checker: Checker, old: tuple, new: tuple) -> None:
    """`model: [...]` is read as `model: {layers: [...]}`: its items' positions follow."""
    positions = checker.document.positions
    for known, where in list(positions.items()):
        if known[: len(old)] == old:
            positions.setdefault(new + known[len(old):], where)


def check_model(value, path: tuple, checker: Checker):
    """Checks the model section; returns its resolved mapping (or INVALID)."""
    if isinstance(value, list):
        value = {"layers": value}
        _alias_positions(checker, path, path + ("layers",))
    if not isinstance(value, dict):
        checker.report(path, f"must be a mapping with 'layers' (or 'nodes'), got {shown(value)}")
        return INVALID
    Section({key: None for key in _KEYS}).check_unknown_keys(value, path, checker)
    resolved = {"name": Nullable(String()).check(value.get("name"), path + ("name",), checker)}
    if ("layers" in value) == ("nodes" in value):
        checker.report(path, "give either 'layers' (a Sequential stack) or 'nodes' (a graph)")
        return INVALID
    if "layers" in value:
        for key in ("inputs", "outputs"):
            if key in value:
                checker.report(path + (key,), f"{short_repr(key)} belongs to a graph model "
                                              f"('nodes'); a 'layers' model takes its input "
                                              f"from the data")
        resolved["layers"] = _check_layers(value["layers"], path + ("layers",), checker)
        if "base" in value:
            resolved["base"] = _check_base(value["base"], path + ("base",), checker)
        return resolved
    if "base" in value:
        checker.report(path + ("base",), "'base' works with a 'layers' model only")
    inputs = _check_inputs(value.get("inputs", ["x"]), path + ("inputs",), checker)
    input_names = [name for name in inputs if isinstance(name, str)] \
        if isinstance(inputs, (dict, list)) else []
    nodes = _check_nodes(value["nodes"], path + ("nodes",), checker, input_names)
    if "outputs" not in value:
        checker.report(path, "a graph model needs 'outputs': the node name(s) it returns")
        return INVALID
    outputs = Either(String(), ListOf(String(), min_length=1)).check(
        value["outputs"], path + ("outputs",), checker)
    if nodes is INVALID or outputs is INVALID:
        return INVALID
    refs = [outputs] if isinstance(outputs, str) else outputs
    _check_references(refs, path + ("outputs",), checker, nodes[1], isinstance(outputs, str))
    resolved.update(inputs=inputs, nodes=nodes[0], outputs=outputs)
    return resolved
