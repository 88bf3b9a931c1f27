"""Seeded mutations of the shipped recipes: `graphfit validate` never crashes on them.

Each mutation changes one value or key of a shipped recipe. Whatever the mutation, the command
must end in one of three ways: exit 0 (the recipe is still valid), exit 2 with every problem
at `FILE:LINE:COL:` (a bad recipe), or exit 1 with a one-line message (a failure while
running). It must never print a Python traceback without `--debug`. Mutations that are always
wrong (a quoted boolean, a misspelt key, a misspelt type, a value of the wrong kind where a
number is wanted) must never exit 0.

The mutations run in one worker process (one TensorFlow import), which also reports its peak
memory, so that a recipe blowing up memory is caught without timing anything.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import re
import resource
import subprocess
import sys

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RECIPES = os.path.join(REPO, "recipes")
# finetune_frozen needs a trained base run; the other recipes stand alone.
SHIPPED = sorted(f for f in os.listdir(RECIPES) if f.endswith(".yaml") and "finetune" not in f)
MUTATIONS_PER_RECIPE = 20
SEED = 20261124
POSITIONED = re.compile(r"^\S.*:\d+:\d+: ", re.MULTILINE)
MEMORY_LIMIT_MB = 6000


def _paths(value, path=()):
    """Every (path, value) in a nested recipe, containers included."""
    yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, path + (index,))


def _set(data, path, value):
    for key in path[:-1]:
        data = data[key]
    data[path[-1]] = value


def _rename(data, path, new_key):
    for key in path[:-1]:
        data = data[key]
    data[new_key] = data.pop(path[-1])


def mutate(recipe: dict, rng: random.Random) -> tuple[dict, str, bool]:
    """One mutation of `recipe`: (mutated copy, description, whether it is always wrong)."""
    data = json.loads(json.dumps(recipe))
    leaves = [(p, v) for p, v in _paths(data) if p and not isinstance(v, (dict, list))]
    keyed = [(p, v) for p, v in _paths(data) if p and isinstance(p[-1], str)
             and p[-1] not in ("name", "inputs", "outputs")]
    kind = rng.choice(["quote", "key_typo", "type_typo", "wrong_kind", "extreme", "drop_key"])
    if kind == "quote":
        candidates = [(p, v) for p, v in leaves if isinstance(v, (bool, int, float))]
        path, value = rng.choice(candidates)
        text = str(value).lower() if isinstance(value, bool) else str(value)
        _set(data, path, text)
        # A quoted bool is never right; a quoted number is wrong unless the key takes text.
        return data, f"{'.'.join(map(str, path))}: {value!r} -> {text!r}", isinstance(value, bool)
    if kind == "key_typo":
        path, _ = rng.choice([(p, v) for p, v in keyed if p[-1] != "type"])
        _rename(data, path, path[-1] + "_x")
        return data, f"key {'.'.join(map(str, path))} -> {path[-1]}_x", True
    if kind == "type_typo":
        typed = [(p, v) for p, v in leaves if p[-1] == "type" and isinstance(v, str)]
        if typed:
            path, value = rng.choice(typed)
            _set(data, path, value + "x")
            return data, f"{'.'.join(map(str, path))}: {value} -> {value}x", True
        kind = "wrong_kind"
    if kind == "wrong_kind":
        numbers = [(p, v) for p, v in leaves if isinstance(v, (int, float))
                   and not isinstance(v, bool)]
        path, value = rng.choice(numbers)
        _set(data, path, {"oops": value})
        return data, f"{'.'.join(map(str, path))}: {value!r} -> a mapping", True
    if kind == "extreme":
        numbers = [(p, v) for p, v in leaves if isinstance(v, (int, float))
                   and not isinstance(v, bool)]
        path, value = rng.choice(numbers)
        new = rng.choice([0, -1, 10**30, 1e300, -1e-300, 2**63])
        _set(data, path, new)
        return data, f"{'.'.join(map(str, path))}: {value!r} -> {new!r}", False
    path, _ = rng.choice(keyed)
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]
    return data, f"delete {'.'.join(map(str, path))}", False


def _run_worker(folder: str) -> list[dict]:
    """Runs every mutation through `graphfit validate` in this process (the worker side)."""
    from graphfit import cli

    rng = random.Random(SEED)
    results = []
    for name in SHIPPED:
        with open(os.path.join(RECIPES, name), encoding="utf-8") as handle:
            recipe = yaml.safe_load(handle)
        for index in range(MUTATIONS_PER_RECIPE):
            mutated, description, always_wrong = mutate(recipe, rng)
            path = os.path.join(folder, f"{name[:-5]}_{index}.yaml")
            with open(path, "w", encoding="utf-8") as handle:
                yaml.safe_dump(mutated, handle, sort_keys=False)
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    code = cli.main(["validate", path])
                except SystemExit as stop:
                    code = f"SystemExit({stop.code})"
                except BaseException as error:  # noqa: B036  (the test reports it)
                    code = f"raised {type(error).__name__}: {error}"
            results.append({"recipe": name, "mutation": description, "wrong": always_wrong,
                            "code": code, "stderr": err.getvalue()[-2000:]})
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    results.append({"peak_mb": peak_mb})
    return results


def test_mutated_recipes_fail_cleanly(tmp_path):
    result = subprocess.run([sys.executable, __file__, str(tmp_path)], capture_output=True,
                            text=True, timeout=900, cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    *cases, memory = json.loads(result.stdout.strip().splitlines()[-1])
    failures = []
    for case in cases:
        code, err, label = case["code"], case["stderr"], f"{case['recipe']} ({case['mutation']})"
        if code not in (0, 1, 2):
            failures.append(f"{label}: {code}")
        elif "Traceback" in err or re.search(r'File ".*", line \d+', err):
            failures.append(f"{label}: a traceback without --debug:\n{err}")
        elif code == 0 and case["wrong"]:
            failures.append(f"{label}: exit 0 for a broken recipe")
        elif code == 2 and not (POSITIONED.search(err) or err.startswith("graphfit: ")):
            failures.append(f"{label}: exit 2 without a position:\n{err}")
        elif code == 1 and "failed:" not in err:
            failures.append(f"{label}: exit 1 without a message:\n{err}")
    counts = {code: sum(c["code"] == code for c in cases) for code in (0, 1, 2)}
    print(f"{len(cases)} mutations: exit 0: {counts[0]}, exit 2: {counts[2]}, exit 1: "
          f"{counts[1]}; peak memory {memory['peak_mb']:.0f} MB")
    assert not failures, "\n".join(failures)
    assert memory["peak_mb"] < MEMORY_LIMIT_MB
    assert counts[2] >= len(cases) // 2  # the mutations really break recipes


if __name__ == "__main__":
    print(json.dumps(_run_worker(sys.argv[1])))
