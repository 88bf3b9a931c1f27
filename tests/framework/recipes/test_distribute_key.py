"""The recipe key `distribute`: its resolution, TF_CONFIG's checks, and the model built inside
the strategy's scope.

The section's own bad values are in the `broken/distribute_*.yaml` corpus; TF_CONFIG comes from
the environment, so its cases are here, each checked as `graphfit validate` reports it (at
`distribute.strategy`, exit code 2) before any strategy exists.
"""

from __future__ import annotations

import json

import pytest
import tensorflow as tf

from graphfit import cli
from graphfit.recipes import recipe_from_text
from graphfit.recipes.reading.distribute_schema import cluster_role, read_tf_config
from graphfit.recipes.running.runner import prepare

RECIPE = """\
data: {source: moons, n_samples: 40}
model: [{type: Dense, units: 3, activation: relu}, {type: Dense, units: 1}]
loss: {type: BinaryCrossentropy, from_logits: true}
training: {epochs: 1}
distribute:
  strategy: multi_worker
"""
STRATEGY_AT = "distribute.yaml:6:3: distribute.strategy: "


def _tf_config(cluster=None, task=None, **extra) -> str:
    config = {"cluster": cluster if cluster is not None else {"worker": ["127.0.0.1:2222",
                                                                         "127.0.0.1:2223"]},
              "task": task if task is not None else {"type": "worker", "index": 0}}
    return json.dumps({**config, **extra})


def _validate(tmp_path, capsys, monkeypatch, text=RECIPE) -> tuple[int, str]:
    def refuse(*args, **kwargs):
        raise AssertionError("a strategy was created before the recipe was checked")

    monkeypatch.setattr(tf.distribute, "MultiWorkerMirroredStrategy", refuse)
    path = tmp_path / "distribute.yaml"
    path.write_text(text)
    monkeypatch.chdir(tmp_path)
    code = cli.main(["validate", "distribute.yaml"])
    return code, capsys.readouterr().err


BAD_TF_CONFIG = {
    "missing": (None, "TF_CONFIG is not set; multi_worker reads the cluster"),
    "not_json": ("{cluster: [", "TF_CONFIG is not valid JSON"),
    "not_an_object": ("[1, 2]", "TF_CONFIG must be a JSON object with 'cluster' and 'task'"),
    "no_cluster": (json.dumps({"task": {"type": "worker", "index": 0}}),
                   "TF_CONFIG: 'cluster' is missing"),
    "no_task": (json.dumps({"cluster": {"worker": ["a:1"]}}), "TF_CONFIG: 'task' is missing"),
    "index_out_of_range": (_tf_config(task={"type": "worker", "index": 2}),
                           "task.index is 2, but the cluster's 'worker' job has 2 address(es), "
                           "so the index must be 0 to 1"),
    "index_not_integer": (_tf_config(task={"type": "worker", "index": "0"}),
                          "task.index must be an integer, got '0'"),
    "type_not_in_cluster": (_tf_config(task={"type": "workr", "index": 0}),
                            "task.type 'workr' (did you mean 'worker'?) is not a job of the "
                            "cluster (worker)"),
    "port_not_integer": (_tf_config({"worker": ["127.0.0.1:22x2"]}),
                         "cluster.worker[0] has the port '22x2'"),
    "port_out_of_range": (_tf_config({"worker": ["127.0.0.1:70000"]}),
                          "a port is an integer from 1 to 65535"),
    "no_port": (_tf_config({"worker": ["127.0.0.1"]}), "must be 'host:port'"),
    "parameter_servers": (_tf_config({"worker": ["a:1"], "ps": ["b:2"]}),
                          "cluster job 'ps' is not one multi_worker trains with"),
    "two_chiefs": (_tf_config({"chief": ["a:1", "b:2"]}, {"type": "chief", "index": 0}),
                   "cluster.chief must list one address"),
    "one_address_twice": (_tf_config({"chief": ["a:1"], "worker": ["a:1"]},
                                     {"type": "worker", "index": 0}),
                          "cluster.worker[0] and cluster.chief[0] are both a:1; each task "
                          "needs its own host:port"),
}


@pytest.mark.parametrize("case", sorted(BAD_TF_CONFIG))
def test_bad_tf_config_is_a_recipe_error(case, tmp_path, capsys, monkeypatch):
    value, message = BAD_TF_CONFIG[case]
    if value is None:
        monkeypatch.delenv("TF_CONFIG", raising=False)
    else:
        monkeypatch.setenv("TF_CONFIG", value)
    code, err = _validate(tmp_path, capsys, monkeypatch)
    assert code == 2, err
    assert err.startswith(STRATEGY_AT), err
    assert message in err, err
    assert "Traceback" not in err and "1 problem found; nothing was run." in err


def test_valid_tf_config_validates_without_starting_a_cluster(tmp_path, capsys, monkeypatch):
    # _validate makes creating a MultiWorkerMirroredStrategy fail: validate creates none.
    monkeypatch.setenv("TF_CONFIG", _tf_config())
    code, err = _validate(tmp_path, capsys, monkeypatch)
    assert code == 0, err


def test_other_problems_come_before_the_environment(tmp_path, capsys, monkeypatch):
    # The section is checked with the rest of the recipe; TF_CONFIG only once that passes.
    monkeypatch.delenv("TF_CONFIG", raising=False)
    code, err = _validate(tmp_path, capsys, monkeypatch,
                          RECIPE.replace("epochs: 1", "epochs: 0"))
    assert code == 2 and "training.epochs" in err and "TF_CONFIG" not in err, err


@pytest.mark.parametrize("task, role", [
    ({"type": "worker", "index": 0}, ("worker", 0, True)),
    ({"type": "worker", "index": 1}, ("worker", 1, False)),
])
def test_worker_zero_is_the_chief_without_a_chief_job(task, role, monkeypatch):
    config = read_tf_config({"TF_CONFIG": _tf_config(task=task)})
    assert cluster_role(config) == role


def test_the_chief_job_is_the_chief():
    cluster = {"chief": ["a:1"], "worker": ["b:2", "c:3"]}
    chief = read_tf_config({"TF_CONFIG": _tf_config(cluster, {"type": "chief", "index": 0})})
    worker = read_tf_config({"TF_CONFIG": _tf_config(cluster, {"type": "worker", "index": 0})})
    assert cluster_role(chief) == ("chief", 0, True)
    assert cluster_role(worker) == ("worker", 0, False)


@pytest.mark.parametrize("written, resolved", [
    ("", None),
    ("distribute: null\n", None),
    ("distribute: mirrored\n", {"strategy": "mirrored", "devices": None}),
    ("distribute: {strategy: mirrored, devices: [' /cpu:0']}\n",
     {"strategy": "mirrored", "devices": ["/cpu:0"]}),
])
def test_section_resolution(written, resolved):
    text = RECIPE[:RECIPE.index("distribute:")] + written
    recipe = recipe_from_text(text, "r.yaml", default_name="r")
    assert recipe.config["distribute"] == resolved
    assert ("distribute:" in recipe.to_yaml())  # print-config shows it, default included


def test_mirrored_recipe_builds_and_compiles_in_the_strategy_scope():
    text = RECIPE.replace("strategy: multi_worker", "strategy: mirrored\n  devices: [CPU:0]")
    prepared = prepare(recipe_from_text(text, "r.yaml", default_name="r"))
    strategy = prepared.strategy
    assert isinstance(strategy, tf.distribute.MirroredStrategy)
    assert strategy.num_replicas_in_sync == 1
    variables = prepared.model.trainable_variables
    assert len(variables) == 4
    assert all(strategy.extended.variable_created_in_scope(v) for v in variables)
    # The same section in the same process reuses the strategy (it is created once).
    again = prepare(recipe_from_text(text, "r.yaml", default_name="r"))
    assert again.strategy is strategy
    # A finished run is evaluated on one device: no strategy, plain variables.
    alone = prepare(recipe_from_text(text, "r.yaml", default_name="r"), distribute=False)
    assert alone.strategy is None
    assert not any(strategy.extended.variable_created_in_scope(v)
                   for v in alone.model.trainable_variables)


def test_a_mirrored_recipe_trains_into_a_complete_run(tmp_path, monkeypatch, capsys):
    """`graphfit train` with `distribute: mirrored` (one replica here): the TensorBoard graph,
    checkpoints and metrics are written as on one device."""
    monkeypatch.chdir(tmp_path)
    recipe = tmp_path / "r.yaml"
    recipe.write_text("seed: 0\ndata: {source: moons, n_samples: 120}\n"
                      "model: [{type: Dense, units: 8, activation: relu}, "
                      "{type: BatchNormalization}, {type: Dense, units: 2}]\n"
                      "loss: {type: SparseCategoricalCrossentropy, from_logits: true}\n"
                      "metrics: [accuracy]\ndistribute: mirrored\n"
                      "training: {epochs: 2, batch_size: 16}\n")
    assert cli.main(["train", str(recipe), "--verbose", "0"]) == 0
    run = next((tmp_path / "runs" / "r").glob("2*"))
    metrics = json.loads((run / "metrics.json").read_text())
    assert 0.0 <= metrics["test"]["accuracy"] <= 1.0
    assert any((run / "checkpoints").iterdir())
