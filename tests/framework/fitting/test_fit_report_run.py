"""Curve-fit recipes from the command line: `graphfit train` prints the fit report and writes
fit_report.json, fit_report.txt and fitted_curve.json; `graphfit evaluate` shows the report;
`graphfit plot` draws the data, the fit and its bands. (recipes/global_decay_fit.yaml trains in
tests/framework/recipes/test_recipe_runs.py with the other shipped recipes; the numbers of a
global fit's report are checked against SciPy in test_fit_report.py.)"""

import json
import os

import numpy as np

from graphfit import cli, plots

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RECIPES = os.path.join(REPO, "recipes")


def test_curve_fit_recipe_prints_and_writes_its_report(tmp_path, capsys):
    run = tmp_path / "sinc"
    assert cli.main(["train", os.path.join(RECIPES, "sinc_formula_fit.yaml"), "--run-dir",
                     str(run), "--verbose", "0"]) == 0
    printed = capsys.readouterr().out
    assert "fit report (also in" in printed and "[[Variables]]" in printed
    assert "reduced chi-square" in printed and "(min=0)" in printed
    report = json.loads((run / "fit_report.json").read_text())
    by_name = {p["name"]: p for p in report["parameters"]}
    # The data are sin(x)/x: a = w = 1 within a few standard errors.
    for name in ("a", "w"):
        assert abs(by_name[name]["value"] - 1.0) < 4 * by_name[name]["stderr"]
        low, high = report["intervals_95"][name]
        assert low < by_name[name]["value"] < high
    assert by_name["w"]["min"] == 0.0 and by_name["w"]["status"] == "varied"
    assert report["statistics"]["points"] == 210  # the training split: 70 % of 300
    assert "converged" in report["fit"]["stop_reason"]
    assert (run / "fit_report.txt").read_text().startswith("[[Fit Statistics]]")
    curve = json.loads((run / "fitted_curve.json").read_text())
    low, high = (np.array(v) for v in curve["confidence"])
    assert np.all(low < np.array(curve["fit"])) and np.all(np.array(curve["fit"]) < high)
    assert len(curve["x"]) == 210

    assert cli.main(["evaluate", str(run)]) == 0
    assert "[[Variables]]" in capsys.readouterr().out
    assert cli.main(["plot", str(run)]) == 0
    assert f"wrote {run / 'fit.png'}" in capsys.readouterr().out
    drawn = plots.fitted_curve(str(run), str(tmp_path / "again.png"))
    assert drawn.data["fit"] == curve["fit"]


def test_which_runs_are_curve_fits():
    import graphfit as gf
    from graphfit import layers, optimizers
    from graphfit.fitting.run_report import is_curve_fit

    x, y = np.linspace(0, 1, 20)[:, None], np.linspace(0, 1, 20)[:, None]

    def compiled(layer, optimizer, loss="mse"):
        model = gf.Sequential([layer], input_shape=(1,), dtype="float64")
        model.compile(optimizer=optimizer, loss=loss)
        model.evaluate(x, y, verbose=0)  # builds the loss
        return model

    network = layers.Dense(1)
    assert not is_curve_fit(compiled(network, "adam"), x, y)  # a first-order fit of a network
    assert is_curve_fit(compiled(layers.Dense(1), optimizers.LevenbergMarquardt()), x, y)
    curve = layers.Formula("a*x + b", params={"a": 1.0, "b": 0.0})
    assert is_curve_fit(compiled(curve, "adam"), x, y)
    assert not is_curve_fit(compiled(layers.Formula("a*x", params={"a": 1.0}), "adam", "mae"),
                            x, y)
    assert not is_curve_fit(compiled(layers.Dense(1), optimizers.LevenbergMarquardt(
        max_parameters=1)), x, y)
