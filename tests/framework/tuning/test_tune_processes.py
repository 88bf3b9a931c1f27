"""`graphfit tune` as processes: a study resumed after its process is killed mid-trial,
one ended by SIGTERM with its report, `--jobs 2` on SQLite, and two tune processes sharing
a real PostgreSQL server (started here, on a free port under a temporary folder, by
`pgserver`'s binaries)."""

import contextlib
import csv
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
RECIPE = os.path.join(ROOT, "recipes", "digits_tune.yaml")
SCRIPT = os.path.join(os.path.dirname(sys.executable), "graphfit")


def _tune(study, *options, trials=3):
    return [SCRIPT, "tune", RECIPE, "--study-dir", str(study), "--set",
            f"tune.n_trials={trials}", *options]


def _rows(study):
    with open(os.path.join(study, "trials.csv"), newline="") as handle:
        return list(csv.DictReader(handle))


def _wait_for(condition, seconds=240):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_a_study_resumes_after_its_process_is_killed_mid_trial(tmp_path, capsys):
    from graphfit import cli

    study = tmp_path / "study"
    command = _tune(study, "--set", "tune.heartbeat_interval=1", "--set",
                    "tune.grace_period=2")
    with open(tmp_path / "first.log", "w") as log:
        first = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        # Trial 1's folder holds its recipe: the trial has started (its folder alone may be
        # caught before the recipe is written).
        _wait_for(lambda: (study / "trials" / "0001" / "recipe.yaml").is_file()
                  or first.poll() is not None)
        first.send_signal(signal.SIGKILL)  # mid-trial 1: no chance to record anything
        first.wait()
    # Optuna fails a trial as stale only once its last heartbeat is older than the grace
    # period; resumed sooner, the trial still counts as running in another process.
    time.sleep(2.5)
    assert not (study / "trials.csv").exists()
    # The same command again, in this process: what resumes is read from the study's files
    # (the killed process is the one that had to be a process of its own).
    code = cli.main(command[1:])
    second = capsys.readouterr()
    assert code == 0, second.out + second.err
    assert "1 of 3 trials to run (2 before)" in second.out
    rows = _rows(study)
    assert [(row["trial"], row["state"]) for row in rows] == [
        ("0", "complete"), ("1", "fail"), ("2", "complete")]
    assert "its process stopped during the trial" in rows[1]["reason"]
    assert rows[1]["run_dir"].endswith(os.path.join("trials", "0001"))  # kept, not lost
    assert os.path.isfile(os.path.join(rows[1]["run_dir"], "recipe.yaml"))


def test_sigterm_ends_a_study_as_ctrl_c_does_with_its_report(tmp_path):
    # `docker stop`, Slurm and Kubernetes send SIGTERM: Python's default ended the process at
    # once, with no trials.csv and the trial left running in storage.
    study = tmp_path / "study"
    with open(tmp_path / "tune.log", "w") as log:
        tune = subprocess.Popen(_tune(study, trials=2), stdout=log, stderr=subprocess.STDOUT)
        _wait_for(lambda: (study / "trials" / "0001" / "recipe.yaml").is_file()
                  or tune.poll() is not None)
        tune.send_signal(signal.SIGTERM)  # mid-trial 1
        assert tune.wait(timeout=120) == 130
    rows = _rows(study)
    assert [(row["trial"], row["state"]) for row in rows] == [("0", "complete"), ("1", "fail")]
    assert rows[1]["reason"].startswith("interrupted (SIGTERM)")
    assert (study / "best_recipe.yaml").is_file()
    assert "graphfit: interrupted" in (tmp_path / "tune.log").read_text()


def test_jobs_2_on_sqlite_runs_each_trial_once(tmp_path, capfd):
    from graphfit import cli

    # The command in this process; the two trial processes it spawns are the point (their
    # printed lines reach this process's stdout, hence capfd).
    study = tmp_path / "study"
    code = cli.main(_tune(study, "--jobs", "2", trials=4)[1:])
    done = capfd.readouterr()
    assert code == 0, done.out + done.err
    rows = _rows(study)
    assert [row["trial"] for row in rows] == ["0", "1", "2", "3"]
    assert {row["state"] for row in rows} == {"complete"}
    assert len({row["run_dir"] for row in rows}) == 4
    points = {(row["optimizer.learning_rate"], row["model.layers.0.units"]) for row in rows}
    assert len(points) == 4  # the processes' samplers are seeded apart
    for row in rows:  # each trial's line printed once, by the process that ran it
        assert done.out.count(f"trial {row['trial']}: val_accuracy=") == 1


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def postgres_server(folder):
    """A PostgreSQL server of its own: pgserver creates the cluster (as its own system user
    when run as root), then it is started again listening on a free TCP port."""
    import pgserver

    data = os.path.join(folder, "data")
    os.makedirs(data)
    server = pgserver.get_server(data, cleanup_mode=None)
    user = server.system_user
    pgserver.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=data, user=user)
    port = _free_port()
    pgserver.pg_ctl(["-w", "-o", f"-h 127.0.0.1 -p {port} -k {data}", "-l",
                     os.path.join(data, "server.log"), "start"], pgdata=data, user=user)
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        pgserver.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=data, user=user)


SHARED_TRIALS = 4  # enough for both machines to run trials side by side


@pytest.mark.filterwarnings("ignore::UserWarning")  # pgserver: no XDG_RUNTIME_DIR here
def test_two_tune_processes_share_one_postgresql_study(tmp_path, capsys):
    import optuna

    from graphfit import cli

    with postgres_server(str(tmp_path / "pg")) as url:
        studies = [tmp_path / "machine_a", tmp_path / "machine_b"]
        trials_a = studies[0] / "trials"
        with open(tmp_path / "machine_a.log", "w") as log:
            first = subprocess.Popen(_tune(studies[0], "--storage", url, trials=SHARED_TRIALS),
                                     stdout=log, stderr=subprocess.STDOUT)
            try:
                # This process is the second machine: it joins once the first one is inside
                # a trial, so both run trials side by side (it starts without an import).
                _wait_for(lambda: (trials_a.is_dir() and any(trials_a.iterdir()))
                          or first.poll() is not None)
                second = cli.main(_tune(studies[1], "--storage", url, trials=SHARED_TRIALS)[1:])
                codes = [first.wait(timeout=600), second]
            finally:
                if first.poll() is None:
                    first.kill()
                    first.wait()
        printed = capsys.readouterr()
        output = (tmp_path / "machine_a.log").read_text() + printed.out + printed.err
        assert codes == [0, 0], output
        trials = optuna.load_study(study_name="digits_tune", storage=url).trials
    numbers = [trial.number for trial in trials]
    # Each machine stops once the study holds n_trials; both may start the last one.
    assert len(numbers) == len(set(numbers)) and SHARED_TRIALS <= len(numbers) <= SHARED_TRIALS + 1
    # Every trial finished; which ones the median pruner stops depends on how the two
    # processes' trials interleave, so PRUNED is as finished as COMPLETE here.
    assert {trial.state.name for trial in trials} <= {"COMPLETE", "PRUNED"}
    assert any(trial.state.name == "COMPLETE" for trial in trials)
    folders = {trial.user_attrs["run_dir"] for trial in trials}
    assert len(folders) == len(trials)  # every trial ran once, in one machine's folder
    ran = [sorted(os.listdir(study / "trials")) for study in studies]
    assert ran[0] and ran[1] and not set(ran[0]) & set(ran[1])


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
