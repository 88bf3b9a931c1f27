"""The mistakes made while writing a recipe are reported before TensorFlow is imported.

A missing file, a YAML syntax error, a malformed `--set` and a recipe that is not a mapping
need nothing but the file's text; `graphfit validate`, `train`, `print-config` and `inspect`
report them with the messages and exit code of the full check, in a fraction of a second
instead of after TensorFlow's start-up (several seconds). One fresh interpreter runs every
case (a process that had imported TensorFlow would prove nothing) and says whether TensorFlow
was imported.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

RECIPE = ("data: {source: moons, n_samples: 40}\n"
          "model: [{type: Dense, units: 1}]\n"
          "loss: {type: BinaryCrossentropy, from_logits: true}\n")
SUMMARY = "graphfit: 1 problem found; nothing was run."

# Each case: (argv, the files in the working directory, the first line printed on stderr).
CASES = {
    "yaml syntax error": (
        ["validate", "syntax.yaml"],
        {"syntax.yaml": "data: {source: moons\nmodel: [{type: Dense, units: 1}]\n"},
        "syntax.yaml:2:6: YAML syntax error: expected ',' or '}', but got ':' (while parsing "
        "a flow mapping at line 1, column 7)"),
    "missing file": (
        ["validate", "no_such_recipe.yaml"], {},
        "no_such_recipe.yaml: recipe file not found"),
    "not a mapping": (
        ["validate", "list.yaml"], {"list.yaml": "- data\n- model\n"},
        "list.yaml:1:1: a recipe must be a mapping of sections (name, seed, imports, data, "
        "model, loss, metrics, optimizer, training, callbacks, distribute, run_dir, tune), got "
        "['data', 'model'] (a list)"),
    "empty recipe, train": (
        ["train", "empty.yaml"], {"empty.yaml": "# nothing yet\n"},
        "empty.yaml:1:1: the recipe is empty: it needs at least the sections data, model and "
        "loss (see recipes/quickstart.yaml)"),
    "override without '=', print-config": (
        ["print-config", "ok.yaml", "--set", "training.epochs"], {"ok.yaml": RECIPE},
        "--set training.epochs: must look like key=value (for example training.epochs=3)"),
    "override into a list recipe": (
        ["validate", "list.yaml", "--set", "training.epochs=3"], {"list.yaml": "- data\n"},
        "--set training.epochs=3: the recipe is not a mapping, so it has no keys to set"),
    "yaml syntax error, inspect": (
        ["inspect", "syntax.yaml"],
        {"syntax.yaml": "data: {source: moons\nmodel: [{type: Dense, units: 1}]\n"},
        "syntax.yaml:2:6: YAML syntax error: expected ',' or '}', but got ':' (while parsing "
        "a flow mapping at line 1, column 7)"),
}

_PROBE = """
import contextlib, io, json, os, sys
from graphfit.cli.main import main

results = {}
for name, (argv, files, _) in json.loads(sys.argv[1]).items():
    folder = os.path.join(sys.argv[2], str(len(results)))
    os.makedirs(folder)
    for file_name, text in files.items():
        with open(os.path.join(folder, file_name), "w") as handle:
            handle.write(text)
    os.chdir(folder)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    results[name] = [code, out.getvalue(), err.getvalue()]
print(json.dumps({"results": results, "tensorflow": "tensorflow" in sys.modules}))
"""


@pytest.fixture(scope="module")
def probed(tmp_path_factory) -> dict:
    """What one fresh interpreter printed after running every case through `main`."""
    folder = tmp_path_factory.mktemp("mistakes")
    result = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(CASES), str(folder)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_no_case_imports_tensorflow(probed):
    assert set(probed["results"]) == set(CASES)
    assert probed["tensorflow"] is False


@pytest.mark.parametrize("name", list(CASES))
def test_the_mistake_is_reported_as_the_full_check_reports_it(probed, name):
    code, out, err = probed["results"][name]
    assert code == 2, err
    assert out == ""
    assert err.splitlines() == [CASES[name][2], SUMMARY]


def test_the_outline_names_the_sections_of_the_schema():
    from graphfit.recipes.reading.outline import RECIPE_SECTIONS
    from graphfit.recipes.reading.sections import RECIPE

    assert tuple(RECIPE.fields) == RECIPE_SECTIONS
