"""`graphfit predict` input and output files: headerless numeric CSV, header-only files, non-
finite values, things that are not files, and an output path that is a directory."""

import os

import numpy as np
import pytest

from graphfit import cli
from graphfit.recipes import load_recipe
from graphfit.recipes.running import prediction, training_run

MOONS = ("data: {source: moons, n_samples: 96}\n"
         "model: [{type: Dense, units: 4, activation: relu}, {type: Dense, units: 1}]\n"
         "loss: {type: BinaryCrossentropy, from_logits: true}\n"
         "training: {epochs: 1, batch_size: 16}\n")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("predict")
    (folder / "moons.yaml").write_text(MOONS)
    recipe = load_recipe(str(folder / "moons.yaml"))
    return training_run.train(recipe, run_dir=str(folder / "run"), verbose=0).run_dir


def _predict(run, inputs, output):
    return cli.main(["predict", run, "--input", str(inputs), "--output", str(output)])


def test_a_headerless_numeric_csv_keeps_its_first_row(run, tmp_path, capsys):
    rows = np.random.default_rng(0).normal(size=(5, 2))
    np.savetxt(tmp_path / "x.csv", rows, delimiter=",")
    assert _predict(run, tmp_path / "x.csv", tmp_path / "out.csv") == 0
    assert "wrote 5 predictions" in capsys.readouterr().out
    # The same rows with a header give the same predictions.
    np.savetxt(tmp_path / "h.csv", rows, delimiter=",", header="x0,x1", comments="")
    assert _predict(run, tmp_path / "h.csv", tmp_path / "out_h.csv") == 0
    assert (tmp_path / "out.csv").read_text() == (tmp_path / "out_h.csv").read_text()


def test_a_header_only_csv_says_it_has_no_rows(run, tmp_path, capsys):
    (tmp_path / "x.csv").write_text("x0,x1\n")
    assert _predict(run, tmp_path / "x.csv", tmp_path / "out.csv") == 2
    err = capsys.readouterr().err
    assert "has no rows" in err and "reshape" not in err


@pytest.mark.parametrize("cell,row,column", [("nan", 3, 2), ("inf", 1, 1)])
def test_non_finite_inputs_are_refused_with_row_and_column(run, tmp_path, capsys, cell, row,
                                                           column):
    lines = [["0.5", "0.1"], ["1.0", "-0.2"], ["0.3", "0.4"]]
    lines[row - 1][column - 1] = cell
    text = "x0,x1\n" + "".join(",".join(cells) + "\n" for cells in lines)
    (tmp_path / "x.csv").write_text(text)
    assert _predict(run, tmp_path / "x.csv", tmp_path / "out.csv") == 2
    err = capsys.readouterr().err
    assert f"row {row} " in err and f"column {column}" in err and "not finite" in err
    assert not (tmp_path / "out.csv").exists()


def test_non_finite_npz_inputs_are_refused(tmp_path):
    x = np.zeros((4, 2), np.float32)
    x[2, 1] = np.nan
    np.savez(tmp_path / "x.npz", x=x)
    with pytest.raises(ValueError, match=r"row 3 .*column 2 .*nan"):
        prediction.read_inputs(str(tmp_path / "x.npz"), {"input_shape": [2]})


def test_inputs_that_are_not_files_say_what_they_are(run, tmp_path, capsys):
    assert _predict(run, tmp_path, tmp_path / "out.csv") == 2
    assert "is a directory, not a file" in capsys.readouterr().err
    if os.path.exists(os.devnull) and os.name == "posix":
        assert _predict(run, os.devnull, tmp_path / "out.csv") == 2
        err = capsys.readouterr().err
        assert "not a regular file" in err and "not found" not in err


def test_an_output_that_is_a_directory_is_a_clear_value_error(tmp_path):
    (tmp_path / "adir").mkdir()
    with pytest.raises(ValueError, match=r"adir is a directory; give a file name"):
        prediction.write_csv(str(tmp_path / "adir"), ["prediction"], np.zeros((2, 1)))
    (tmp_path / "afile").write_text("")
    with pytest.raises(ValueError, match=r"afile is a file, not a folder"):
        prediction.check_output(str(tmp_path / "afile" / "sub" / "out.csv"))


def test_an_output_that_is_a_directory_exits_2_before_predicting(run, tmp_path, capsys):
    np.savetxt(tmp_path / "x.csv", np.zeros((3, 2)), delimiter=",", header="x0,x1", comments="")
    (tmp_path / "adir").mkdir()
    assert _predict(run, tmp_path / "x.csv", tmp_path / "adir") == 2
    err = capsys.readouterr().err
    assert f"--output {tmp_path / 'adir'}" in err and "Traceback" not in err


def test_predict_and_export_need_no_training_data(tmp_path, capsys):
    """A finished run's model builds from the input shape and dtype it recorded: its
    training CSV may be moved or deleted, and the predictions stay the same."""
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(40, 3))
    text = "a,b,c,label\n" + "".join(f"{r[0]:.4f},{r[1]:.4f},{r[2]:.4f},{int(r[0] > 0)}\n"
                                     for r in rows)
    (tmp_path / "train.csv").write_text(text)
    (tmp_path / "new.csv").write_text("".join(line.rsplit(",", 1)[0] + "\n"
                                              for line in text.splitlines()))
    (tmp_path / "r.yaml").write_text(
        "data: {source: csv, path: train.csv, target: label, standardize: true}\n"
        "model: [{type: Dense, units: 2}]\n"
        "loss: {type: SparseCategoricalCrossentropy, from_logits: true}\n"
        "training: {epochs: 1, batch_size: 16}\n")
    run = training_run.train(load_recipe(str(tmp_path / "r.yaml")),
                             run_dir=str(tmp_path / "run"), verbose=0).run_dir
    assert _predict(run, tmp_path / "new.csv", tmp_path / "before.csv") == 0
    os.remove(tmp_path / "train.csv")
    assert _predict(run, tmp_path / "new.csv", tmp_path / "after.csv") == 0
    assert (tmp_path / "after.csv").read_text() == (tmp_path / "before.csv").read_text()
    assert cli.main(["export", run, "--output", str(tmp_path / "served")]) == 0
    assert (tmp_path / "served" / "saved_model.pb").is_file()
    capsys.readouterr()
    # Evaluating needs the data: that still says which file is missing.
    assert cli.main(["evaluate", run]) == 2
    assert "data.path: file not found" in capsys.readouterr().err
