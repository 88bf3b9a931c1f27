"""Reading recipe YAML: positions, duplicate keys, the YAML 1.1 traps, overrides, schema."""

import pytest

from graphfit.recipes import RecipeError
from graphfit.recipes.reading.overrides import apply_overrides, parse_key
from graphfit.recipes.reading.schema import Checker, Field, Integer, Number, Section, String
from graphfit.recipes.reading.yaml_source import parse_yaml


@pytest.mark.parametrize("text, expected", [
    ("1e-3", 0.001), ("5E4", 50000.0), ("-2.5e+2", -250.0), (".5", 0.5), ("1_000", 1000),
    ("010", 10), ("0x1F", 31), ("yes", "yes"), ("no", "no"), ("on", "on"), ("NO", "NO"),
    ("true", True), ("False", False), ("1:30", "1:30"), ("2024-01-31", "2024-01-31"),
    ("~", None), ("null", None), ("'1e-3'", "1e-3"), ("abc", "abc"),
])
def test_scalars_follow_yaml_1_2(text, expected):
    value = parse_yaml(f"key: {text}\n", "t.yaml").data["key"]
    assert value == expected and type(value) is type(expected)


def test_positions_are_one_based_and_cover_nested_lists():
    text = ("model:\n  layers:\n    - {type: Dense, units: 3}\n    - type: Dropout\n"
            "      rate: 0.5\n")
    document = parse_yaml(text, "m.yaml")
    assert str(document.positions[("model", "layers", 0, "units")]) == "m.yaml:3:21"
    assert str(document.positions[("model", "layers", 1, "rate")]) == "m.yaml:5:7"
    # a path that does not exist is placed at its nearest ancestor
    assert str(document.position(("model", "layers", 1, "missing"))) == "m.yaml:4:7"


def test_every_duplicate_key_is_reported_with_both_lines():
    with pytest.raises(RecipeError) as caught:
        parse_yaml("a: 1\nb:\n  c: 1\n  c: 2\na: 3\n", "d.yaml")
    lines = str(caught.value).splitlines()
    assert lines == [
        "d.yaml:4:3: b.c: duplicate key 'c' (first given at line 3); YAML would silently keep "
        "only the last one. Remove one of them.",
        "d.yaml:5:1: a: duplicate key 'a' (first given at line 1); YAML would silently keep "
        "only the last one. Remove one of them.",
    ]


def test_syntax_error_has_the_position_yaml_reports():
    with pytest.raises(RecipeError) as caught:
        parse_yaml("a: [1, 2\nb: 3\n", "s.yaml")
    assert str(caught.value).startswith("s.yaml:2:2: YAML syntax error")


def test_python_tags_are_refused():
    # safe loading: no Python object can be built from recipe text
    with pytest.raises(RecipeError, match="x.yaml:1:4: YAML error: the tag .* is not allowed"):
        parse_yaml("a: !!python/object/apply:os.system ['echo hi']\n", "x.yaml")
    with pytest.raises(RecipeError, match="x.yaml:1:4: YAML error: could not determine a "
                                          "constructor for the tag"):
        parse_yaml("a: !!python/name:os.system\n", "x.yaml")


@pytest.mark.parametrize("key, path", [
    ("training.epochs", ("training", "epochs")),
    ("model.layers[1].units", ("model", "layers", 1, "units")),
    ("model.layers.1.units", ("model", "layers", 1, "units")),
    ("model.nodes[0].inputs[1]", ("model", "nodes", 0, "inputs", 1)),
])
def test_parse_key(key, path):
    assert parse_key(key) == path


@pytest.mark.parametrize("key", ["", "model..units", "1.units", "a-b", "model.layers[x]"])
def test_parse_key_rejects_malformed_keys(key):
    with pytest.raises(ValueError):
        parse_key(key)


def test_overrides_replace_values_and_positions():
    document = parse_yaml("training:\n  epochs: 10\nmodel:\n  layers:\n    - {units: 3}\n",
                          "o.yaml")
    apply_overrides(document, ["training.epochs=2", "model.layers[0].units=7", "seed=5",
                               "optimizer.learning_rate=1e-2"])
    assert document.data == {"training": {"epochs": 2}, "model": {"layers": [{"units": 7}]},
                             "seed": 5, "optimizer": {"learning_rate": 0.01}}
    assert str(document.position(("model", "layers", 0, "units"))) == \
        "--set model.layers[0].units=7"
    assert str(document.position(("training",))) == "o.yaml:1:1"


def test_bad_overrides_are_all_reported():
    document = parse_yaml("seed: 1\nmodel:\n  layers: []\n", "o.yaml")
    with pytest.raises(RecipeError) as caught:
        apply_overrides(document, ["seed", "seed.x=1", "model.layers[2].units=3", "a=[1"])
    lines = str(caught.value).splitlines()
    assert len(lines) == 4
    assert lines[0] == "--set seed: must look like key=value (for example training.epochs=3)"
    assert lines[1] == "--set seed.x=1: seed: cannot set 'x' inside it: it is a number (1), " \
                       "not a mapping"
    assert "no item 2 here (the list has 0)" in lines[2]
    assert lines[3].startswith("--set a=[1: YAML syntax error")


def test_section_reports_every_problem_and_fills_defaults():
    section = Section({
        "epochs": Field(Integer(min=1), 10, "passes"),
        "rate": Field(Number(min=0.0, max=1.0, max_open=True), 0.5, "a fraction"),
        "mode": Field(String(("fast", "exact")), "fast", "how"),
        "needed": Field(Integer(), doc="required"),
    })
    checker = Checker(parse_yaml("s:\n  epochs: 0\n  rate: 1.0\n  mode: exakt\n  extra: 1\n",
                                 "s.yaml"))
    resolved = section.check(checker.document.data["s"], ("s",), checker)
    messages = sorted(str(p) for p in checker.problems)
    assert messages == [
        "s.yaml:1:1: s: missing required key 'needed' (required)",
        "s.yaml:2:3: s.epochs: must be an integer >= 1, got 0",
        "s.yaml:3:3: s.rate: must be a number >= 0.0 and < 1.0, got 1.0",
        "s.yaml:4:3: s.mode: must be one of 'fast', 'exact', got 'exakt'; did you mean 'exact'?",
        "s.yaml:5:3: s.extra: unknown key 'extra'. Valid keys: epochs, rate, mode, needed",
    ]
    assert set(resolved) == {"epochs", "rate", "mode", "needed"}


def test_booleans_are_not_integers():
    checker = Checker(parse_yaml("n: true\n", "b.yaml"))
    Integer(min=1).check(True, ("n",), checker)
    expected = "b.yaml:1:1: n: must be an integer >= 1, got True (a boolean)"
    assert str(checker.problems[0]) == expected


def test_duplicate_keys_are_reported_with_the_recipes_other_problems():
    from graphfit.recipes import recipe_from_text
    text = ("data: {source: moons}\nmodel: [{type: Dense, units: 1}]\nloss: mse\n"
            "training:\n  epochs: 0\n  epochs: 3\n")
    with pytest.raises(RecipeError) as caught:
        recipe_from_text(text, "r.yaml")
    assert [str(p).split(": ")[0] + ": " + str(p).split(": ")[1] for p in caught.value.problems] \
        == ["r.yaml:5:3: training.epochs", "r.yaml:6:3: training.epochs"]
    assert "must be an integer >= 1, got 0" in str(caught.value)  # the first value is kept
    assert "duplicate key 'epochs' (first given at line 5)" in str(caught.value)
