"""Fault test: `graphfit train` killed with SIGKILL at seeded random moments, then resumed
until it finishes; the history must stay consecutive and match the checkpoint, every kept
checkpoint must load, and the finished run must be usable (issue 13, items 6-9)."""

import json
import os
import random
import re
import signal
import subprocess
import sys
import time

from graphfit.recipes.running import run_directory, runner

EPOCHS = 8
# Without XLA: each of the five processes would compile it, for nothing the test looks at.
RECIPE = ("data: {source: moons, n_samples: 600}\n"
          "model: [{type: Dense, units: 16, activation: relu}, {type: Dense, units: 1}]\n"
          "loss: {type: BinaryCrossentropy, from_logits: true}\n"
          f"training: {{epochs: {EPOCHS}, batch_size: 8, steps_per_execution: 1, "
          f"jit_compile: false}}\n")
# Two kills (then a resume to the end): each process imports TensorFlow, ~8 s of CPU, and two
# land at seeded random moments as surely as more did (at most 6 of the 8 checkpoints by then).
KILLS = 2
SCRIPT = os.path.join(os.path.dirname(sys.executable), "graphfit")


def _checkpoint_number(run) -> int:
    state = os.path.join(run, "checkpoints", "latest", "checkpoint")
    try:
        with open(state, encoding="utf-8") as handle:
            found = re.search(r'^model_checkpoint_path: "ckpt-(\d+)"', handle.read(), re.M)
    except OSError:
        return 0
    return int(found.group(1)) if found else 0


def _phase(run) -> str:
    if os.path.isfile(os.path.join(run, "checkpoints", "final.index")):
        return "after the final weights"
    if os.path.isfile(os.path.join(run, "metrics.json")):
        return "between metrics.json and the final weights"
    return f"after checkpoint {_checkpoint_number(run)}"


def _start(command, cwd):
    return subprocess.Popen([SCRIPT, *command, "--verbose", "0"], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _kill_at(process, run, epoch: int, extra: float, limit: float = 40.0) -> bool:
    """SIGKILL once `epoch` checkpoints exist, `extra` seconds later; False if it ended."""
    deadline = time.monotonic() + limit
    while process.poll() is None and time.monotonic() < deadline:
        if _checkpoint_number(run) >= epoch:
            time.sleep(extra)
            break
        time.sleep(0.01)
    if process.poll() is not None:
        return False
    process.send_signal(signal.SIGKILL)
    process.wait()
    return True


def test_kill_and_resume_keeps_history_checkpoints_and_finishes(tmp_path):
    rng = random.Random(13)
    (tmp_path / "moons.yaml").write_text(RECIPE)
    run = str(tmp_path / "run")
    figures, command = [], ["train", "moons.yaml", "--run-dir", run]
    for _ in range(KILLS):
        if not os.path.isfile(os.path.join(run, "checkpoints", "latest", "checkpoint")):
            command = ["train", "moons.yaml", "--run-dir", run]
            if os.path.isdir(run) and not os.path.isfile(os.path.join(run, "recipe.yaml")):
                os.rmdir(run) if not os.listdir(run) else None
        process = _start(command, tmp_path)
        target = max(_checkpoint_number(run) + rng.randint(0, 2), 1)
        if not _kill_at(process, run, target, rng.uniform(0.0, 0.4)):
            break
        figures.append(_phase(run))
        command = ["train", "--resume", run]
    done = _start(command, tmp_path)
    out, err = done.communicate(timeout=120)
    if done.returncode == 2 and "already trained" in err:  # killed after it had finished
        figures.append("(the last kill came after the run had finished)")
    else:
        assert done.returncode == 0, err
        assert "Traceback" not in err
    print(f"\nkills: {len(figures)}; phases: {figures}; resumed to the end: ok")
    assert len(figures) == KILLS, figures  # every kill landed before the run finished

    history = json.loads((tmp_path / "run" / "history.json").read_text())
    assert len(history["loss"]) == EPOCHS and None not in history["loss"]
    assert len(history["val_loss"]) == EPOCHS
    # The record inside the newest checkpoint is the history, epoch for epoch.
    prepared, _ = runner.load_run(run)
    from graphfit.saving import checkpoints
    state = checkpoints.restore_latest(prepared.model, os.path.join(run, "checkpoints"))
    assert state["epoch"] == EPOCHS
    assert [entry["loss"] for entry in state["records"]] == history["loss"]
    # Every checkpoint kept loads.
    latest = os.path.join(run, "checkpoints", "latest")
    for name in sorted(os.listdir(latest)):
        if name.endswith(".index"):
            prepared.model.load_weights(os.path.join(latest, name[: -len(".index")]))
    assert set(runner.evaluate_run(run_directory.find_run(run))) == {"val", "test"}
    assert (tmp_path / "run" / run_directory.LOCK_FILE).read_text() == ""
