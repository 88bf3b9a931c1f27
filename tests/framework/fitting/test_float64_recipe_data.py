"""A float64 curve-fit recipe reads its CSV and NPZ numbers in float64: time stamps such as
1700000020 keep their digits (float32 merges every 128 s into one value), so the fit is
SciPy's `curve_fit` on the file. A float32 read that merges distinct values warns."""

import json
import warnings

import numpy as np
import pytest
from scipy.optimize import curve_fit

from graphfit import cli, datasets

START = 1_700_000_000
T = START + np.arange(0.0, 600.0, 20.0)


def _decay(t, a, tau, c):
    return a * np.exp(-(t - START) / tau) + c


Y = _decay(T, 5.0, 120.0, 0.5) + 0.02 * np.sin(0.7 * np.arange(len(T)))


def _rows() -> str:
    return "".join(f"{t!r},{y!r}\n" for t, y in zip(T.tolist(), Y.tolist()))


def _recipe(folder, source: str) -> str:
    if source == "csv":
        (folder / "stamps.csv").write_text("unix_time,signal\n" + _rows())
        data = "{source: csv, path: stamps.csv, target: signal, features: [unix_time]}"
    else:
        np.savez(folder / "stamps.npz", x=T[:, None], y=Y)
        data = "{source: npz, path: stamps.npz}"
    recipe = folder / f"stamps_{source}.yaml"
    recipe.write_text(f"""seed: 0
data: {data}
model:
  layers:
    - type: Formula
      expression: a*exp(-(x - {START})/tau) + c
      params: {{a: 1.0, tau: {{value: 100.0, min: 1.0}}, c: 0.0}}
loss: mse
optimizer: {{type: LevenbergMarquardt}}
training: {{dtype: float64, epochs: 100, batch_size: null, validation_split: 0.0,
           test_split: 0.0}}
""")
    return str(recipe)


@pytest.mark.parametrize("source", ["csv", "npz"])
def test_a_float64_recipe_fits_time_stamps_as_curve_fit_does(tmp_path, source, capsys):
    run = tmp_path / "run"
    assert cli.main(["train", _recipe(tmp_path, source), "--run-dir", str(run)]) == 0
    capsys.readouterr()
    report = json.loads((run / "fit_report.json").read_text())
    params, covariance = curve_fit(_decay, T, Y, p0=[1.0, 100.0, 0.0])
    errors = np.sqrt(np.diag(covariance))
    for name, value, error in zip(("a", "tau", "c"), params, errors):
        entry = next(p for p in report["parameters"] if p["name"] == name)
        np.testing.assert_allclose(entry["value"], value, rtol=1e-6)
        np.testing.assert_allclose(entry["stderr"], error, rtol=1e-5)
    fitted = json.loads((run / "fitted_curve.json").read_text())
    assert len(np.unique(fitted["x"])) == len(T)


def test_load_csv_reads_float64_when_asked_and_warns_when_float32_merges(tmp_path):
    path = tmp_path / "stamps.csv"
    path.write_text("t,y\n" + _rows())
    x, y = datasets.load_csv(path, target="y", dtype="float64")
    assert x.dtype == y.dtype == np.float64
    np.testing.assert_array_equal(x[:, 0], T)
    with pytest.warns(UserWarning, match=r"column 't' has 30 distinct values .* leaves 6"):
        x32, _ = datasets.load_csv(path, target="y")
    assert x32.dtype == np.float32
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # values float32 keeps apart: no warning
        datasets.load_csv(path, features=["y"], target=None)
    with pytest.raises(ValueError, match="dtype must be float32 or float64"):
        datasets.load_csv(path, target="y", dtype="int32")


def test_load_npz_reads_float64_when_asked_and_warns_when_float32_merges(tmp_path):
    path = tmp_path / "stamps.npz"
    np.savez(path, x=np.stack([Y, T], axis=1), y=Y)
    x, y = datasets.load_npz(path, dtype="float64")
    np.testing.assert_array_equal(x[:, 1], T)
    assert y.dtype == np.float64
    with pytest.warns(UserWarning, match=r"'x'\[:, 1\] has 30 distinct values"):
        datasets.load_npz(path)


def test_a_table_column_that_float32_merges_warns():
    from graphfit.tabular.columns import Column, raw_values

    cells = [repr(t) for t in T.tolist()]
    with pytest.warns(UserWarning, match=r"numeric column 'unix_time' has 30 distinct .* "
                                         r"`source: csv`"):
        values = raw_values(Column("unix_time", "numeric"), cells, source="stamps.csv")
    assert values.dtype == np.float32
