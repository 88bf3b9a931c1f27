"""`graphfit predict --id-column` keeps an id beside each prediction, and predict reads the
formats the run trained from (a semicolon CSV with named columns, an .npz file's x_key)."""

import csv
import os

import numpy as np
import pytest

from graphfit import cli
from graphfit.recipes import load_recipe
from graphfit.recipes.running import training_run

RECIPE = """
data: {{source: {source}, {options}}}
model: [{{type: Dense, units: 4, activation: relu}}, {{type: Dense, units: 1}}]
loss: {{type: BinaryCrossentropy, from_logits: true}}
training: {{epochs: 1, batch_size: 16, validation_split: 0, test_split: 0}}
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two runs: one from a semicolon CSV (columns b, a, label), one from an .npz (key 'pts')."""
    folder = tmp_path_factory.mktemp("ids")
    rng = np.random.default_rng(0)
    points = rng.normal(size=(48, 2)).astype("float32")
    labels = (points[:, 0] > 0).astype(int)
    with open(folder / "train.csv", "w", newline="") as handle:
        writer = csv.writer(handle, delimiter=";")
        writer.writerow(["b", "a", "label"])
        writer.writerows([[float(p[1]), float(p[0]), int(y)] for p, y in zip(points, labels)])
    np.savez(folder / "train.npz", pts=points, y=labels)
    made = {}
    for source, options in (("csv", "path: train.csv, delimiter: ';', features: [a, b], "
                                     "target: label"),
                            ("npz", "path: train.npz, x_key: pts, y_key: y")):
        (folder / f"{source}.yaml").write_text(RECIPE.format(source=source, options=options))
        recipe = load_recipe(str(folder / f"{source}.yaml"))
        made[source] = training_run.train(recipe, run_dir=str(folder / source), verbose=0)
    return made, points


def _rows(path):
    with open(path, newline="") as handle:
        return list(csv.reader(handle))


def test_csv_ids_in_any_column_and_the_run_delimiter(runs, tmp_path):
    made, points = runs
    rows = points[:4]
    with open(tmp_path / "new.csv", "w", newline="") as handle:
        writer = csv.writer(handle, delimiter=";")
        writer.writerow(["a", "patient", "b"])  # another column order, and a text id
        writer.writerows([[float(p[0]), f"P-{i}", float(p[1])] for i, p in enumerate(rows)])
    out = tmp_path / "out.csv"
    assert cli.main(["predict", made["csv"].run_dir, "--input", str(tmp_path / "new.csv"),
                     "--output", str(out), "--id-column", "patient"]) == 0
    table = _rows(out)
    assert table[0] == ["patient", "class", "probability"]
    assert [row[0] for row in table[1:]] == ["P-0", "P-1", "P-2", "P-3"]
    logits = made["csv"].model.predict(rows, verbose=0)[:, 0]  # features in order (a, b)
    np.testing.assert_allclose([float(row[2]) for row in table[1:]],
                               1 / (1 + np.exp(-logits)), rtol=1e-5)


def test_npz_ids_and_x_key(runs, tmp_path):
    made, points = runs
    np.savez(tmp_path / "new.npz", pts=points[:3], ids=np.array([7, 8, 9]))
    out = tmp_path / "out.csv"
    assert cli.main(["predict", made["npz"].run_dir, "--input", str(tmp_path / "new.npz"),
                     "--output", str(out), "--id-column", "ids"]) == 0
    assert [row[0] for row in _rows(out)] == ["ids", "7", "8", "9"]


def test_a_missing_id_column_is_named(runs, tmp_path, capsys):
    made, points = runs
    np.savez(tmp_path / "new.npz", pts=points[:3])
    code = cli.main(["predict", made["npz"].run_dir, "--input", str(tmp_path / "new.npz"),
                     "--output", str(tmp_path / "o.csv"), "--id-column", "ids"])
    assert code == 2
    assert "has no array 'ids' (it has pts)" in capsys.readouterr().err
    np.savetxt(tmp_path / "plain.csv", points[:3], delimiter=";")
    code = cli.main(["predict", made["csv"].run_dir, "--input", str(tmp_path / "plain.csv"),
                     "--output", str(tmp_path / "o.csv"), "--id-column", "patient"])
    assert code == 2 and "no header row" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "o.csv")


def test_another_delimiter_and_ids_that_are_not_one_per_row(runs, tmp_path, capsys):
    made, points = runs
    np.savetxt(tmp_path / "commas.csv", points[:3], delimiter=",", header="a,b", comments="")
    code = cli.main(["predict", made["csv"].run_dir, "--input", str(tmp_path / "commas.csv"),
                     "--output", str(tmp_path / "o.csv")])
    assert code == 2
    assert "separated by ';'" in capsys.readouterr().err
    np.savez(tmp_path / "grid.npz", pts=points[:4], ids=np.arange(4).reshape(2, 2))
    code = cli.main(["predict", made["npz"].run_dir, "--input", str(tmp_path / "grid.npz"),
                     "--output", str(tmp_path / "o.csv"), "--id-column", "ids"])
    assert code == 2 and "has shape (2, 2)" in capsys.readouterr().err
