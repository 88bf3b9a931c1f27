"""End to end: a real `tensorboard` server reads what the TensorBoard callback wrote, and its
HTTP data API (what the web page shows) reports the runs, tags, values, graph and
hyperparameters."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import keras
import numpy as np
import pytest

pytest.importorskip("tensorboard", reason="the tensorboard package is not installed")

import graphfit as gf  # noqa: E402
from graphfit import layers  # noqa: E402
from graphfit.callbacks import TensorBoard  # noqa: E402

RUNS = ["run1", "run1/test", "run1/train", "run1/val"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _tensorboard_command() -> list[str]:
    script = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    return [script] if os.path.exists(script) else [sys.executable, "-m", "tensorboard.main"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """Trains into root/run1 (the folder above log_dir is TensorBoard's --logdir, as with
    `tensorboard --logdir runs`), starts TensorBoard on root, waits for the four runs."""
    keras.utils.set_random_seed(1234)
    root = tmp_path_factory.mktemp("served")
    x, y = gf.datasets.make_moons(n_samples=60, seed=0)
    model = gf.Sequential([layers.Dense(4, activation="relu", name="hidden"),
                           layers.Dense(1, name="out")])
    model.compile(optimizer=gf.optimizers.SGD(0.1),
                  loss=keras.losses.BinaryCrossentropy(from_logits=True), metrics=["accuracy"])
    board = TensorBoard(str(root / "run1"), histogram_freq=1,
                        hparams={"learning_rate": 0.1, "optimizer": "sgd"},
                        recipe_text="name: moons")
    history = model.fit(x[:40], y[:40], batch_size=10, epochs=2, verbose=0,
                        validation_data=(x[40:50], y[40:50]), test_data=(x[50:], y[50:]),
                        test_freq=1, callbacks=[board])
    port = _free_port()
    log = open(root / "tensorboard.log", "w")
    server = subprocess.Popen(
        _tensorboard_command() + ["--logdir", str(root), "--host", "127.0.0.1",
                                  "--port", str(port), "--reload_interval", "1"],
        stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}/data"
    try:
        deadline = time.monotonic() + 45
        while not _loaded(base):
            if server.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail("TensorBoard did not serve the logs in 45 s:\n"
                            + (root / "tensorboard.log").read_text()[-3000:])
            time.sleep(0.3)
        yield base, history.history
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def _loaded(base) -> bool:
    """Whether the server answers and has read every run to its end (it loads in the
    background, run by run)."""
    try:
        if sorted(_get(base, "/runs")) != RUNS:
            return False
        return all(len(_get(base, "/plugin/scalars/scalars", run=f"run1/{stage}", tag="loss")) == 2
                   for stage in ("train", "val", "test"))
    except (urllib.error.URLError, ConnectionError, ValueError):
        return False


def _get(base, route, **query):
    url = base + route + ("?" + urllib.parse.urlencode(query) if query else "")
    with urllib.request.urlopen(url, timeout=10) as answer:
        body = answer.read().decode()
    return json.loads(body) if body.lstrip()[:1] in "[{" else body


def test_runs_tags_and_scalar_values(served):
    base, history = served
    assert sorted(_get(base, "/runs")) == RUNS
    tags = _get(base, "/plugin/scalars/tags")
    assert set(tags["run1/train"]) == {"loss", "accuracy", "learning_rate"}
    assert set(tags["run1/val"]) == set(tags["run1/test"]) == {"loss", "accuracy"}
    for run, prefix in (("run1/train", ""), ("run1/val", "val_"), ("run1/test", "test_")):
        for tag in ("loss", "accuracy"):
            points = _get(base, "/plugin/scalars/scalars", run=run, tag=tag)
            assert [step for _, step, _ in points] == [0, 1]
            np.testing.assert_allclose([value for _, _, value in points],
                                       history[prefix + tag], rtol=1e-6)
    rates = _get(base, "/plugin/scalars/scalars", run="run1/train", tag="learning_rate")
    np.testing.assert_allclose([value for _, _, value in rates], [0.1, 0.1], rtol=1e-6)


def test_histograms_graph_and_text(served):
    base, _ = served
    histogram_tags = set(_get(base, "/plugin/histograms/tags")["run1/train"])
    assert {"weights/hidden/kernel", "gradients/hidden/kernel", "gradients/out/bias"} <= (
        histogram_tags)
    info = _get(base, "/plugin/graphs/info")
    assert set(info) == {"run1/train"} and info["run1/train"]["run_graph"] is True
    graph = _get(base, "/plugin/graphs/graph", run="run1/train")  # a GraphDef as text
    assert 'op: "MatMul"' in graph and 'op: "AssignVariableOp"' in graph
    assert _get(base, "/plugin/text/tags") == {"run1": ["recipe"]}


def test_hparams_session_with_the_final_metrics_of_each_stage(served):
    base, history = served
    experiment = _get(base, "/plugin/hparams/experiment",
                      request=json.dumps({"experimentName": ""}))
    assert {h["name"] for h in experiment["hparamInfos"]} == {"learning_rate", "optimizer"}
    metrics = {(m["name"]["group"], m["name"]["tag"]) for m in experiment["metricInfos"]}
    assert {("train", "loss"), ("val", "loss"), ("test", "loss"), ("val", "accuracy")} <= metrics
    request = {
        "experimentName": "", "startIndex": 0, "sliceSize": 10,
        "allowedStatuses": ["STATUS_UNKNOWN", "STATUS_SUCCESS", "STATUS_FAILURE",
                            "STATUS_RUNNING"],
        "colParams": [{"hparam": "learning_rate"},
                      *({"metric": {"group": g, "tag": "loss"}} for g in ("train", "val", "test"))],
    }
    groups = _get(base, "/plugin/hparams/session_groups", request=json.dumps(request))
    (group,) = groups["sessionGroups"]
    (session,) = group["sessions"]
    assert session["name"] == "run1" and session["status"] == "STATUS_SUCCESS"
    assert group["hparams"] == {"learning_rate": 0.1, "optimizer": "sgd"}
    final = {m["name"]["group"]: m["value"] for m in session["metricValues"]
             if m["name"]["tag"] == "loss"}
    np.testing.assert_allclose([final["train"], final["val"], final["test"]],
                               [history["loss"][-1], history["val_loss"][-1],
                                history["test_loss"][-1]], rtol=1e-6)
