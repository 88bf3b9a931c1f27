"""Curve-fit recipes from the command line: bad inputs refused by `graphfit validate` (at the
recipe's file:line:col, naming the row or curve) as by `graphfit train`, and the plots of
global-fit and fit_many runs (`fit.png` from `fitted_curve.json`)."""

import json
import os

import numpy as np
import pytest

from graphfit import cli, plots

T = np.linspace(0.0, 4.0, 8)
AMPLITUDES = (1.0, 2.0, 3.0)


def _decays(path, first_set: int = 0) -> None:
    """Three decays a*exp(-0.6 t) + 0.1 in long form: time, data_set, signal."""
    rows = ["time,data_set,signal"]
    for number, a in enumerate(AMPLITUDES):
        wiggle = 0.01 * np.sin(3.0 * T + a)  # not exact: a fit with a residual
        rows += [f"{t!r},{number + first_set},{float(a * np.exp(-0.6 * t) + 0.1 + w)!r}"
                 for t, w in zip(T.tolist(), wiggle.tolist())]
    path.write_text("\n".join(rows) + "\n")


def _global_recipe(folder, a="[1.0, 1.0, 1.0]", k="{value: 0.3, min: 0.0}") -> str:
    recipe = folder / "global.yaml"
    recipe.write_text(f"""seed: 0
data:
  source: csv
  path: decays.csv
  target: signal
  features: [time, data_set]
  shuffle: false
model:
  layers:
    - type: Formula
      expression: a*exp(-k*x1) + c
      params:
        a: {a}
        k: {k}
        c: 0.0
loss: mse
optimizer:
  type: LevenbergMarquardt
training:
  dtype: float64
  epochs: 30
  batch_size: null
  validation_split: 0.0
  test_split: 0.0
""")
    return str(recipe)


def _validate(recipe, capsys) -> str:
    assert cli.main(["validate", recipe]) == 2
    return capsys.readouterr().err


def test_validate_refuses_a_data_set_column_counted_from_one(tmp_path, capsys):
    _decays(tmp_path / "decays.csv", first_set=1)
    err = _validate(_global_recipe(tmp_path), capsys)
    assert "global.yaml:10:7: model.layers[0]: Formula 'formula" in err
    assert "': the data-set column (the inputs' last column) must hold whole numbers from 0 " \
        "to 2, since params give 3 values per data set (a)" in err
    # The first row that fails (unshuffled and unsplit: the file's order) and its values:
    # the first point (t = 0) of data set 2, counted from 1 as 3.
    assert "(rows 0 to 23 of x; row 16 fails it alone: x[16] = [0, 3]; rows count from 0 " \
        "within the training split, in the file's order)" in err
    assert "Traceback" not in err


def test_a_shuffled_recipe_says_how_its_row_numbers_count(tmp_path, capsys):
    _decays(tmp_path / "decays.csv", first_set=1)
    recipe = _global_recipe(tmp_path)
    with open(recipe) as handle:
        text = handle.read().replace("shuffle: false", "shuffle: true")
    with open(recipe, "w") as handle:
        handle.write(text)
    err = _validate(recipe, capsys)
    assert "rows count from 0 within the training split, shuffled before the split " \
        "(data.shuffle: false keeps the file's order); find the row by its values)" in err


def test_validate_refuses_per_data_set_lists_shorter_than_the_data_sets(tmp_path, capsys):
    _decays(tmp_path / "decays.csv")
    err = _validate(_global_recipe(tmp_path, a="[1.0, 1.0]"), capsys)
    assert "whole numbers from 0 to 1, since params give 2 values per data set (a)" in err
    assert "row 16 fails it alone: x[16] = [0, 2]" in err


def test_validate_refuses_a_fixed_parameter_outside_its_bounds(tmp_path, capsys):
    _decays(tmp_path / "decays.csv")
    err = _validate(_global_recipe(tmp_path, k="{value: 5.0, min: 0.0, max: 1.0, vary: false}"),
                    capsys)
    assert "global.yaml:14:9: model.layers[0].params.k: Formula: params: 'k' is fixed (vary: " \
        "false) at 5, outside its own bounds [0, 1]" in err


def _many_csv(path, sigma_row: int | None = None) -> None:
    rows = ["id,t,v,err"]
    for number, a in enumerate(AMPLITUDES):
        rows += [f"c{number},{t!r},{float(a * np.exp(-0.6 * t) + 0.01 * np.cos(5 * t))!r},0.01"
                 for t in T.tolist()]
    if sigma_row is not None:
        rows[sigma_row] = rows[sigma_row].rsplit(",", 1)[0] + ",0"
    path.write_text("\n".join(rows) + "\n")


def _many_recipe(folder, params="{a: 1.0, k: 0.3}") -> str:
    recipe = folder / "many.yaml"
    recipe.write_text(f"fit_many:\n  formula: a*exp(-k*x)\n  params: {params}\n"
                      f"  data: {{path: many.csv, curve: id, x: t, y: v, sigma: err}}\n")
    return str(recipe)


def test_fit_many_validate_and_train_name_the_row_with_a_zero_sigma(tmp_path, capsys):
    _many_csv(tmp_path / "many.csv", sigma_row=11)  # line 12 of the file: curve c1's 3rd
    recipe = _many_recipe(tmp_path)
    expected = ("many.yaml:4:49: fit_many.data.sigma: " + str(tmp_path / "many.csv") +
                ", line 12, curve 'c1': sigma (err) is 0.0; sigma is the standard deviation "
                "of y and must be positive")
    assert expected in _validate(recipe, capsys)
    assert cli.main(["train", recipe, "--run-dir", str(tmp_path / "run")]) == 2
    assert expected in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_fit_many_validate_names_a_non_finite_npz_value(tmp_path, capsys):
    y = np.stack([a * np.exp(-0.6 * T) for a in AMPLITUDES])
    y[2, 5] = np.inf
    np.savez(tmp_path / "curves.npz", x=T, y=y)
    recipe = tmp_path / "npz.yaml"
    recipe.write_text("fit_many:\n  formula: a*exp(-k*x)\n  params: {a: 1.0, k: 0.3}\n"
                      "  data: {path: curves.npz}\n")
    err = _validate(str(recipe), capsys)
    assert "fit_many.data.y: " in err and ": y is inf, not finite, at point 5 of data set 2 " \
        "(curve '2') (1 such value(s))" in err


def test_fit_many_validate_refuses_a_fixed_parameter_outside_its_bounds(tmp_path, capsys):
    _many_csv(tmp_path / "many.csv")
    err = _validate(_many_recipe(tmp_path, "{a: 1.0, k: {value: 0.9, max: 0.5, vary: false}}"),
                    capsys)
    assert "many.yaml:3:20: fit_many.params.k: params: 'k' is fixed (vary: false) at 0.9, " \
        "outside its own bounds [-inf, 0.5]" in err


def test_fit_many_validate_refuses_every_parameter_fixed(tmp_path, capsys):
    _many_csv(tmp_path / "many.csv")
    err = _validate(_many_recipe(tmp_path, "{a: {value: 1.0, vary: false}, "
                                           "k: {value: 0.3, vary: false}}"), capsys)
    assert "many.yaml:3:3: fit_many.params: every parameter is fixed (vary: false): nothing " \
        "to fit. Let at least one vary" in err


def test_fit_many_validate_names_the_curve_with_too_few_points(tmp_path, capsys):
    _many_csv(tmp_path / "many.csv")
    text = (tmp_path / "many.csv").read_text().splitlines()
    # curve c1 keeps one point of its own
    kept = [row for row in text if not row.startswith("c1,")] + \
        [next(row for row in text if row.startswith("c1,"))]
    (tmp_path / "many.csv").write_text("\n".join(kept) + "\n")
    err = _validate(_many_recipe(tmp_path), capsys)
    assert "fit_many.data: curve 'c1' has 1 point(s), fewer than the 2 varying parameters " \
        "['a', 'k']" in err


@pytest.fixture
def draws(monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.setenv("GRAPHFIT_PLOTS", "1")


def test_a_fit_many_run_plots_its_first_curves_with_their_fits(tmp_path, capsys, draws):
    _many_csv(tmp_path / "many.csv")
    run = tmp_path / "run"
    assert cli.main(["train", _many_recipe(tmp_path), "--run-dir", str(run)]) == 0
    curves = json.loads((run / "fitted_curve.json").read_text())
    assert curves["curves"] == 3 and [c["data_set"] for c in curves["data_sets"]] == \
        ["c0", "c1", "c2"]
    fitted = np.genfromtxt(run / "fits.csv", delimiter=",", names=True, dtype=None,
                           encoding="utf-8")
    for curve, a, k in zip(curves["data_sets"], fitted["a"], fitted["k"]):
        np.testing.assert_allclose(curve["x"], T)
        grid = np.array(curve["grid"])
        assert grid[0] == 0.0 and grid[-1] == 4.0 and len(grid) == 200
        np.testing.assert_allclose(curve["fit"], a * np.exp(-k * grid), rtol=1e-12)
    capsys.readouterr()
    assert cli.main(["plot", str(run)]) == 0
    out = capsys.readouterr().out
    assert f"{run} is a finished fit_many run (3 data sets" in out
    assert "fit.png draws its first 3 data set(s) with their fits" in out
    assert f"wrote {run / 'fit.png'}" in out and (run / "fit.png").stat().st_size > 1000
    assert "did not finish" not in out
    # A run without the file (a formula of several columns, an older run): said, not failed.
    os.remove(run / "fitted_curve.json")
    assert cli.main(["plot", str(run)]) == 0
    assert "holds no fitted_curve.json to draw" in capsys.readouterr().out
    assert cli.main(["plot", str(run), str(run)]) == 2
    assert "has no learning curves to compare" in capsys.readouterr().err


def test_a_global_fit_run_gets_a_curve_and_bands_per_data_set(tmp_path, capsys, draws):
    _decays(tmp_path / "decays.csv")
    run = tmp_path / "run"
    assert cli.main(["train", _global_recipe(tmp_path), "--run-dir", str(run),
                     "--verbose", "0"]) == 0
    report = json.loads((run / "fit_report.json").read_text())
    values = {p["name"]: p["value"] for p in report["parameters"]}
    assert report["statistics"]["points"] == 24  # every point: no held-out splits
    curve = json.loads((run / "fitted_curve.json").read_text())
    assert [one["data_set"] for one in curve["data_sets"]] == [0, 1, 2]
    for number, one in enumerate(curve["data_sets"]):
        np.testing.assert_allclose(one["x"], T)
        grid = np.array(one["grid"])
        expected = values[f"a[{number}]"] * np.exp(-values["k"] * grid) + values["c"]
        np.testing.assert_allclose(one["fit"], expected, rtol=1e-9)
        low, high = (np.array(v) for v in one["confidence"])
        assert np.all(low < expected) and np.all(expected < high)
        low, high = (np.array(v) for v in one["prediction"])
        assert np.all(low < expected) and np.all(expected < high)
    assert (run / "fit.png").is_file()  # drawn at the end of the run
    drawn = plots.fitted_curve(str(run), str(tmp_path / "again.png"))
    assert drawn.data == curve and (tmp_path / "again.png").stat().st_size > 1000
