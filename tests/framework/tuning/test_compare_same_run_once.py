"""`graphfit compare runs/NAME/*` names a run twice (its folder and the `latest` link to it):
the table lists each run once."""

from __future__ import annotations

import os

from graphfit.tuning.compare import expand_runs


def _finished_run(folder):
    os.makedirs(folder / "checkpoints")
    (folder / "recipe.yaml").write_text("seed: 0\n")
    (folder / "checkpoints" / "final.index").write_text("")
    (folder / "metrics.json").write_text("{}")


def test_a_run_named_twice_is_compared_once(tmp_path):
    _finished_run(tmp_path / "20260101-000000")
    _finished_run(tmp_path / "20260102-000000")
    os.symlink("20260102-000000", tmp_path / "latest")
    paths = sorted(str(p) for p in tmp_path.iterdir())
    assert expand_runs(paths) == [str(tmp_path / "20260101-000000"),
                                  str(tmp_path / "20260102-000000")]
