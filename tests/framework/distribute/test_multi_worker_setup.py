"""What multi-worker training decides before and after the collectives, without a cluster:
`distribute.timeout`, the strategy created from the `distribute:` section alone (before the
rest of the recipe runs TensorFlow ops), `graphfit validate` starting no cluster, the resume
overrides the command line accepts, and the message for a failed worker."""

from __future__ import annotations

import json

import pytest
import tensorflow as tf

from graphfit import cli
from graphfit.callbacks.chief import is_chief
from graphfit.recipes import recipe_from_text
from graphfit.recipes.reading.distribute_schema import DEFAULT_TIMEOUT
from graphfit.recipes.running import distribution, workers

RECIPE = """\
data: {source: moons, n_samples: 40}
model: [{type: Dense, units: 3, activation: relu}, {type: Dense, units: 1}]
loss: {type: BinaryCrossentropy, from_logits: true}
training: {epochs: 1}
distribute: {strategy: multi_worker}
"""
TF_CONFIG = json.dumps({"cluster": {"worker": ["127.0.0.1:2222", "127.0.0.1:2223"]},
                        "task": {"type": "worker", "index": 1}})


@pytest.mark.parametrize("written, timeout", [
    ("{strategy: multi_worker}", DEFAULT_TIMEOUT),
    ("{strategy: multi_worker, timeout: 45}", 45.0),
    ("{strategy: multi_worker, timeout: null}", None),
    ("multi_worker", DEFAULT_TIMEOUT),
])
def test_timeout_resolution(written, timeout):
    text = RECIPE.replace("{strategy: multi_worker}", written)
    config = recipe_from_text(text, "r.yaml", default_name="r").config
    assert config["distribute"] == {"strategy": "multi_worker", "timeout": timeout}


def _refuse(*args, **kwargs):
    raise AssertionError("no MultiWorkerMirroredStrategy may be created here")


@pytest.mark.parametrize("text, overrides", [
    (RECIPE.replace("multi_worker", "mirrored"), []),  # not multi_worker
    (RECIPE, ["distribute=null"]),  # switched off by an override
    (RECIPE.replace("multi_worker}", "multi_worker, timeout: 1}"), []),  # a bad section
    ("data: [unclosed\n", []),  # not YAML: the full read reports it
])
def test_start_early_creates_nothing_unless_a_valid_multi_worker_section(
        text, overrides, tmp_path, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", TF_CONFIG)
    monkeypatch.setattr(tf.distribute, "MultiWorkerMirroredStrategy", _refuse)
    path = tmp_path / "r.yaml"
    path.write_text(text)
    assert distribution.start_early(str(path), overrides) is None


def test_start_early_reads_the_section_and_its_overrides_only(tmp_path, monkeypatch):
    made = []

    def record(communication_options=None):
        made.append(communication_options.timeout_seconds)
        return "strategy"

    monkeypatch.setenv("TF_CONFIG", TF_CONFIG)
    monkeypatch.setattr(tf.distribute, "MultiWorkerMirroredStrategy", record)
    monkeypatch.setattr(distribution, "_CREATED", {})
    path = tmp_path / "r.yaml"
    # The rest of the recipe is not even checked: only `distribute:` decides.
    path.write_text(RECIPE.replace("epochs: 1", "epochs: -3"))
    assert distribution.start_early(str(path), ["distribute.timeout=30"]) == "strategy"
    assert made == [30.0]
    # The command line's way: the draft it read before TensorFlow started, not the file again.
    from graphfit.recipes.reading.draft import read_draft

    monkeypatch.setattr(distribution, "_CREATED", {})
    draft = read_draft(str(path), ["distribute.timeout=20"])
    path.unlink()
    assert distribution.start_early_from(draft.document) == "strategy" and made == [30.0, 20.0]
    made.pop()
    path.write_text(RECIPE)
    # Without TF_CONFIG the full check reports it at its key; nothing is created.
    monkeypatch.delenv("TF_CONFIG")
    assert distribution.start_early(str(path)) is None and made == [30.0]


def test_validate_checks_tf_config_and_starts_no_cluster(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TF_CONFIG", TF_CONFIG)
    monkeypatch.setattr(tf.distribute, "MultiWorkerMirroredStrategy", _refuse)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.yaml").write_text(RECIPE)
    assert cli.main(["validate", "r.yaml"]) == 0
    assert "r.yaml: OK." in capsys.readouterr().out


@pytest.mark.parametrize("override, accepted", [
    ("training.epochs=5", True), ("distribute=null", True),
    ("distribute.timeout=30", True), ("training.dtype=mixed_bfloat16", True),
    ("training.batch_size=8", False),
])
def test_resume_accepts_epochs_and_where_it_runs(override, accepted, tmp_path, monkeypatch,
                                                 capsys):
    from graphfit.recipes.running import training_run

    calls = []
    monkeypatch.setattr(training_run, "resume", lambda *a, **k: calls.append(k) or 1 / 0)
    code = cli.main(["train", "--resume", str(tmp_path), "--set", override])
    err = capsys.readouterr().err
    if accepted:
        assert calls and code == 1, err  # reached resume (which fails here on purpose)
        key = {"training.epochs": "epochs", "training.dtype": "dtype"}.get(
            override.split("=")[0], "distribute")
        assert calls[0][key] in (5, "mixed_bfloat16", [override])
    else:
        assert code == 2 and not calls
        assert ("only training.epochs=N (an integer), training.dtype=P (float32 and the "
                "mixed policies) and distribute=...") in err


def test_lost_worker_message_names_the_peer_and_the_resume_command():
    class Resolver:
        task_type, task_id = "worker", 0

        def cluster_spec(self):
            return tf.train.ClusterSpec({"worker": ["a:1", "b:2", "c:3"]})

    strategy = type("Strategy", (), {"cluster_resolver": Resolver()})()
    error = tf.errors.UnavailableError(
        None, None, "Graph execution error:\n\nCollective ops is aborted by: task "
                    "/job:worker/replica:0/task:2 stopped sending heartbeats\n"
                    "/job:worker/replica:0/task:0 waited")
    message = workers.lost_worker_message(error, strategy, "/runs/r", "/runs/r", 3)
    assert message == (
        "training stopped on worker 0 of 3: worker 2 likely failed (TensorFlow: "
        "UnavailableError: Collective ops is aborted by: task /job:worker/replica:0/task:2 "
        "stopped sending heartbeats). The checkpoints are intact up to epoch 3. To continue, "
        "start every worker again with its TF_CONFIG and: graphfit train --resume /runs/r")
    timeout = tf.errors.DeadlineExceededError(None, None, "Collective has timed out")
    assert "waited longer than distribute.timeout" in workers.lost_worker_message(
        timeout, strategy, "/runs/r", "/runs/r", 0)
    assert "No checkpoint was written yet" in workers.lost_worker_message(
        timeout, strategy, "/runs/r", "/runs/r", 0)


def test_one_process_is_its_own_chief():
    import graphfit as gf
    from graphfit import layers

    model = gf.Sequential([layers.Dense(1)])
    model.build((None, 2))
    assert is_chief(model) and distribution.is_chief(None)
