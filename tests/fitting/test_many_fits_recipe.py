"""A `fit_many:` recipe through the command line: every data set fitted at once, one row per
data set in fits.csv (checked against SciPy's curve_fit per curve), and bad recipes or data
reported at their file:line:col."""

import csv
import json
import os

import numpy as np
from scipy.optimize import curve_fit

from graphfit import cli

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RECIPE = os.path.join(REPO, "recipes", "misra1a_many_fits.yaml")


def _misra1a(x, b1, b2):
    return b1 * (1 - np.exp(-b2 * x))


def test_the_shipped_recipe_fits_every_data_set_as_curve_fit_does(tmp_path, capsys):
    run = tmp_path / "run"
    assert cli.main(["validate", RECIPE]) == 0
    assert "OK. fit_many: 100 data sets of 14 points" in capsys.readouterr().out
    assert cli.main(["train", RECIPE, "--run-dir", str(run)]) == 0
    out = capsys.readouterr().out
    assert "fitted 100 data sets of 14 points" in out and ": 100 converged (" in out
    assert f"run directory: {run}" in out
    for entry in ("recipe.yaml", "overrides.yaml", "versions.json", "fits.csv", "summary.json"):
        assert (run / entry).is_file(), entry
    # evaluate on a fit_many run (no model, no weights) prints what train printed, saved.
    assert cli.main(["evaluate", str(run)]) == 0
    evaluated = capsys.readouterr().out.splitlines()
    assert "is a fit_many run: it has no model to evaluate" in evaluated[0]
    assert evaluated[1:] == out.splitlines()[-len(evaluated) + 1:]
    with open(run / "fits.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 100 and rows[0]["curve"] == "sample000"
    assert list(rows[0]) == ["curve", "b1", "b1_stderr", "b2", "b2_stderr", "rss", "converged",
                             "reason", "steps", "evaluations", "jacobian_evaluations",
                             "points", "dof", "chi_square", "reduced_chi_square",
                             "residual_std", "r_squared", "aic", "bic", "strong_correlations",
                             "at_bound"]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["curves"] == 100 and summary["converged"] == 100
    assert summary["dof"] == 12 and summary["strong_correlations"] == {"b1~b2": 100}
    assert 0.99 < summary["fit_statistics"]["r_squared"]["median"] < 1.0
    # SciPy's curve_fit on the same data sets, from the same start.
    table = np.genfromtxt(os.path.join(REPO, "recipes", "data", "misra1a_curves.csv"),
                          delimiter=",", skip_header=1, usecols=(1, 2)).reshape(100, 14, 2)
    for index in (0, 17, 58, 99):
        x, y = table[index, :, 0], table[index, :, 1]
        popt, pcov = curve_fit(_misra1a, x, y, p0=[500.0, 1e-4], maxfev=10000)
        row = rows[index]
        assert row["converged"] == "True"
        np.testing.assert_allclose([float(row["b1"]), float(row["b2"])], popt, rtol=1e-6)
        np.testing.assert_allclose([float(row["b1_stderr"]), float(row["b2_stderr"])],
                                   np.sqrt(np.diag(pcov)), rtol=1e-4)
        rss = np.sum((_misra1a(x, *popt) - y) ** 2)
        np.testing.assert_allclose(float(row["rss"]), rss, rtol=1e-8)
        # The fit report's formulas (lmfit's AIC, BIC), by hand from curve_fit's solution.
        np.testing.assert_allclose(
            [float(row[k]) for k in ("chi_square", "reduced_chi_square", "r_squared", "aic",
                                     "bic")],
            [rss, rss / 12, 1 - rss / np.sum((y - y.mean()) ** 2), 14 * np.log(rss / 14) + 4,
             14 * np.log(rss / 14) + 2 * np.log(14)], rtol=1e-8)
        assert row["dof"] == "12" and row["strong_correlations"].startswith("b1~b2:-0.9")


def test_an_npz_recipe_with_sigma_and_ids_matches_curve_fit_absolute_sigma(tmp_path):
    from graphfit.recipes import load_recipe
    from graphfit.recipes.running import many_fits_run

    rng = np.random.default_rng(3)
    x = np.linspace(0.0, 4.0, 12)
    y = np.stack([a * np.exp(-k * x) for a, k in ((2.0, 0.5), (3.0, 1.5), (1.0, 0.2))])
    sigma = 0.01 + 0.02 * rng.random(y.shape)
    y = y + sigma * rng.standard_normal(y.shape)
    np.savez(tmp_path / "decay.npz", t=x, counts=y, err=sigma, ids=np.array(["a", "b", "c"]))
    (tmp_path / "decay.yaml").write_text(
        "fit_many:\n  formula: A*exp(-k*x)\n  params: {A: 1.0, k: 1.0}\n"
        "  data: {path: decay.npz, x: t, y: counts, sigma: err, curve: ids}\n"
        "  absolute_sigma: true\n")
    run = many_fits_run.fit_recipe(load_recipe(str(tmp_path / "decay.yaml")),
                                   run_dir=str(tmp_path / "run"))
    assert run.curves.ids == ["a", "b", "c"]
    for index in range(3):
        popt, pcov = curve_fit(lambda t, a, k: a * np.exp(-k * t), x, y[index], p0=[1.0, 1.0],
                               sigma=sigma[index], absolute_sigma=True)
        np.testing.assert_allclose(run.fits.params[index], popt, rtol=1e-6)
        np.testing.assert_allclose(run.fits.standard_errors[index], np.sqrt(np.diag(pcov)),
                                   rtol=1e-4)


def test_print_config_round_trips_and_inspect_refuses(tmp_path, capsys):
    assert cli.main(["print-config", RECIPE]) == 0
    resolved = tmp_path / "resolved.yaml"
    resolved.write_text(capsys.readouterr().out)
    assert "max_steps: 1000" in resolved.read_text() and "xtol: 1.0e-10" in resolved.read_text()
    assert cli.main(["validate", str(resolved)]) == 0
    assert cli.main(["inspect", RECIPE]) == 2
    assert "is a fit_many recipe: it has no model" in capsys.readouterr().err


def _problems(tmp_path, capsys, text, command="validate"):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    assert cli.main([command, str(path), "--run-dir", str(tmp_path / "run")]
                    if command == "train" else [command, str(path)]) == 2
    assert not (tmp_path / "run").exists()
    return capsys.readouterr().err


def test_bad_recipes_are_reported_at_their_keys(tmp_path, capsys):
    (tmp_path / "c.csv").write_text("id,t,v\na,1,2\na,2,3\na,3,4\nb,1,2\nb,2,3\n")
    err = _problems(tmp_path, capsys, (
        "fit_many:\n"
        "  formula: a*exp(-k*x)\n"
        "  params: {a: 1.0, k: 1.0, c: 2.0}\n"
        "  data: {path: c.csv, curve: id, x: time, y: v}\n"
        "  max_step: 10\n"
        "loss: mse\n"))
    assert ("bad.yaml:3:28: fit_many.params.c: the parameter 'c' is not used in the formula "
            "'a*exp(-k*x)': remove it") in err
    assert "bad.yaml:4:34: fit_many.data.x: no column 'time' in the file. It has: id, t, v" \
        in err
    assert "bad.yaml:5:3: fit_many.max_step: unknown key 'max_step'; did you mean " \
           "'max_steps'?" in err
    assert "bad.yaml:6:1: loss: a fit_many recipe has only the keys name, fit_many, run_dir" \
        in err
    err = _problems(tmp_path, capsys, (
        "fit_many:\n  formula: a*exp(-k*x\n  params: {a: 1.0, k: 1.0}\n"
        "  data: {path: c.csv, x: t, y: v}\n"))
    assert "bad.yaml:2:3: fit_many.formula: Formula: invalid syntax" in err
    assert "bad.yaml:4:3: fit_many.data: missing required key 'curve' for a CSV file" in err
    err = _problems(tmp_path, capsys, (
        "fit_many:\n  formula: a*exp(-k*x)\n  params: {a: 1.0, k: '1'}\n"
        "  data: {path: c.npy, y: v}\n  loop: numpy\n"))
    assert "fit_many.loop: must be one of 'auto', 'python', 'traced', got 'numpy'" in err
    assert "bad.yaml:3:20: fit_many.params.k: must be a number, got '1' (a string)" in err
    assert "unknown name" not in err  # the formula is not checked against broken params
    assert "bad.yaml:4:10: fit_many.data.path: must be a .csv (long form" in err


def test_a_csv_of_different_lengths_with_bounded_and_fixed_parameters(tmp_path, capsys):
    # Each data set as fit_curve fits it alone, with the same bounds and fixed value; its
    # own points and dof in fits.csv, and the parameter on its bound named there. The
    # recipe asks for the Python loop (fit_curve's), the three data sets one by one.
    from graphfit import fitting

    rng = np.random.default_rng(4)
    lines, data = ["id,t,v"], {}
    for name, n, k in (("short", 8, 0.3), ("long", 15, 0.9), ("mid", 11, 0.2)):
        t = np.linspace(0.0, 4.0, n)
        v = 2.0 * np.exp(-k * t) + 0.1 + 0.01 * rng.standard_normal(n)
        data[name] = (t, v)
        lines += [f"{name},{float(a)!r},{float(b)!r}" for a, b in zip(t, v)]
    (tmp_path / "c.csv").write_text("\n".join(lines) + "\n")
    params = "{a: {value: 1.0, min: 0}, k: {value: 0.1, max: 0.5}, c: {value: 0.1, vary: false}}"
    (tmp_path / "r.yaml").write_text(
        f"fit_many:\n  formula: a*exp(-k*x) + c\n  params: {params}\n"
        f"  data: {{path: c.csv, curve: id, x: t, y: v}}\n  loop: python\n")
    assert cli.main(["validate", str(tmp_path / "r.yaml")]) == 0
    assert "3 data sets of 8 to 15 points" in capsys.readouterr().out
    assert cli.main(["train", str(tmp_path / "r.yaml"), "--run-dir", str(tmp_path / "run")]) == 0
    with open(tmp_path / "run" / "fits.csv", newline="") as handle:
        rows = {row["curve"]: row for row in csv.DictReader(handle)}
    p0 = {"a": {"value": 1.0, "min": 0.0}, "k": {"value": 0.1, "max": 0.5},
          "c": {"value": 0.1, "vary": False}}
    for name, (t, v) in data.items():
        alone = fitting.fit_curve("a*exp(-k*x) + c", t, v, p0=p0)
        row = rows[name]
        np.testing.assert_allclose([float(row[n]) for n in "akc"], list(alone.values.values()),
                                   rtol=1e-6)
        assert (int(row["points"]), int(row["dof"])) == (len(t), alone.dof)
        assert row["at_bound"] == ("k:max" if name == "long" else "")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["points"] == {"min": 8, "max": 15} and summary["at_bound"] == {"k": 1}
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "c.csv").write_text((tmp_path / "c.csv").read_text())
    err = _problems(tmp_path / "bad", capsys, (
        "fit_many:\n  formula: a*exp(-k*x)\n  params: {a: 1.0, k: {value: 2.0, max: 0.5}}\n"
        "  data: {path: c.csv, curve: id, x: t, y: v}\n"))
    assert "fit_many.params.k: params: the initial value of 'k' must lie strictly inside" in err
