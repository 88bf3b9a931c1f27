"""`distribute: {strategy: multi_worker}`: two `graphfit train` worker processes on 127.0.0.1
(TF_CONFIG each, free ports) train the shipped quickstart recipe (float64, without batch
normalization and dropout, which are per-replica) to the numbers of one process; only the
chief writes the run directory. A worker killed mid-run makes the chief stop with a clear
error, and `graphfit train --resume` continues from the chief's checkpoint, on one device and
then on two workers again, to the numbers of an uninterrupted run. Levenberg–Marquardt on two
workers takes the steps of one process.

Every process has a timeout and is killed in a `finally`; the TensorFlow servers end with
their processes.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
GRAPHFIT = [str(pathlib.Path(sys.executable).with_name("graphfit"))]
RECIPE = str(ROOT / "recipes" / "quickstart.yaml")
# XLA off: under a strategy the steps run without it anyway (CompiledSteps), so the runs of
# one process (the references, the one-device resume) compare like with like, uncompiled.
SETS = ["training.epochs=4", "training.dtype=float64", "model.layers.1={type: Dropout, rate: 0}",
        "model.layers.2.rate=0", "training.jit_compile=false"]
TOLERANCE = 1e-6  # float64; the runs agree to ~1e-16 (sums in another order)
TIMEOUT = 120  # seconds for any one process (they take a few)
DIE_HOOK = '''
import json, os, time
import graphfit as gf
from graphfit.core.registry import CALLBACKS


@CALLBACKS.register
class DieAt(gf.callbacks.Callback):
    """Ends this process abruptly at the end of an epoch, when GRAPHFIT_TEST_DIE names it,
    once the file GRAPHFIT_TEST_DIE_AFTER names exists (the chief's checkpoint of that epoch:
    dying at once could cut the chief's side of the epoch's last collective short)."""

    def on_epoch_end(self, epoch, logs=None):
        job, index, at = (os.environ.get("GRAPHFIT_TEST_DIE") or "::").split(":")
        task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
        if job and task.get("type") == job and task.get("index") == int(index) \\
                and epoch == int(at):
            after = os.environ.get("GRAPHFIT_TEST_DIE_AFTER")
            waited = time.monotonic()
            while after and not os.path.exists(after) and time.monotonic() - waited < 60:
                time.sleep(0.05)
            os._exit(17)
'''


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _sets(extra=()) -> list[str]:
    return [arg for item in [*SETS, *extra] for arg in ("--set", item)]


def _env(tmp_path, tf_config=None, **extra) -> dict:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(tmp_path), **extra}
    env.pop("TF_CONFIG", None)
    if tf_config is not None:
        env["TF_CONFIG"] = json.dumps(tf_config)
    return env


def _run(argv, env, cwd) -> subprocess.CompletedProcess:
    return _run_all([argv], [env], cwd)[0]


def _run_all(argvs, envs, cwd) -> list[subprocess.CompletedProcess]:
    """Runs the processes side by side; each is killed if it outlives TIMEOUT."""
    processes = []
    try:
        for argv, env in zip(argvs, envs):
            processes.append(subprocess.Popen([*GRAPHFIT, *argv], env=env, cwd=cwd, text=True,
                                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                              start_new_session=True))
        deadline = time.monotonic() + TIMEOUT
        done = []
        for process in processes:
            out, err = process.communicate(timeout=max(deadline - time.monotonic(), 1))
            done.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
        return done
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _workers(tmp_path, argv_of, extra_env=None):
    """Two workers (worker 0 is the chief); argv_of(index) gives each one's arguments."""
    ports = _free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    envs = [_env(tmp_path, {"cluster": cluster, "task": {"type": "worker", "index": i}},
                 **(extra_env or {})) for i in range(2)]
    return _run_all([argv_of(0), argv_of(1)], envs, tmp_path)


def _distributed_sets(extra=()) -> list[str]:
    return _sets(["distribute={strategy: multi_worker, timeout: 60}", *extra])


def _close(a: dict, b: dict) -> float:
    return max(abs(x - y) for key in a for x, y in zip(a[key], b[key]))


@pytest.fixture(scope="module")
def single(tmp_path_factory) -> dict:
    """The uninterrupted run in one process, without a strategy (trained in this process, as
    the Levenberg–Marquardt test's reference is: a process of its own would only add
    TensorFlow's start-up)."""
    from graphfit.recipes import load_recipe
    from graphfit.recipes.running import training_run

    folder = tmp_path_factory.mktemp("single")
    training_run.train(load_recipe(RECIPE, SETS), run_dir=str(folder / "run"), verbose=0)
    return {name: json.loads((folder / "run" / name).read_text())
            for name in ("history.json", "metrics.json")}


@pytest.fixture(scope="module")
def killed_and_resumed(single, tmp_path_factory) -> dict:
    """The two-worker run that worker 1's death stops after epoch 2 (each worker given its
    own --run-dir), resumed on one device to epoch 3 (in this process) and then on two
    workers to epoch 4 (with the end-of-run plots on: the confusion matrix's predict is a
    collective too). One run serves the two tests below: what each phase left is kept here,
    the assertions are theirs."""
    from graphfit import cli
    from graphfit.saving import checkpoints

    folder = tmp_path_factory.mktemp("killed")
    (folder / "die_hook.py").write_text(DIE_HOOK)
    hook = ["imports=[die_hook]", "callbacks=[{type: DieAt}]"]
    run = folder / "run0"
    started = time.monotonic()
    killed = _workers(folder, lambda i: ["train", RECIPE, *_distributed_sets(hook),
                                         "--run-dir", f"run{i}", "--verbose", "0"],
                      {"GRAPHFIT_TEST_DIE": "worker:1:1",  # after its 2nd epoch
                       "GRAPHFIT_TEST_DIE_AFTER": str(run / "checkpoints" / "latest"
                                                      / "ckpt-2.index")})
    seconds = time.monotonic() - started
    resume_point = checkpoints.resume_point(str(run / "checkpoints"))
    metrics_after_kill = (run / "metrics.json").exists()

    # Written under two workers, read on one device: epoch 3. In this process (as `single`
    # was trained): one device needs no process of its own, and the run finds die_hook again
    # from its record of the modules it imported.
    path = list(sys.path)
    try:
        one_device = cli.main(["train", "--resume", str(run), "--set", "distribute=null",
                               "--set", "training.epochs=3", "--verbose", "0"])
    finally:  # the run put its modules' folders on sys.path
        sys.modules.pop("die_hook", None)
        sys.path[:] = path
    one_device_history = json.loads((run / "history.json").read_text())

    # Written on one device, read under two workers: epoch 4 and the final numbers.
    resumed = _workers(folder, lambda i: ["train", "--resume", str(run), "--set",
                                          "training.epochs=4"], {"GRAPHFIT_PLOTS": "1"})
    return {"folder": folder, "run": run, "killed": killed, "seconds": seconds,
            "resume_point": resume_point, "metrics_after_kill": metrics_after_kill,
            "one_device": one_device, "one_device_history": one_device_history,
            "resumed": resumed}


def test_a_killed_worker_stops_the_chief_and_the_run_resumes(single, killed_and_resumed):
    chief, other = killed_and_resumed["killed"]
    run = killed_and_resumed["run"]
    assert killed_and_resumed["seconds"] < 90
    assert other.returncode == 17, other.stderr[-3000:]
    assert chief.returncode == 1, chief.stderr[-3000:]
    lost = [line for line in chief.stderr.splitlines() if "WorkerLost" in line]
    assert len(lost) == 1, chief.stderr[-3000:]  # one line, whatever TensorFlow logs around it
    message = lost[0]
    assert message.startswith("graphfit: train failed: WorkerLost: training stopped on "
                              "worker 0 of 2: worker 1 likely failed"), message
    assert "The checkpoints are intact up to epoch 2." in message, message
    assert message.endswith(f"graphfit train --resume {run}"), message
    assert "Traceback" not in chief.stderr
    assert killed_and_resumed["resume_point"] == 2
    assert not killed_and_resumed["metrics_after_kill"]

    # Resumed on one device: epoch 3 as the uninterrupted run (epochs 1-2 are the workers').
    assert killed_and_resumed["one_device"] == 0
    history = killed_and_resumed["one_device_history"]
    assert len(history["loss"]) == 3
    reference = {key: values[:3] for key, values in single["history.json"].items()
                 if not key.startswith("test_")}
    assert _close(reference, history) < TOLERANCE

    # Resumed on two workers: epoch 4 and the final numbers.
    chief, other = killed_and_resumed["resumed"]
    assert chief.returncode == 0 and other.returncode == 0, chief.stderr[-3000:] + other.stderr
    assert "Epoch 4/4" in chief.stdout and "Epoch 3/4" not in chief.stdout
    history = json.loads((run / "history.json").read_text())
    metrics = json.loads((run / "metrics.json").read_text())
    train_keys = {k: v for k, v in single["history.json"].items() if not k.startswith("test_")}
    assert _close(train_keys, history) < TOLERANCE
    for stage in ("train", "val", "test"):
        for key, value in single["metrics.json"][stage].items():
            assert abs(metrics[stage][key] - value) < TOLERANCE, (stage, key)


def test_two_workers_match_one_process_and_only_the_chief_writes(single, killed_and_resumed):
    """Epochs 1-2 trained from scratch by the two workers, epoch 4 by two workers from a
    checkpoint: every epoch's training and validation numbers and the final metrics are one
    process's (the other test checks them phase by phase; here, the whole history)."""
    folder, run = killed_and_resumed["folder"], killed_and_resumed["run"]
    chief, other = killed_and_resumed["resumed"]
    assert chief.returncode == 0 and other.returncode == 0, chief.stderr[-3000:] + other.stderr
    history = json.loads((run / "history.json").read_text())
    assert len(history["loss"]) == 4 and history["loss"][-1] < history["loss"][0]
    train_keys = {k: v for k, v in single["history.json"].items() if not k.startswith("test_")}
    assert _close(train_keys, history) < TOLERANCE
    # The chief writes everything; the other worker writes nothing and prints one notice.
    written = {p.name for p in run.iterdir()}
    assert {"recipe.yaml", "history.json", "metrics.json", "checkpoints", "logs",
            "learning_curves.png", "confusion_matrix.png"} <= written
    assert any((run / "logs").rglob("events.out.tfevents.*"))
    assert not (folder / "run1").exists()  # the killed run gave worker 1 a folder of its own
    assert "Epoch 4/4" in chief.stdout and "test: loss=" in chief.stdout
    assert other.stdout == ""
    assert other.stderr.strip().splitlines() == [
        f"graphfit: worker 1 of 2: training with the cluster; the chief prints progress and "
        f"writes the run directory ({run})"], other.stderr


LM_SETS = ["training.epochs=2", "training.dtype=float64", "data.n_samples=200",
           "model.layers.0.units=8", "model.layers.1.units=8", "training.batch_size=50",
           "optimizer={type: LevenbergMarquardt}", "training.jit_compile=false"]


def test_levenberg_marquardt_on_two_workers_matches_one_process(tmp_path):
    """LM's trial loop runs once for all replicas of both workers, on all-reduced JᵀJ, Jᵀr
    and losses: the same steps as one process (the reference is trained in this process)."""
    from graphfit.recipes import load_recipe
    from graphfit.recipes.running import training_run

    sinc = str(ROOT / "recipes" / "regression_sinc.yaml")
    reference = training_run.train(load_recipe(sinc, LM_SETS), run_dir=str(tmp_path / "one"),
                                   verbose=0).history
    distributed = [*LM_SETS, "distribute={strategy: multi_worker, timeout: 60}"]
    chief, other = _workers(tmp_path, lambda i: [
        "train", sinc, *[arg for item in distributed for arg in ("--set", item)],
        "--run-dir", "two", "--verbose", "0"])
    assert chief.returncode == 0 and other.returncode == 0, chief.stderr[-3000:] + other.stderr
    history = json.loads((tmp_path / "two" / "history.json").read_text())
    assert history["loss"][-1] < history["loss"][0] / 2  # it trained
    assert _close(reference, history) < TOLERANCE


def test_a_worker_whose_peers_never_start_gives_up_after_the_timeout(tmp_path):
    """TensorFlow waits for absent workers without limit (and ignores SIGTERM meanwhile):
    graphfit's watchdog says whom it waits for and ends the process after the timeout."""
    absent = _free_ports(2)
    cluster = {"worker": [f"127.0.0.1:{port}" for port in absent]}
    started = time.monotonic()
    done = _run(["train", RECIPE, *_sets(["distribute={strategy: multi_worker, timeout: 5}"]),
                 "--run-dir", "run"],
                _env(tmp_path, {"cluster": cluster, "task": {"type": "worker", "index": 0}}),
                tmp_path)
    assert time.monotonic() - started < 60
    assert done.returncode == -signal.SIGKILL
    assert "graphfit: waiting for the other workers of TF_CONFIG to start " \
           f"(127.0.0.1:{absent[1]})" in done.stderr
    assert "the cluster did not start within distribute.timeout=5 s" in done.stderr
    assert not (tmp_path / "run").exists()


def test_workers_given_different_recipes_stop_before_training(tmp_path):
    """Only TF_CONFIG may differ between workers: another override (here the epochs) would
    make their collectives mismatch mid-step, with TensorFlow's shape error; both workers stop
    first, each saying which side differs, and the chief claims no run directory."""
    chief, other = _workers(tmp_path, lambda i: [
        "train", RECIPE, *_distributed_sets(["training.epochs=3"] if i else []),
        "--run-dir", f"run{i}"])
    assert chief.returncode == 2 and other.returncode == 2, chief.stderr[-3000:]
    assert "replica(s) of other workers were given another recipe, --set overrides, data or " \
           "checkpoint than the chief's" in chief.stderr
    assert "this worker's recipe, --set overrides, data or checkpoint differ from the " \
           "chief's" in other.stderr
    for done in (chief, other):
        assert "No worker trained." in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "run0").exists() and not (tmp_path / "run1").exists()


def test_the_training_fingerprint_ignores_folders_and_sees_everything_else():
    """Workers may keep the same data in other folders (paths count by file name); any other
    difference of the recipe, the splits' shapes or the start epoch changes the number."""
    import numpy as np

    from graphfit.recipes.running.data_loading import Splits
    from graphfit.recipes.running.workers import training_fingerprint

    def recipe(folder, standardize=False):
        return {"data": {"source": "csv", "path": f"{folder}/train.csv",
                         "standardize": standardize},
                "training": {"epochs": 2, "validation_data": {"path": f"{folder}/val.csv"}},
                "model": {"base": {"run": f"{folder}/runs/base"}}, "run_dir": f"{folder}/run",
                "distribute": {"strategy": "multi_worker", "timeout": 30}}

    def splits(rows):
        return Splits((np.zeros((rows, 3)), np.zeros(rows)), None, None, None, None)

    chief = training_fingerprint(recipe("/hostA"), splits(8), 0)
    assert training_fingerprint(recipe("/mnt/hostB"), splits(8), 0) == chief
    assert training_fingerprint(recipe("/hostA", standardize=True), splits(8), 0) != chief
    assert training_fingerprint(recipe("/hostA"), splits(9), 0) != chief
    assert training_fingerprint(recipe("/hostA"), splits(8), 1) != chief
