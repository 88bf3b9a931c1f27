"""A study whose trial diverges: the failure is said once, without Optuna's traceback; the
trial's TensorBoard HParams session ends as FAILURE; `graphfit compare` lists the failed
trial beside the complete one."""

import os
import re

import pytest

from graphfit.cli.main import main

RECIPE = """\
seed: 0
data: {source: digits}
model:
  layers:
    - {type: Dense, units: 8, activation: relu}
    - {type: Dense, units: 10}
loss: {type: SparseCategoricalCrossentropy, from_logits: true}
metrics: [accuracy]
optimizer: {type: SGD, learning_rate: 0.05}
training: {epochs: 1, batch_size: 128, jit_compile: false, validation_split: 0.2}
tune:
  metric: val_accuracy
  direction: maximize
  n_trials: 2
  sampler: grid
  space:
    optimizer.learning_rate: {choice: [1.0e+30, 0.05]}
"""


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """(study folder, what `graphfit tune` printed, its exit code, the failed trial's number;
    the grid sampler draws the two points in an order of its own)."""
    folder = tmp_path_factory.mktemp("failed")
    recipe = folder / "diverging.yaml"
    recipe.write_text(RECIPE)
    study_dir = str(folder / "study")
    import contextlib
    import io
    import logging

    out, err = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(err)  # Optuna's records, wherever its handler writes
    logging.getLogger("optuna").addHandler(handler)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["tune", str(recipe), "--study-dir", study_dir])
    finally:
        logging.getLogger("optuna").removeHandler(handler)
    printed = out.getvalue() + err.getvalue()
    failed = re.findall(r"trial (\d+) failed after", printed)
    return study_dir, printed, code, int(failed[0]) if len(failed) == 1 else None


def test_the_failure_is_said_once_without_a_traceback(study):
    _, printed, code, failed = study
    assert code == 0 and failed is not None, printed
    assert "Traceback" not in printed and "failed with value" not in printed
    assert "[optimizer.learning_rate=1e+30]: the loss became non-finite in epoch 1" in printed
    assert f"trial {1 - failed}: val_accuracy=" in printed


def test_the_failed_trials_hparams_session_ends_as_failure(study):
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.plugins.hparams import api_pb2, plugin_data_pb2

    statuses = []
    for number in (0, 1):
        accumulator = event_accumulator.EventAccumulator(
            os.path.join(study[0], "trials", f"{number:04d}", "logs"))
        accumulator.Reload()
        content = accumulator.SummaryMetadata("_hparams_/session_end_info").plugin_data.content
        statuses.append(plugin_data_pb2.HParamsPluginData.FromString(
            content).session_end_info.status)
    expected = [api_pb2.STATUS_FAILURE, api_pb2.STATUS_SUCCESS]
    assert statuses == (expected if study[3] == 0 else expected[::-1])


def test_compare_lists_the_failed_trial_without_metrics(study, capsys):
    assert main(["compare", study[0]]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["run", "state", "loss"]
    rows = {row.split()[0][-4:]: row.split() for row in lines[1:]}
    failed, complete = rows[f"{study[3]:04d}"], rows[f"{1 - study[3]:04d}"]
    assert failed[1:3] == ["failed", "-"] and failed[-1] == "1e+30"
    assert complete[1] == "complete" and complete[-1] == "0.05"
    assert float(complete[2]) > 0
