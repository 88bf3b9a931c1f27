"""compare_runs: one chart per metric, each run a colour, line style per stage."""

import json
import os

import pytest

from graphfit import plots

from .conftest import png_size

RUNS = {
    "quickstart/2024-01-01": {"loss": [0.9, 0.5, 0.3], "val_loss": [1.0, 0.6, 0.5],
                              "accuracy": [0.6, 0.8, 0.9], "test_loss": [0.55]},
    "moons/2024-01-01": {"loss": [0.7, 0.6], "val_loss": [0.8, 0.7], "auc": [0.7, 0.8]},
}


@pytest.fixture
def run_dirs(tmp_path):
    dirs = []
    for name, history in RUNS.items():
        folder = tmp_path / "runs" / name
        folder.mkdir(parents=True)
        (folder / "history.json").write_text(json.dumps(history))
        dirs.append(str(folder))
    return dirs


def test_one_chart_per_metric_with_the_runs_data(run_dirs, tmp_path, figures):
    output = tmp_path / "charts"
    result = plots.compare_runs(run_dirs, output=str(output))
    assert [os.path.basename(p) for p in result.paths] == [
        "comparison_loss.png", "comparison_accuracy.png", "comparison_auc.png"]
    for path in result.paths:
        assert os.path.dirname(path) == str(output) and min(png_size(path)) > 200
    assert list(result.data["loss"]) == list(RUNS)  # labels: the parts that tell runs apart
    for metric, by_run in result.data.items():
        for label, panel in by_run.items():
            for stage, (x, y) in panel.items():
                key = metric if stage == "train" else f"{stage}_{metric}"
                assert y == RUNS[label][key] and x[-1] == len(RUNS[label]["loss"])
    assert list(result.data["auc"]) == ["moons/2024-01-01"]
    axes = figures["comparison_loss.png"].axes
    assert len(axes) == 1
    lines = {line.get_label(): line for line in axes[0].get_lines()}
    quick, moons = "quickstart/2024-01-01", "moons/2024-01-01"
    assert lines[f"{quick} train"].get_color() == lines[f"{quick} validation"].get_color()
    assert lines[f"{quick} train"].get_color() != lines[f"{moons} train"].get_color()
    assert lines[f"{moons} train"].get_linestyle() == "-"
    assert lines[f"{moons} validation"].get_linestyle() == "--"
    assert list(lines[f"{quick} test"].get_xdata()) == [3]


def test_labels_and_file_names():
    assert plots.comparison_file("val/top-5 acc") == "comparison_val_top-5_acc.png"
    from graphfit.plots.comparison import run_labels

    assert run_labels(["x/a/run", "y/a/run"]) == ["x/a/run", "y/a/run"]
    assert run_labels(["same", "same"]) == ["same (1)", "same (2)"]


def test_bad_runs_and_output(run_dirs, tmp_path):
    missing = str(tmp_path / "runs" / "empty")
    os.makedirs(missing)
    with pytest.raises(plots.HistoryError, match="empty/history.json does not exist"):
        plots.compare_runs(run_dirs + [missing], output=str(tmp_path))
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        plots.compare_runs(run_dirs, output=str(blocker))
    with pytest.raises(ValueError, match="at least one run"):
        plots.compare_runs([], output=str(tmp_path))
