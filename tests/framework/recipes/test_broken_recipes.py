"""Broken recipes: `graphfit validate` reports every problem at once, at its line, column and key.

Each file in `broken/` is a small recipe with one family of problems. Its leading comment lines
say what `graphfit validate FILE` must print on stderr:

    # expect: LINE:COL dotted.key   one line per problem: `FILE:LINE:COL: dotted.key: ...`
                                    (no key for problems of the whole document, such as YAML
                                    syntax errors)
    # message: text                 a substring of the output
    # absent: text                  a substring the output must not hold
    # xfail: reason                 a known defect: the test is xfail(strict=True)

The exit code must be 2, the number of problems the one the file announces (so a problem that
is silently dropped, or one reported twice, fails), and no Python traceback or stack excerpt may
reach the user. The in-process calls share one TensorFlow import; one case runs the installed
`graphfit` console script to check what a user really sees.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
import yaml

from graphfit import cli
from graphfit.recipes import RecipeError

HERE = pathlib.Path(__file__).parent
BROKEN = HERE / "broken"
REPO = HERE.parents[2]
GRAPHFIT = os.path.join(os.path.dirname(sys.executable), "graphfit")

_EXPECT = re.compile(r"(\d+):(\d+)(?:\s+(\S+))?$")


@dataclasses.dataclass
class Expected:
    """What the header comments of a broken recipe announce."""

    problems: list  # (line, column, dotted key or None)
    messages: list
    absent: list
    xfail: str | None


def parse_header(text: str) -> Expected:
    expected = Expected([], [], [], None)
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        tag, _, value = line[1:].strip().partition(":")
        value = value.strip()
        if tag == "expect":
            match = _EXPECT.match(value)
            assert match, f"malformed expect line: {line!r}"
            expected.problems.append((int(match[1]), int(match[2]), match[3]))
        elif tag == "message":
            expected.messages.append(value)
        elif tag == "absent":
            expected.absent.append(value)
        elif tag == "xfail":
            expected.xfail = value
    return expected


def check_report(source: str, expected: Expected, code: int, err: str) -> None:
    """Asserts that stderr `err` reports exactly the announced problems of `source`."""
    assert code == 2, err
    assert "Traceback" not in err and 'File "' not in err, err
    for line, column, key in expected.problems:
        where = f"{source}:{line}:{column}: " + (f"{key}: " if key else "")
        assert where in err, f"expected {where!r} in:\n{err}"
    for message in expected.messages:
        assert message in err, f"expected {message!r} in:\n{err}"
    for message in expected.absent:
        assert message not in err, f"did not expect {message!r} in:\n{err}"
    count = len(expected.problems)
    summary = f"graphfit: {count} problem{'s' if count != 1 else ''} found; nothing was run."
    assert summary in err, err


def validate(capsys, *argv: str) -> tuple[int, str, str]:
    """`graphfit validate ...` in this process: (exit code, stdout, stderr)."""
    code = cli.main(["validate", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _header(path: pathlib.Path) -> Expected:
    # errors="replace": the corpus holds a recipe that is deliberately not UTF-8.
    return parse_header(path.read_text(encoding="utf-8", errors="replace"))


def _corpus():
    params = []
    for path in sorted(BROKEN.glob("*.yaml")):
        reason = _header(path).xfail
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        params.append(pytest.param(path, id=path.stem, marks=marks))
    return params


CORPUS = _corpus()


def test_corpus_is_complete():
    headers = [_header(p.values[0]) for p in CORPUS]
    assert len(headers) >= 32
    assert all(header.problems for header in headers)
    assert sum(len(header.problems) >= 2 for header in headers) >= 3


@pytest.mark.parametrize("path", CORPUS)
def test_broken_recipe(path, capsys):
    expected = _header(path)
    code, out, err = validate(capsys, str(path))
    check_report(str(path), expected, code, err)
    assert "OK." not in out


# --- data files: recipes written next to tiny CSV / .npz files --------------------------------

_MODEL = ("model: [{type: Dense, units: 1}]\n"
          "loss: {type: BinaryCrossentropy, from_logits: true}\n"
          "training: {epochs: 1, validation_split: 0}\n")

FILE_CASES = {
    "csv_missing_file": (
        "# expect: 3:21 data.path\n"
        "# message: file not found: {folder}/missing.csv (a relative path is read from the "
        "recipe's folder)\n"
        "data: {source: csv, path: missing.csv, target: label}\n"),
    "csv_unknown_columns": (
        "# expect: 4:37 data.target\n"
        "# message: no column 'labl' in the file; did you mean 'label'? It has: a, b, label\n"
        "# expect: 4:65 data.features[1]\n"
        "data: {source: csv, path: tiny.csv, target: labl, features: [a, c]}\n"),
    "csv_without_target": (
        "# expect: 3:1 data\n"
        "# message: missing required key 'target' (the label column(s))\n"
        "data: {source: csv, path: tiny.csv}\n"),
    "npz_unknown_key": (
        "# expect: 3:37 data.x_key\n"
        "# message: no array 'X' in the file; did you mean 'x'? It has: x, y\n"
        "data: {source: npz, path: tiny.npz, x_key: X}\n"),
    "npz_read_as_csv": (
        "# expect: 3:21 data.path\n"
        "# message: cannot read {folder}/tiny.npz\n"
        "data: {source: csv, path: tiny.npz, target: label}\n"),
    "validation_data_missing_file": (
        "# expect: 6:64 training.validation_data.path\n"
        "# message: file not found: {folder}/gone.npz\n"
        "data: {source: npz, path: tiny.npz}\n"
        "model: [{type: Dense, units: 1}]\n"
        "loss: {type: BinaryCrossentropy, from_logits: true}\n"
        "training: {validation_split: 0, validation_data: {source: npz, path: gone.npz}}\n"),
}


@pytest.fixture
def data_folder(tmp_path):
    """A folder with tiny.csv (columns a, b, label) and tiny.npz (arrays x, y)."""
    rows = "".join(f"{i},{2 * i},{i % 2}\n" for i in range(12))
    (tmp_path / "tiny.csv").write_text("a,b,label\n" + rows)
    np.savez(tmp_path / "tiny.npz", x=np.zeros((12, 3), np.float32), y=np.arange(12) % 2)
    return tmp_path


@pytest.mark.parametrize("name", sorted(FILE_CASES))
def test_broken_data_file(name, data_folder, capsys):
    text = FILE_CASES[name].replace("{folder}", str(data_folder))
    if "model:" not in text:
        text += _MODEL
    path = data_folder / f"{name}.yaml"
    path.write_text(text)
    code, _, err = validate(capsys, str(path))
    check_report(str(path), parse_header(text), code, err)


# --- overrides ------------------------------------------------------------------------------

BASE = """\
seed: 0
data: {source: moons, n_samples: 40}
model:
  layers:
    - {type: Dense, units: 4, activation: relu}
    - {type: Dense, units: 1}
loss: {type: BinaryCrossentropy, from_logits: true}
optimizer: {type: SGD, learning_rate: 0.1}
training:
  epochs: 2
"""


@pytest.fixture
def base_recipe(tmp_path):
    path = tmp_path / "base.yaml"
    path.write_text(BASE)
    return str(path)


BAD_OVERRIDES = {
    "unknown_key": (["training.epchs=3"], [
        "--set training.epchs=3: training.epchs: unknown key 'epchs'; did you mean 'epochs'?"]),
    "not_an_integer": (["training.epochs=abc"], [
        "--set training.epochs=abc: training.epochs: must be an integer >= 1, got 'abc' "
        "(a string)"]),
    "missing_equals": (["training.epochs"], [
        "--set training.epochs: ", "must look like key=value (for example training.epochs=3)"]),
    "malformed_key": (["model..x=1"], [
        "--set model..x=1: ", "'model..x' is not a dotted key such as training.epochs"]),
    "index_out_of_range": (["model.layers[9].units=3"], [
        "--set model.layers[9].units=3: model.layers[9]: ", "no item 9 here (the list has 2)"]),
    "bad_yaml_value": (["metrics=[acc"], [
        "--set metrics=[acc: YAML syntax error: expected ',' or ']'"]),
    "key_inside_scalar": (["seed.x=1"], [
        "--set seed.x=1: seed: ", "cannot set 'x' inside it: it is a number (0), not a mapping"]),
    "index_first": (["1.x=2"], [
        "--set 1.x=2: ", "'1.x' must start with a section name such as training"]),
    "constructor_rejects": (["model.layers[0].units=-2"], [
        "--set model.layers[0].units=-2: model.layers[0].units: Dense: units must be a positive "
        "integer. Received: units=-2"]),
    "unknown_loss": (["loss=msee"], ["--set loss=msee: loss: Unknown loss 'msee'. Did you mean "
                                     "'mse'?"]),
    "all_malformed_at_once": (["seed.x=1", "nope"], [
        "--set seed.x=1: seed: ", "--set nope: ", "must look like key=value"]),
}


@pytest.mark.parametrize("name", sorted(BAD_OVERRIDES))
def test_bad_override(name, base_recipe, capsys):
    overrides, messages = BAD_OVERRIDES[name]
    argv = [part for text in overrides for part in ("--set", text)]
    code, _, err = validate(capsys, base_recipe, *argv)
    assert code == 2, err
    assert "Traceback" not in err, err
    for message in messages:
        assert message in err, f"expected {message!r} in:\n{err}"
    # Each malformed override is one problem, named by the override, never by the file.
    count = len(overrides)
    assert f"graphfit: {count} problem{'s' if count != 1 else ''} found" in err, err
    assert base_recipe not in err, err


def test_override_makes_a_file_key_invalid(base_recipe, capsys):
    # The override is fine; the file's moons-only key no longer fits: blame the file's line.
    code, _, err = validate(capsys, base_recipe, "--set", "data.source=digits")
    assert code == 2
    assert (f"{base_recipe}:2:23: data.n_samples: unknown key 'n_samples'. Valid keys: source, "
            f"standardize, shuffle, as_images") in err


def _print_config(capsys, *argv: str) -> dict:
    assert cli.main(["print-config", *argv]) == 0
    return yaml.safe_load(capsys.readouterr().out)


def test_valid_override_changes_resolved_config(base_recipe, capsys):
    plain = _print_config(capsys, base_recipe)
    overrides = ["training.epochs=3", "model.layers[0].units=7", "optimizer.learning_rate=1e-3",
                 "training.validation_data=null"]
    argv = [part for text in overrides for part in ("--set", text)]
    changed = _print_config(capsys, base_recipe, *argv)
    assert (plain["training"]["epochs"], changed["training"]["epochs"]) == (2, 3)
    assert (plain["model"]["layers"][0]["units"], changed["model"]["layers"][0]["units"]) == (4, 7)
    # YAML 1.2 numbers: 1e-3 is a float, not the string YAML 1.1 would read.
    assert changed["optimizer"]["learning_rate"] == pytest.approx(1e-3)
    for config in (plain, changed):
        del config["training"]["epochs"], config["model"]["layers"][0]["units"]
        del config["optimizer"]["learning_rate"]
    assert plain == changed
    assert validate(capsys, base_recipe, *argv)[0] == 0


def test_unknown_section_from_override_names_the_override(base_recipe, capsys):
    code, _, err = validate(capsys, base_recipe, "--set", "traning.epochs=3")
    assert code == 2
    assert ("--set traning.epochs=3: traning: unknown key 'traning'; did you mean 'training'?"
            in err), err


def test_optimizer_override_without_optimizer_section(tmp_path, capsys):
    path = tmp_path / "no_optimizer.yaml"
    path.write_text(BASE.replace("optimizer: {type: SGD, learning_rate: 0.1}\n", ""))
    code, out, err = validate(capsys, str(path), "--set", "optimizer.learning_rate=1e-3")
    assert "a optimizer" not in err
    assert code == 0 or "--set optimizer.learning_rate=1e-3: optimizer" in err, err


def test_override_into_scalar_reads_well(base_recipe, capsys):
    _, _, err = validate(capsys, base_recipe, "--set", "seed.x=1")
    assert "a int" not in err, err


def test_unclosed_bracket_says_where_it_opened(capsys):
    _, _, err = validate(capsys, str(BROKEN / "yaml_unclosed_bracket.yaml"))
    assert "line 5" in err, err


# --- the command line around the recipe ---------------------------------------------------

def test_debug_reraises(capsys):
    path = str(BROKEN / "epochs_string.yaml")
    with pytest.raises(RecipeError) as raised:
        cli.main(["validate", path, "--debug"])
    assert [problem.path for problem in raised.value.problems] == [("training", "epochs")]


def test_global_debug_flag_reraises():
    with pytest.raises(RecipeError):
        cli.main(["--debug", "validate", str(BROKEN / "epochs_string.yaml")])


def test_missing_recipe_file(tmp_path, capsys):
    path = str(tmp_path / "nowhere.yaml")
    code, _, err = validate(capsys, path)
    assert code == 2
    assert f"{path}: recipe file not found\n" in err
    assert "Traceback" not in err


def test_recipe_is_a_directory(tmp_path, capsys):
    code, _, err = validate(capsys, str(tmp_path))
    assert code == 2
    assert f"{tmp_path}: is a directory; give the recipe's .yaml file\n" in err
    assert "Traceback" not in err


def test_minimal_recipe_without_training_section_validates(tmp_path, capsys):
    path = tmp_path / "minimal.yaml"
    path.write_text("data: {source: moons, n_samples: 40}\nmodel: [{type: Dense, units: 1}]\n"
                    "loss: {type: BinaryCrossentropy, from_logits: true}\n")
    code, out, err = validate(capsys, str(path))
    assert code == 0, err
    assert f"{path}: OK. data: train 28, val 6, test 6 samples" in out


# --- the installed console script ---------------------------------------------------------

# One real process: what a user sees of `graphfit validate` beyond what the in-process calls
# above see (the real stderr, with anything TensorFlow's start-up writes to it, and the
# process's exit code). Each such process costs a TensorFlow import (~8 s of CPU), so one
# recipe with problems in every section is read by it; the reports of a YAML syntax error and
# of a bad --set are checked in-process, word for word, by test_broken_recipe[yaml_tab] and
# test_bad_override[not_an_integer].
_CONSOLE_RECIPE = BROKEN / "many_problems.yaml"


@pytest.fixture(scope="module")
def console() -> subprocess.CompletedProcess:
    """The console script's finished `graphfit validate` of many_problems.yaml."""
    assert os.path.exists(GRAPHFIT), f"the graphfit console script is not installed: {GRAPHFIT}"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run([GRAPHFIT, "validate", str(_CONSOLE_RECIPE)], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=300)


def test_console_script_broken_recipe(console):
    check_report(str(_CONSOLE_RECIPE), _header(_CONSOLE_RECIPE), console.returncode,
                 console.stderr)
    assert console.stdout == ""


# --- a merge-key bomb: refused, or merged once by PyYAML itself -------------------------------

# a holds 8 keys; each next mapping merges 8 aliases of the one before.
MERGE_BOMB = "a: &a {x0: 1, x1: 1, x2: 1, x3: 1, x4: 1, x5: 1, x6: 1, x7: 1}\n" + "".join(
    f"{name}: &{name} {{<<: [{', '.join([f'*{previous}'] * 8)}]}}\n"
    for previous, name in zip("abcdefg", "bcdefgh"))


def _merges_repeat_keys() -> bool:
    """Whether this PyYAML flattens `<<: [*m, *m]` into repeated keys, so that merge keys
    nested in each other multiply a mapping eightfold per level here (before 6.0.4; 6.0.4
    merges each key once)."""
    loader = yaml.SafeLoader("m: &m {k: 1}\nn: {<<: [*m, *m]}\n")
    try:
        merged = loader.get_single_node().value[1][1]
        loader.flatten_mapping(merged)
        return len(merged.value) > 1
    finally:
        loader.dispose()


def test_a_merge_key_bomb_is_refused_or_merged_once(tmp_path, capsys):
    path = tmp_path / "merge_bomb.yaml"
    path.write_text(MERGE_BOMB)
    code, out, err = validate(capsys, str(path))
    if _merges_repeat_keys():  # 8**6 = 262 144 values at f: refused there, nothing built
        expected = Expected([(6, 4, None)], ["the recipe expands to more than 100000 values"],
                            [], None)
    else:  # each mapping holds its 8 keys: a recipe with unknown top-level keys a..h
        problems = [(line, 1, key) for line, key in enumerate("abcdefgh", start=1)]
        expected = Expected(problems + [(1, 1, None)] * 3, ["unknown key 'h'"],
                            ["expands to more than"], None)
    check_report(str(path), expected, code, err)
    assert "OK." not in out
