"""learning_curves: one panel per metric, its data equal history.json, TensorBoard's colours."""

import json
import os
import sys

import pytest

from graphfit import plots
from graphfit.plots import colors

from .conftest import png_size

HISTORY = {
    "loss": [2.5, 0.3, 0.04, 0.01, 0.02],          # spans > 2 decades: log scale
    "accuracy": [0.5, 0.8, None, 0.95, 0.97],     # a null (non-finite) epoch stays null
    "val_loss": [2.6, 0.5, 0.09, 0.05, 0.06],
    "val_accuracy": [0.4, 0.7, 0.9, 0.93, 0.94],
    "learning_rate": [0.1, 0.1, 0.05, 0.05, 0.01],
    "test_loss": [0.2, 0.07, 0.065],              # test_freq 2: epochs 2, 4 and the last
    "test_accuracy": [0.75, 0.92, 0.93],
}


def _write_run(folder, history, recipe="training: {epochs: 5, test_freq: 2}\n", logs=None):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "history.json"), "w") as handle:
        json.dump(history, handle)
    with open(os.path.join(folder, "recipe.yaml"), "w") as handle:
        handle.write(recipe)
    for run, start in (logs or {}).items():
        os.makedirs(os.path.join(folder, "logs", run), exist_ok=True)
        name = f"events.out.tfevents.{start}.host.example.7.0.v2"
        open(os.path.join(folder, "logs", run, name), "w").close()
    return str(folder)


def test_data_panels_png_and_log_scale(tmp_path, figures):
    run = _write_run(tmp_path / "run", HISTORY,
                     logs={"": 100, "train": 103, "val": 103, "test": 104})
    result = plots.learning_curves(run)
    assert result.paths == [os.path.join(run, "learning_curves.png")]
    width, height = png_size(result.paths[0])
    assert width > 300 and height > 200
    assert list(result.data) == ["loss", "accuracy", "learning_rate"]
    for title, panel in result.data.items():
        for stage, (x, y) in panel.items():
            key = title if stage == "train" else f"{stage}_{title}"
            assert y == HISTORY[key]
            assert len(x) == len(y)
    assert result.data["loss"]["train"][0] == [1, 2, 3, 4, 5]
    assert result.data["loss"]["test"][0] == [2, 4, 5]
    assert set(result.data["learning_rate"]) == {"train"}
    figure = figures["learning_curves.png"]
    assert len(figure.axes) == len(result.data) == 3
    scales = {axes.get_title(): axes.get_yscale() for axes in figure.axes}
    assert scales == {"loss": "log", "accuracy": "linear", "learning_rate": "linear"}
    loss_axes = figure.axes[0]
    assert loss_axes.get_xlabel() == "epoch" and loss_axes.get_ylabel() == "loss"
    lines = {line.get_label(): line for line in loss_axes.get_lines()}
    # The run list ".", train, val, test -> TensorBoard's colours 1, 2, 3.
    assert lines["train"].get_color() == "#12b5cb"
    assert lines["validation"].get_color() == "#e52592"
    assert lines["test"].get_color() == "#f9ab00"
    assert list(lines["validation"].get_ydata()) == HISTORY["val_loss"]


def test_single_test_number_is_a_marker_at_the_last_epoch(tmp_path, figures):
    history = {"loss": [0.9, 0.5, 0.45], "val_loss": [1.0, 0.8, 0.7], "test_loss": [0.75]}
    run = _write_run(tmp_path / "run", history, recipe="training: {epochs: 3}\n")
    result = plots.learning_curves(run, output=str(tmp_path / "out" / "curves.png"))
    assert result.paths == [str(tmp_path / "out" / "curves.png")]
    assert result.data["loss"]["test"] == ([3], [0.75])
    axes = figures["curves.png"].axes[0]
    assert axes.get_yscale() == "linear"  # 0.45 .. 1.0: not two decades
    marker = next(line for line in axes.get_lines() if line.get_label() == "test")
    assert marker.get_linestyle() == "None" and list(marker.get_xdata()) == [3]
    # plus the dotted line across the panel at the test value
    assert any(list(line.get_ydata()) == [0.75, 0.75] for line in axes.get_lines())


def test_run_order_follows_tensorboard(tmp_path):
    # The stage runs started in the same second: TensorBoard sorts them by name.
    logs = _write_run(tmp_path / "run", {"loss": [1.0]},
                      logs={"": 100, "train": 101, "val": 101, "test": 101})
    order = plots.tensorboard_run_order(os.path.join(logs, "logs"))
    assert order == [".", "test", "train", "val"]
    assert colors.stage_colors(os.path.join(logs, "logs")) == {
        "test": "#12b5cb", "train": "#e52592", "val": "#f9ab00"}
    # No root run (no hyperparameters written): train takes the first colour.
    bare = _write_run(tmp_path / "bare", {"loss": [1.0]}, logs={"train": 5, "val": 6})
    assert colors.stage_colors(os.path.join(bare, "logs"))["train"] == "#425066"


def test_missing_history_names_the_file(tmp_path):
    with pytest.raises(plots.HistoryError, match=r"history\.json does not exist") as error:
        plots.learning_curves(str(tmp_path))
    assert str(tmp_path / "history.json") in str(error.value)
    with pytest.raises(plots.HistoryError, match="is not a folder"):
        plots.learning_curves(str(tmp_path / "nowhere"))
    (tmp_path / "history.json").write_text('{"loss": ["a"]}')
    with pytest.raises(plots.HistoryError, match="is not a history"):
        plots.learning_curves(str(tmp_path))


def _without_matplotlib(monkeypatch):
    for name in [name for name in sys.modules if name.split(".")[0] == "matplotlib"]:
        monkeypatch.setitem(sys.modules, name, None)  # `import matplotlib` raises ImportError
    monkeypatch.setitem(sys.modules, "matplotlib", None)


def test_missing_matplotlib_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.delenv("GRAPHFIT_PLOTS", raising=False)
    run = _write_run(tmp_path / "run", {"loss": [1.0, 0.5]})
    _without_matplotlib(monkeypatch)
    with pytest.raises(plots.PlotsUnavailable, match=r"pip install graphfit\[plots\]"):
        plots.learning_curves(run)
    with pytest.raises(ImportError, match=r"graphfit\[plots\]"):
        plots.confusion_matrix([0, 1], [0, 1], str(tmp_path / "cm.png"))
    with pytest.warns(UserWarning, match=r"pip install graphfit\[plots\]"):
        assert plots.plot_finished_run(run) == []
    assert not os.path.exists(os.path.join(run, "learning_curves.png"))


def test_leaves_the_users_matplotlib_state_alone(tmp_path):
    import matplotlib

    before = dict.__getitem__(matplotlib.rcParams, "backend")  # without resolving "auto"
    had_pyplot = "matplotlib.pyplot" in sys.modules
    figures_before = sys.modules["matplotlib.pyplot"].get_fignums() if had_pyplot else None
    plots.learning_curves(_write_run(tmp_path / "run", {"loss": [1.0, 0.5]}))
    assert dict.__getitem__(matplotlib.rcParams, "backend") == before
    if had_pyplot:  # another test imported pyplot: no figure of ours joins its list
        assert sys.modules["matplotlib.pyplot"].get_fignums() == figures_before
    else:
        assert "matplotlib.pyplot" not in sys.modules


def test_environment_switch(tmp_path, monkeypatch):
    run = _write_run(tmp_path / "run", {"loss": [1.0, 0.5]})
    monkeypatch.setenv("GRAPHFIT_PLOTS", "off")
    assert plots.plot_finished_run(run) == []
    assert not os.path.exists(os.path.join(run, "learning_curves.png"))
    monkeypatch.setenv("GRAPHFIT_PLOTS", "perhaps")
    with pytest.warns(UserWarning, match="GRAPHFIT_PLOTS='perhaps' is neither on"):
        assert plots.plot_finished_run(run) == [os.path.join(run, "learning_curves.png")]
