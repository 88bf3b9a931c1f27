"""A seeded fuzzer over every key of every shipped recipe: `graphfit validate` (in process)
ends with exit 0, or exit 2 with every problem at `FILE:LINE:COL: key:` — never a traceback,
never an unpositioned message, never another exit code.

Each case replaces one value of a shipped recipe (recipes/*.yaml and the example recipes the
tests train) with a value of the wrong kind: a non-finite number (.inf, -.inf, .nan), an empty
string, a list, a mapping, null, a boolean or a string. Every key (and every list item) of every
recipe gets at least one mutation. Most cases stop at the schema; the few that still check are
validated in full (data loaded, model built), which is what keeps them honest.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import pathlib
import random
import re

import pytest
import yaml

from graphfit import cli

REPO = pathlib.Path(__file__).resolve().parents[3]
SEED = 45
# finetune_frozen needs a trained base run; the others stand alone.
SHIPPED = sorted(p for p in (REPO / "recipes").glob("*.yaml") if "finetune" not in p.name)
EXAMPLES = {
    "moons_graph.yaml": (
        "seed: 0\n"
        "data: {source: moons, n_samples: 60, noise: 0.1}\n"
        "model:\n"
        "  inputs: [points]\n"
        "  nodes:\n"
        "    - {name: hidden, type: Dense, units: 4, activation: relu, inputs: points}\n"
        "    - {name: logits, type: Dense, units: 2, inputs: hidden}\n"
        "  outputs: logits\n"
        "loss: {type: SparseCategoricalCrossentropy, from_logits: true}\n"
        "metrics: [accuracy]\n"
        "optimizer: {type: SGD, learning_rate: 0.1, momentum: 0.9}\n"
        "callbacks: [{type: EarlyStopping, monitor: val_loss, patience: 2}]\n"
        "training: {epochs: 2, batch_size: 16, validation_split: 0.2, test_split: 0.2}\n"),
}
WRONG = [math.inf, -math.inf, math.nan, "", [], ["x"], {}, {"x": 1}, None, True, "text", -1]
POSITIONED = re.compile(r"^\S.*:\d+:\d+: \S", re.MULTILINE)


def _paths(value, path=()):
    if path:
        yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, path + (index,))


# Fewer samples (unless the mutation is there): the data is generated only to be checked.
_SMALLER = {("data", "n_samples"): 120, ("data", "n_graphs"): 60,
            ("data", "arguments", "n_samples"): 256}


def _replace(data, path, value):
    data = json.loads(json.dumps(data))
    for key, small in _SMALLER.items():
        parent = data
        for part in key[:-1]:
            parent = parent.get(part) if isinstance(parent, dict) else None
        if isinstance(parent, dict) and isinstance(parent.get(key[-1]), int):
            parent[key[-1]] = min(parent[key[-1]], small)
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return data


def _cases():
    rng = random.Random(SEED)
    sources = {p.name: p.read_text(encoding="utf-8") for p in SHIPPED}
    sources.update(EXAMPLES)
    cases = []
    for name, text in sources.items():
        recipe = yaml.safe_load(text)
        for path in _paths(recipe):
            cases.append((name, path, rng.choice(WRONG)))
    return cases


CASES = _cases()


def _validate(path: str) -> tuple[object, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            code = cli.main(["validate", path])
        except BaseException as error:  # noqa: B036  (the test reports it)
            code = f"raised {type(error).__name__}: {error}"
    return code, err.getvalue()


def _problem(code, err: str, value) -> str | None:
    if code == 0:
        # No key takes an infinity or NaN: a recipe holding one is never valid.
        finite = not isinstance(value, float) or math.isfinite(value)
        return None if finite else "exit 0 for a non-finite number"
    if code != 2:
        return f"exit {code}"
    if "Traceback" in err or re.search(r'File ".*", line \d+', err):
        return "a traceback"
    body = [line for line in err.splitlines()
            if line.strip() and not line.startswith(("graphfit: ", "  "))]
    if not body or any(not POSITIONED.match(line) for line in body):
        return "an unpositioned message"
    return None


def test_fuzzer_covers_every_key():
    assert len(CASES) >= 300
    per_recipe = {name for name, _, _ in CASES}
    assert len(per_recipe) == len(SHIPPED) + len(EXAMPLES)


def test_fuzzed_recipes_exit_0_or_2_with_a_position(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a recipe's run_dir or base run is looked up from here
    sources = {p.name: yaml.safe_load(p.read_text(encoding="utf-8")) for p in SHIPPED}
    sources.update({name: yaml.safe_load(text) for name, text in EXAMPLES.items()})
    failures, codes = [], {}
    for index, (name, path, value) in enumerate(CASES):
        mutated = _replace(sources[name], path, value)
        file = tmp_path / f"{index:04d}_{name}"
        file.write_text(yaml.safe_dump(mutated, sort_keys=False), encoding="utf-8")
        code, err = _validate(str(file))
        codes[code if code in (0, 2) else "other"] = codes.get(
            code if code in (0, 2) else "other", 0) + 1
        problem = _problem(code, err, value)
        if problem:
            where = ".".join(map(str, path))
            failures.append(f"{name} {where} = {value!r}: {problem}:\n{err[-1500:]}")
    print(f"{len(CASES)} fuzzed recipes: {codes}")
    if failures:
        pytest.fail(f"{len(failures)} failures:\n" + "\n".join(failures[:40]), pytrace=False)
