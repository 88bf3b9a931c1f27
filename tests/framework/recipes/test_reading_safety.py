"""Reading recipes safely: safe mode, what user code a recipe may name, the user's own errors,
constructor argument kinds, YAML size bounds, and checks moved from run time to validate."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import textwrap
import time
import tracemalloc

import keras
import numpy as np
import pytest

import graphfit as gf
from graphfit import cli
from graphfit.recipes import RecipeError, load_recipe
from graphfit.recipes.reading import catalog
from graphfit.recipes.reading.argument_types import argument_problem
from graphfit.recipes.reading.user_code import UserCodeError, check_runnable
from graphfit.recipes.reading.yaml_source import parse_yaml
from graphfit.recipes.running import training_run

MODEL = "model: [{type: Dense, units: 1}]\nloss: {type: BinaryCrossentropy, from_logits: true}\n"


def _write(folder, name, text):
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def _problems(path, *overrides, safe=False):
    with pytest.raises(RecipeError) as caught:
        load_recipe(path, list(overrides), safe=safe)
    return [str(problem) for problem in caught.value.problems]


# --- safe mode -------------------------------------------------------------------------------

@pytest.fixture
def marked_code(tmp_path):
    """User modules that leave a marker file when imported or called."""
    marker = tmp_path / "ran.txt"
    _write(tmp_path, "reading_safety_user.py", f"""\
        import numpy as np
        import graphfit as gf
        open({str(marker)!r}, "a").write("imported\\n")

        @gf.register_layer
        class ReadingSafetyScale(gf.Layer):
            def call(self, x, training=False):
                return x

        def rows(n=20):
            open({str(marker)!r}, "a").write("called\\n")
            return np.ones((n, 2), np.float32), np.arange(n) % 2
    """)
    recipe = _write(tmp_path, "r.yaml", """\
        imports: [reading_safety_user]
        data: {source: function, function: "reading_safety_user:rows", arguments: {n: 30}}
        model:
          layers:
            - {type: ReadingSafetyScale}
            - {class_path: reading_safety_user.ReadingSafetyScale}
            - {type: Dense, units: 1, use_bias: "no"}
        loss: mse
    """)
    return recipe, marker


def test_safe_mode_imports_and_calls_nothing_and_lists_the_code(marked_code):
    recipe, marker = marked_code
    problems = _problems(recipe, safe=True)
    # What can be checked without user code still is: the quoted boolean.
    assert problems == [f"{recipe}:7:31: model.layers[2].use_bias: must be true or false, "
                        f"got 'no' (a string) (use_bias: whether to add the `bias` vector.)"]
    assert not marker.exists()
    fixed = load_recipe(recipe, ["model.layers[2].use_bias=false"], safe=True)
    assert not marker.exists()
    assert fixed.safe
    assert [str(item) for item in fixed.user_code] == [
        f"{recipe}:1:11: imports[0]: imports module reading_safety_user",
        f"{recipe}:2:26: data.function: imports and calls function reading_safety_user:rows",
        f"{recipe}:6:8: model.layers[1].class_path: imports and constructs class "
        f"reading_safety_user.ReadingSafetyScale",
    ]
    assert [item.kind for item in fixed.user_code] == ["module", "function", "class"]


def test_without_safe_mode_the_same_recipe_imports_its_code(marked_code):
    recipe, marker = marked_code
    loaded = load_recipe(recipe, ["model.layers[2].use_bias=false"])
    assert marker.read_text() == "imported\n"
    assert not loaded.safe and len(loaded.user_code) == 3


def test_safe_mode_still_refuses_unknown_types_when_nothing_is_imported(tmp_path):
    path = _write(tmp_path, "t.yaml", "data: {source: moons}\nmodel: [{type: Dens, units: 1}]\n"
                                      "loss: mse\n")
    assert "unknown layer 'Dens'" in _problems(path, safe=True)[0]


def _user_function(n=3):
    return n


class _UserClass:
    pass


@pytest.mark.parametrize("obj, reference", [(_user_function, "m:f"), (_UserClass, "m.C"),
                                            (gf.datasets.make_moons, "graphfit.datasets:m")])
def test_python_functions_and_classes_outside_the_standard_library_may_be_named(obj, reference):
    check_runnable(obj, reference)


@pytest.mark.parametrize("obj, reference, message", [
    (os.system, "os:system", "is a built-in function"),
    (eval, "builtins:eval", "is a built-in function"),
    (subprocess.run, "subprocess:run", "defined in Python's standard library (subprocess)"),
    (functools.partial(_user_function, 2), "m:p", "a partial, not a Python function or class"),
    (textwrap.TextWrapper, "textwrap.TextWrapper", "standard library (textwrap)"),
])
def test_builtins_and_standard_library_code_are_refused(obj, reference, message):
    with pytest.raises(UserCodeError, match="recipe may name only") as caught:
        check_runnable(obj, reference)
    assert message in str(caught.value)


def test_a_class_path_module_with_a_syntax_error_shows_the_users_line(tmp_path):
    (tmp_path / "reading_safety_syntax.py").write_text("x = 1\ndef broken(:\n    pass\n")
    path = _write(tmp_path, "s.yaml", "data: {source: moons}\n"
                                      "model: [{class_path: reading_safety_syntax.Layer}]\n"
                                      "loss: mse\n")
    [problem] = _problems(path)
    assert problem.startswith(f"{path}:2:10: model.layers[0].class_path: cannot import "
                              f"'reading_safety_syntax': SyntaxError: ")
    assert f"({tmp_path / 'reading_safety_syntax.py'}, line 2)" in problem


# --- argument kinds --------------------------------------------------------------------------

class _Annotated:
    def __init__(self, units: int, rate: float = 0.5, flag: bool = False,
                 name: str | None = None, free=None, scale=1.0, switch=True):
        pass


@pytest.mark.parametrize("name, value, expected", [
    ("units", 3, None), ("units", 3.0, "must be an integer, got 3.0"),
    ("units", True, "must be an integer, got True (a boolean)"),
    ("rate", 1, None), ("rate", "0.5", "write 0.5 without quotes"),
    ("flag", "false", "must be true or false, got 'false' (a string)"),
    ("name", "2024", None), ("name", None, None),  # a name may look like a number
    ("free", "1e-3", "does not say it takes a string; write 1e-3 without quotes"),
    ("free", "relu", None), ("scale", "2", "must be a number"), ("scale", {"a": 1}, None),
    ("switch", "True", "must be true or false"), ("switch", None, "must be true or false"),
    ("rate", 1e39, "overflows float32"), ("units", 2 ** 70, "does not fit in a 64-bit"),
])
def test_argument_kinds_come_from_annotations_and_defaults(name, value, expected):
    problem = argument_problem(_Annotated, name, value)
    assert (problem is None) if expected is None else (expected in problem), problem


def test_keras_argument_kinds_come_from_its_docstrings():
    schedule = keras.optimizers.schedules.ExponentialDecay
    assert "must be a number" in argument_problem(schedule, "decay_rate", "0.96")
    assert "must be an integer" in argument_problem(schedule, "decay_steps", 10.5)
    assert argument_problem(schedule, "staircase", True) is None
    assert "true or false" in argument_problem(keras.metrics.AUC, "from_logits", "yes")


def test_quoted_value_from_set_is_a_string_but_a_plain_one_a_boolean(tmp_path):
    path = _write(tmp_path, "o.yaml", "data: {source: moons, n_samples: 40}\n" + MODEL)
    assert load_recipe(path, ["loss.from_logits=false"]).loss["from_logits"] is False
    assert _problems(path, 'loss.from_logits="false"') == [
        "--set loss.from_logits=\"false\": loss.from_logits: must be true or false, got 'false' "
        "(a string); write false without quotes"]


# --- bounds, positions, schema ---------------------------------------------------------------

def test_an_alias_bomb_is_refused_in_bounded_memory():
    levels = ["a0: &a0 [" + ", ".join(["x"] * 10) + "]"]
    levels += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 12)]
    tracemalloc.start()
    try:
        with pytest.raises(RecipeError, match="expands to more than"):
            parse_yaml("\n".join(levels) + "\n", "bomb.yaml")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 300 * 2 ** 20


def test_a_recipe_within_the_bounds_still_reads():
    text = "data: " + "[" * 40 + "1" + "]" * 40 + "\n"
    assert parse_yaml(text, "deep.yaml").data["data"] is not None


def test_test_freq_is_a_training_key_defaulting_to_every_epoch(tmp_path):
    path = _write(tmp_path, "f.yaml", "data: {source: moons, n_samples: 40}\n" + MODEL)
    assert load_recipe(path).training["test_freq"] is None
    assert load_recipe(path, ["training.test_freq=3"]).training["test_freq"] == 3


def test_writable_callback_paths_pass(tmp_path):
    path = _write(tmp_path, "c.yaml", "data: {source: moons, n_samples: 40}\n" + MODEL +
                  f"callbacks:\n  - {{type: CSVLogger, filename: {tmp_path}/new/h.csv}}\n"
                  f"  - {{type: TensorBoard, log_dir: relative/logs}}\n")
    assert len(load_recipe(path).callbacks) == 2


def test_list_datasets_names_the_sources_of_your_own_data():
    names = dict(catalog.entries("datasets"))
    assert {"csv", "npz", "function", "digits", "moons"} <= set(names)
    assert "header row" in names["csv"]


def test_base_drop_larger_than_the_base_model_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    base = _write(tmp_path, "base.yaml", """\
        data: {source: moons, n_samples: 40}
        model: [{type: Dense, units: 4}, {type: Dense, units: 1}]
        loss: {type: BinaryCrossentropy, from_logits: true}
        training: {epochs: 1}
    """)
    run = training_run.train(load_recipe(base), run_dir=str(tmp_path / "base_run"),
                             verbose=0).run_dir
    tune = ("data: {source: moons, n_samples: 40}\nmodel:\n  base: {run: %s, drop: %d}\n"
            "  layers: [{type: Dense, units: 1}]\nloss: {type: BinaryCrossentropy, "
            "from_logits: true}\n")
    for drop in (2, 5):
        path = _write(tmp_path, f"tune{drop}.yaml", tune % (run, drop))
        column = (tune % (run, drop)).splitlines()[2].index("drop:") + 1
        assert _problems(path) == [
            f"{path}:3:{column}: model.base.drop: drop {drop} would drop every layer of the base "
            f"model, which has 2; drop fewer (its old head is usually 1), or leave out 'base'"]
    assert load_recipe(_write(tmp_path, "tune1.yaml", tune % (run, 1))).model["base"]["drop"] == 1
    assert cli.main(["validate", str(tmp_path / "tune5.yaml")]) == 2


def test_a_non_utf8_byte_is_placed_by_line_and_character_column(tmp_path):
    path = tmp_path / "latin.yaml"
    path.write_bytes("data: {source: moons}\nname: \"é\xff\"\n".encode("utf-8").replace(
        b"\xc3\xbf", b"\xff"))
    assert _problems(str(path)) == [f"{path}:2:9: the recipe is not UTF-8 text: the byte 0xff "
                                    f"cannot be read; save the file as UTF-8"]


# --- safe mode refuses the standard library by name; imports: refuses it in both modes --------

_STDLIB_RECIPE = """\
    imports: [this]
    data: {source: function, function: "os:system", arguments: {command: "echo pwned"}}
    model:
      - {class_path: subprocess.Popen}
    loss: mse
    training:
      validation_data: {source: function, function: "builtins:eval"}
"""


@pytest.mark.parametrize("safe", [True, False])
def test_standard_library_references_are_refused_in_both_modes(tmp_path, safe, capsys):
    path = _write(tmp_path, "s.yaml", _STDLIB_RECIPE)
    imported_before = "this" in sys.modules
    code = cli.main(["validate", *(["--safe"] if safe else []), path])
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{path}:1:11: imports[0]: 'this' is a module of Python's standard library" in err
    assert "registers nothing" in err
    assert f"{path}:2:26: data.function: os:system " in err
    assert f"{path}:4:6: model.layers[0].class_path: subprocess.Popen " in err
    assert f"{path}:7:39: training.validation_data.function: builtins:eval " in err
    assert "recipe may name only" in err and "4 problems found" in err
    if safe:
        assert "names a module of Python's standard library (subprocess)" in err
    assert ("this" in sys.modules) == imported_before  # refused without being imported


def test_safe_mode_still_accepts_references_to_user_modules(tmp_path):
    path = _write(tmp_path, "u.yaml", """\
        data: {source: function, function: "my_data:rows"}
        model: [{class_path: my_layers.Scale}]
        loss: mse
    """)
    recipe = load_recipe(path, safe=True)
    assert [item.reference for item in recipe.user_code] == ["my_data:rows", "my_layers.Scale"]


# --- size bounds: checked before YAML reads the text; long values cut in messages -------------

def test_a_recipe_over_the_byte_limit_is_refused_before_parsing(tmp_path, capsys):
    path = tmp_path / "huge.yaml"
    path.write_text("data: [" + ", ".join(["1"] * 2_000_000) + "]\n")  # 6 MB
    started = time.perf_counter()
    code = cli.main(["validate", str(path)])
    err = capsys.readouterr().err
    assert code == 2 and time.perf_counter() - started < 5, err
    assert f"{path}:1:524289: the recipe is 6,000,007 bytes (5.7 MiB), more than the limit " \
           f"of 524,288 bytes (512.0 KiB)" in err
    assert "it does not hold data" in err
    with pytest.raises(RecipeError, match="more than the limit"):
        parse_yaml("# " + "x" * 2 ** 20 + "\n", "comment.yaml")


def test_a_long_plain_list_is_refused_without_blaming_aliases():
    with pytest.raises(RecipeError) as caught:
        parse_yaml("data: [" + ", ".join(["1"] * 100_001) + "]\n", "list.yaml")
    assert "more than 100000 values (a very long list, or aliases" in str(caught.value)


def test_long_values_are_cut_in_messages(tmp_path):
    long = "x" * 100_000
    path = _write(tmp_path, "l.yaml", f"data: {{source: moons}}\n{MODEL}name: '{long} y'\n"
                                      f"{long[:1000]}: 1\nmetrics: ['{long}']\n")
    problems = _problems(path, f"training.epochs={long}")
    assert len(problems) == 4 and all(len(p) < 1000 for p in problems), problems
    assert all("…" in p for p in problems), problems


# --- the "write X without quotes" hint only where X would be accepted -------------------------

@pytest.mark.parametrize("name, value, hint", [
    ("rate", "nan", False), ("rate", ".nan", False), ("rate", "1e300", False),
    ("rate", ".inf", False), ("rate", "1e-3", True), ("switch", "1", False),
    ("switch", "nan", False), ("switch", "false", True), ("units", "1.5", False),
    ("units", "7", True), ("free", "nan", False), ("free", "true", True),
])
def test_quoted_value_hint_only_when_the_unquoted_value_fits(name, value, hint):
    problem = argument_problem(_Annotated, name, value)
    assert problem and ("without quotes" in problem) == hint, problem


def test_set_nan_learning_rate_gives_no_unquote_advice(tmp_path):
    path = _write(tmp_path, "n.yaml", "data: {source: moons, n_samples: 40}\n" + MODEL)
    assert sorted(_problems(path, "optimizer.learning_rate=nan", 'loss.from_logits="1"')) == [
        "--set loss.from_logits=\"1\": loss.from_logits: must be true or false, got '1' "
        "(a string)",
        "--set optimizer.learning_rate=nan: optimizer.learning_rate: must be a number, got "
        "'nan' (a string) (learning_rate: a non-negative float or a Keras "
        "`LearningRateSchedule`.)"]


# --- LearningRateScheduler: the list and mapping forms take the same numbers ------------------

@pytest.mark.parametrize("schedule", [{0: "0.1"}, ["0.1", 0.05], {0: 1e300}, [0.1, 1e300],
                                      {0: True}, [-0.1], {-1: 0.1}, {"x": 0.1}])
def test_learning_rate_scheduler_refuses_the_same_bad_rates_in_both_forms(schedule):
    with pytest.raises(ValueError, match=r"Received: schedule\["):
        gf.callbacks.LearningRateScheduler(schedule)


def test_learning_rate_scheduler_takes_numbers_in_both_forms():
    assert gf.callbacks.LearningRateScheduler({"0": 0.1, 2: 1}).rate_for(3, 0.5) == 1.0
    assert gf.callbacks.LearningRateScheduler([0.1, np.float32(0.05)]).rate_for(5, 0.5) == \
        pytest.approx(0.05)


def test_a_wrongly_typed_argument_quotes_what_the_class_documents_for_it(tmp_path):
    # `damping` is LM's kind of damping, not λ (that is initial_damping): the message says
    # what the argument is (a review).
    path = _write(tmp_path, "d.yaml", "data: {source: moons, n_samples: 40}\n" + MODEL)
    assert _problems(path, "optimizer={type: LevenbergMarquardt, damping: 0.01}") == [
        '--set optimizer={type: LevenbergMarquardt, damping: 0.01}: optimizer.damping: must '
        'be a string, got 0.01 (damping: "marquardt" (scale-invariant, MINPACK\'s choice) or '
        '"identity".)']
