"""A weighted curve-fit recipe (a table with a `sample_weight` column, w = 1/σ²): `graphfit
train` reports the weighted fit, the numbers of SciPy's `curve_fit(sigma=1/sqrt(w))` and of
`model.fit_report(x, y, sample_weight=w)`, in fit_report.json, fit_report.txt, the printed
report and `graphfit evaluate`."""

import json

import numpy as np
import pytest
from scipy import optimize

from graphfit import cli

RECIPE = """\
seed: 0
data:
  source: table
  path: weighted.csv
  target: y
  sample_weight: w
  columns:
    x: {type: numeric, standardize: false}
model:
  layers:
    - type: Formula
      expression: a*exp(-k*x) + c
      params: {a: 1.0, k: 0.3, c: 0.0}
loss: mse
optimizer: {type: LevenbergMarquardt}
training: {dtype: float64, epochs: 100, batch_size: null, validation_split: 0.0,
           test_split: 0.0}
"""


def _curve(x, a, k, c):
    return a * np.exp(-k * x) + c


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    x = np.linspace(0.1, 6.0, 60)
    sigma = np.where(x < 3.0, 0.02, 0.3)  # two noise levels: weighting matters
    y = 1.7 * np.exp(-0.45 * x) + 0.3 + rng.normal(0.0, sigma)
    return x, y, sigma


def _train(folder, data, capsys, *overrides):
    """Trains the weighted recipe on `data` in `folder`; returns (run, what it printed)."""
    x, y, sigma = data
    rows = "".join(f"{a!r},{b!r},{1.0 / s ** 2!r}\n"
                   for a, b, s in zip(x.tolist(), y.tolist(), sigma.tolist()))
    (folder / "weighted.csv").write_text("x,y,w\n" + rows)
    (folder / "weighted.yaml").write_text(RECIPE)
    run = folder / "run"
    sets = [part for override in overrides for part in ("--set", override)]
    code = cli.main(["train", str(folder / "weighted.yaml"), "--run-dir", str(run),
                     "--verbose", "0", *sets])
    printed, errors = capsys.readouterr()
    assert code == 0, errors
    return run, printed


def test_weighted_table_run_reports_the_weighted_fit(tmp_path, capsys, data):
    x, y, sigma = data
    run, printed = _train(tmp_path, data, capsys)

    values, covariance = optimize.curve_fit(_curve, x, y, p0=[1.0, 0.3, 0.0], sigma=sigma)
    chi_square = float(np.sum(((y - _curve(x, *values)) / sigma) ** 2))
    rss = float(np.sum((y - _curve(x, *values)) ** 2))
    w = 1.0 / sigma ** 2
    mean = np.sum(w * y) / np.sum(w)
    r_squared = 1.0 - chi_square / float(np.sum(w * (y - mean) ** 2))

    report = json.loads((run / "fit_report.json").read_text())
    assert [p["name"] for p in report["parameters"]] == ["a", "k", "c"]
    np.testing.assert_allclose([p["value"] for p in report["parameters"]], values, rtol=1e-6)
    np.testing.assert_allclose([p["stderr"] for p in report["parameters"]],
                               np.sqrt(np.diag(covariance)), rtol=1e-5)
    np.testing.assert_allclose(report["covariance"], covariance, rtol=1e-4)
    statistics = report["statistics"]
    assert statistics["points"] == 60 and statistics["dof"] == 57
    assert statistics["chi_square"] == pytest.approx(chi_square, rel=1e-7)
    assert statistics["rss"] == pytest.approx(rss, rel=1e-6)
    assert statistics["r_squared"] == pytest.approx(r_squared, rel=1e-7)
    assert report["weighted"] is True
    # The unweighted report would say χ² = RSS and R² about 0.84: it does not.
    assert statistics["chi_square"] > 10 * statistics["rss"]

    text = (run / "fit_report.txt").read_text()
    assert _number(text, "chi-square         = ") == pytest.approx(chi_square, rel=1e-6)
    assert _number(text, "a: ", "+/- ") == pytest.approx(np.sqrt(covariance[0, 0]),
                                                           rel=1e-5)
    assert text.strip() in printed
    curve = json.loads((run / "fitted_curve.json").read_text())
    assert "confidence" in curve and "prediction" not in curve  # that needs σ at each x
    assert cli.main(["evaluate", str(run)]) == 0
    shown = capsys.readouterr().out
    assert _number(shown, "chi-square         = ") == pytest.approx(chi_square, rel=1e-6)


def test_absolute_sigma_reads_the_weights_as_known_errors(tmp_path, capsys, data):
    x, y, sigma = data
    run, _ = _train(tmp_path, data, capsys, "training.absolute_sigma=true")
    _, covariance = optimize.curve_fit(_curve, x, y, p0=[1.0, 0.3, 0.0], sigma=sigma,
                                       absolute_sigma=True)
    report = json.loads((run / "fit_report.json").read_text())
    assert report["absolute_sigma"] is True
    np.testing.assert_allclose([p["stderr"] for p in report["parameters"]],
                               np.sqrt(np.diag(covariance)), rtol=1e-5)


def _number(text: str, line_start: str, before: str | None = None) -> float:
    """The number after `before` (or after `line_start`) on the line starting so (after
    its indent)."""
    line = next(line.lstrip() for line in text.splitlines()
                if line.lstrip().startswith(line_start.lstrip()))
    rest = line.split(before, 1)[1] if before else line[len(line_start):]
    return float(rest.split()[0])
