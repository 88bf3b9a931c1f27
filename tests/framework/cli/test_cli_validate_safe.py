"""`graphfit validate --safe`: checks a recipe without importing or running its code, and
lists the code it would run."""

from __future__ import annotations

import textwrap

from graphfit import cli


def _write(folder, name, text):
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def test_validate_safe_runs_no_user_code_and_lists_it(tmp_path, capsys):
    marker = tmp_path / "ran.txt"
    _write(tmp_path, "cli_safe_user.py", f"""\
        import numpy as np
        open({str(marker)!r}, "a").write("imported\\n")

        def rows(n=20):
            return np.ones((n, 2), np.float32), np.arange(n) % 2
    """)
    recipe = _write(tmp_path, "r.yaml", """\
        data: {source: function, function: "cli_safe_user:rows"}
        model: [{type: Dense, units: 1}]
        loss: {type: BinaryCrossentropy, from_logits: true}
    """)
    assert cli.main(["validate", "--safe", recipe]) == 0
    out = capsys.readouterr().out
    assert "data and model were not loaded" in out
    assert f"{recipe}:1:26: data.function: imports and calls function cli_safe_user:rows" in out
    assert not marker.exists()

    assert cli.main(["validate", recipe]) == 0  # without --safe the code runs
    assert marker.read_text() == "imported\n"
    assert "OK. data: train" in capsys.readouterr().out


def test_validate_safe_still_reports_recipe_problems(tmp_path, capsys):
    recipe = _write(tmp_path, "r.yaml", """\
        data: {source: moons, n_samples: 40}
        model: [{type: Dense, units: 1, use_bias: "false"}]
        loss: {type: BinaryCrossentropy, from_logits: true}
    """)
    assert cli.main(["validate", "--safe", recipe]) == 2
    assert "model.layers[0].use_bias: must be true or false" in capsys.readouterr().err


def test_validate_safe_on_a_recipe_without_code_checks_data_and_model(tmp_path, capsys):
    recipe = _write(tmp_path, "r.yaml", """\
        data: {source: moons, n_samples: 40}
        model: [{type: Dense, units: 1}]
        loss: {type: BinaryCrossentropy, from_logits: true}
    """)
    assert cli.main(["validate", "--safe", recipe]) == 0
    assert "trainable parameters" in capsys.readouterr().out


def test_layer_function_arguments_are_user_code(tmp_path, capsys, monkeypatch):
    """BlackBox's `function` (and GradientHook's `fn`) name code: safe mode lists it and
    imports nothing; the standard library is refused in both modes."""
    marker = tmp_path / "imported.txt"
    _write(tmp_path, "cli_safe_plant.py", f"""\
        open({str(marker)!r}, "a").write("imported\\n")

        def plant(u):
            return u
    """)
    monkeypatch.syspath_prepend(str(tmp_path))
    body = """\
        data: {{source: moons, n_samples: 40}}
        model:
          - {{type: Dense, units: 2}}
          - {{type: BlackBox, function: "{function}", output_shape: [2]}}
          - {{type: Dense, units: 1}}
        loss: {{type: BinaryCrossentropy, from_logits: true}}
    """
    recipe = _write(tmp_path, "r.yaml", body.format(function="cli_safe_plant:plant"))
    assert cli.main(["validate", "--safe", recipe]) == 0
    out = capsys.readouterr().out
    assert "r.yaml:4:22: model[1].function: imports and calls function cli_safe_plant:plant" in out
    assert "data and model were not loaded" in out
    assert not marker.exists()
    assert cli.main(["validate", recipe]) == 0  # without --safe the code runs
    assert marker.read_text() == "imported\n"
    capsys.readouterr()

    shell = _write(tmp_path, "shell.yaml", body.format(function="os:system"))
    for safe in (["--safe"], []):
        assert cli.main(["validate", *safe, shell]) == 2
        err = capsys.readouterr().err
        assert ":4:22: model.layers[1].function: os:system" in err, err
        assert "may name only" in err


def test_safe_mode_checks_a_black_box_without_its_function(tmp_path, capsys):
    recipe = _write(tmp_path, "r.yaml", """\
        data: {source: moons, n_samples: 40}
        model:
          - {type: Dense, units: 2}
          - {type: BlackBox, function: "nowhere_plant.plant", estimator: surogate,
             output_shape: [2]}
        loss: {type: BinaryCrossentropy, from_logits: true}
    """)
    assert cli.main(["validate", "--safe", recipe]) == 2
    err = capsys.readouterr().err
    assert "model.layers[1].function: must look like 'package.module:function'" in err
    fixed = _write(tmp_path, "r2.yaml", open(recipe).read().replace(".plant", ":plant"))
    assert cli.main(["validate", "--safe", fixed]) == 2
    assert "model.layers[1].estimator: BlackBox: estimator must be" in capsys.readouterr().err
