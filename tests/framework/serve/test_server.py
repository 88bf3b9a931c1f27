"""`graphfit serve` over real HTTP on a free port: TF Serving's REST API (status, metadata,
predict by rows and columns), answers equal to `graphfit predict`'s, 4xx JSON errors while it
keeps serving, a concurrent burst batched with no error, a newer version folder loaded while
requests run, and the command itself in a subprocess.

One module fixture trains the quickstart recipe for one epoch and exports it to TF Serving's
layout; the servers run in this process (a background thread) except the command's.
"""

from __future__ import annotations

import concurrent.futures
import csv
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import datasets, layers
from graphfit.cli.main import main
from graphfit.export import export_to_serving_dir
from graphfit.export.run_export import export_run_as
from graphfit.recipes import load_recipe
from graphfit.recipes.running import training_run
from graphfit.serve import ModelServer, ServeOptions

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _post(url: str, body, timeout: float = 30) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("serve")
    recipe = load_recipe(os.path.join(REPO, "recipes", "quickstart.yaml"),
                         ["training.epochs=1", "training.jit_compile=false"])
    run = str(folder / "run")
    training_run.train(recipe, run_dir=run, verbose=0)
    export_run_as(run, serving_dir=str(folder / "serving"), name="digits")
    rows = np.asarray(datasets.load_digits()[0][:24], np.float32)
    np.savez(folder / "rows.npz", x=rows)
    assert main(["predict", run, "--input", str(folder / "rows.npz"),
                 "--output", str(folder / "predicted.csv")]) == 0
    with open(folder / "predicted.csv") as file:
        table = list(csv.DictReader(file))
    server = ModelServer(str(folder / "serving" / "digits"),
                         options=ServeOptions(port=0, poll_s=0.1, batch_delay_ms=5))
    url = server.start()
    yield {"run": run, "rows": rows, "table": table, "server": server, "folder": folder,
           "predict": f"{url}/v1/models/digits:predict", "url": url}
    server.stop()


def _same_as_graphfit_predict(classify: dict, table: list[dict]) -> None:
    assert [int(row["class"]) for row in table] == classify["class"]
    probabilities = [[float(row[f"probability_{k}"]) for k in range(10)] for row in table]
    np.testing.assert_allclose(classify["probabilities"], probabilities, atol=1e-6)


def test_status_and_metadata(served):
    status, body = _get(f"{served['url']}/v1/models/digits")
    assert status == 200
    assert json.loads(body)["model_version_status"][0] == {
        "version": "1", "state": "AVAILABLE", "status": {"error_code": "OK",
                                                         "error_message": ""}}
    status, body = _get(f"{served['url']}/v1/models/digits/metadata")
    signatures = json.loads(body)["metadata"]["signature_def"]["signature_def"]
    assert set(signatures) == {"serving_default", "predict", "classify"}
    x = signatures["serving_default"]["inputs"]["x"]
    assert x["dtype"] == "DT_FLOAT" and [d["size"] for d in x["tensor_shape"]["dim"]] == \
        ["-1", "64"]


def test_predict_by_rows_and_by_columns_equals_graphfit_predict(served):
    rows = served["rows"].tolist()
    status, body = _post(served["predict"], {"instances": rows, "signature_name": "classify"})
    assert status == 200
    by_rows = body["predictions"]
    _same_as_graphfit_predict({"class": [r["class"] for r in by_rows],
                               "probabilities": [r["probabilities"] for r in by_rows]},
                              served["table"])
    status, body = _post(served["predict"], {"inputs": {"x": rows},
                                             "signature_name": "classify"})
    assert status == 200
    _same_as_graphfit_predict(body["outputs"], served["table"])
    status, body = _post(served["predict"], {"instances": [{"x": rows[0]}]})
    assert status == 200 and len(body["predictions"][0]) == 10


@pytest.mark.parametrize("body,status,message", [
    (b"{not json", 400, "not valid JSON"),
    (b"[1, 2]", 400, "a request body is a JSON object"),
    ({"instances": [[1.0, 2.0]]}, 400, "each example has shape \\(2,\\), the signature "
                                      "takes \\(64,\\)"),
    ({"instances": [{"x": [0.0] * 64, "age": 3}]}, 400, "unknown input\\(s\\) age"),
    ({"inputs": {"pixels": [[0.0] * 64]}}, 400, "must give the input x by name"),
    ({"instances": [["a"] * 64]}, 400, "cannot read the values as float32"),
    ({"instances": [[0.0] * 64], "signature_name": "embed"}, 400, "no signature 'embed'"),
    ({"rows": []}, 400, "exactly one of"),
    ({"instances": [[0.0] * 64] * 1025}, 413, "at most 1024 per request"),
    # A plain model has no missing-value handling: it would answer for these with a number.
    ({"instances": [[None] + [0.0] * 63]}, 400, r"instances\[0\]\[0\] is null: this model "
                                                r"takes finite numbers only"),
    ({"instances": [[0.0] * 63 + [float("nan")]]}, 400, r"instances\[0\]\[63\] is NaN"),
    ({"inputs": {"x": [[0.0] * 63 + [1e400]]}}, 400, r'inputs\["x"\]\[0\]\[63\] is Infinity'),
    ({"instances": [{"x": [True] + [0.0] * 63}]}, 400, r'instances\[0\]\["x"\]\[0\] is true'),
])
def test_bad_requests_get_a_4xx_json_error_and_it_keeps_serving(served, body, status, message):
    import re

    got, answer = _post(served["predict"], body)
    assert got == status and re.search(message, answer["error"]), answer
    assert _post(served["predict"], {"instances": served["rows"][:1].tolist()})[0] == 200


def test_wrong_paths_and_oversized_bodies(served):
    url = served["url"]
    assert _post(f"{url}/v1/models/other:predict", {"instances": [[0.0] * 64]})[0] == 404
    assert _post(f"{url}/v1/models/digits:classify", {"examples": []})[0] == 404
    assert _post(f"{url}/v1/models/digits/versions/7:predict", {"instances": []})[0] == 404
    assert _get(f"{url}/v1/models/digits:predict")[0] == 405
    assert _get(f"{url}/nowhere")[0] == 404
    import http.client

    # A body declared larger than the limit is refused before it is read.
    connection = http.client.HTTPConnection(url.split("//")[1], timeout=30)
    connection.putrequest("POST", "/v1/models/digits:predict")
    connection.putheader("Content-Length", str(9 << 20))
    connection.endheaders()
    answer = connection.getresponse()
    assert answer.status == 413 and "8388608" in json.load(answer)["error"]
    connection.close()
    assert _post(served["predict"], {"instances": served["rows"][:1].tolist()})[0] == 200


def test_a_concurrent_burst_is_batched_with_no_error(served):
    rows = served["rows"]
    expected = {}
    for index in range(len(rows)):
        status, body = _post(served["predict"], {"instances": [rows[index].tolist()]})
        expected[index] = body["predictions"]
    batches_before = served["server"].batcher.batches

    def ask(index):
        return index % len(rows), _post(served["predict"],
                                        {"instances": [rows[index % len(rows)].tolist()]})

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(ask, range(160)))
    assert all(status == 200 for _, (status, _) in answers)
    for index, (_, body) in answers:
        np.testing.assert_allclose(body["predictions"], expected[index], atol=1e-5)
    assert served["server"].batcher.batches - batches_before < 160  # some were batched
    status, text = _get(f"{served['url']}/metrics")
    assert 'graphfit_requests_total{endpoint="predict",code="200"}' in text
    assert 'graphfit_request_latency_seconds{endpoint="predict",quantile="0.99"}' in text


def test_a_newer_version_is_loaded_without_dropping_requests(served):
    rows = served["rows"][:2].tolist()
    other = gf.Sequential([layers.Dense(10, kernel_initializer="ones")])
    other.build((None, 64))
    stop, results = threading.Event(), []

    def keep_asking():
        while not stop.is_set():
            results.append(_post(served["predict"], {"instances": rows}))

    worker = threading.Thread(target=keep_asking)
    worker.start()
    try:
        folder, _ = export_to_serving_dir(other, str(served["folder"] / "serving"), "digits")
        assert folder.endswith(os.path.join("digits", "2"))
        deadline = time.monotonic() + 30
        while served["server"].model.current.version != 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
    finally:
        stop.set()
        worker.join()
    assert served["server"].model.current.version == 2
    assert results and all(status == 200 for status, _ in results)
    status, body = _post(served["predict"], {"instances": rows})
    np.testing.assert_allclose(body["predictions"], other.predict(np.array(rows)), rtol=1e-5)
    states = json.loads(_get(f"{served['url']}/v1/models/digits")[1])["model_version_status"]
    assert [(s["version"], s["state"]) for s in states] == [("2", "AVAILABLE"), ("1", "END")]



def test_a_broken_version_is_reported_and_the_current_one_keeps_serving(served):
    from graphfit.serve.models import RETRIES

    broken = served["folder"] / "serving" / "digits" / "9"
    broken.mkdir()
    (broken / "saved_model.pb").write_bytes(b"not a SavedModel")
    model = served["server"].model
    deadline = time.monotonic() + 30
    while model.failures.get(9, 0) < RETRIES and time.monotonic() < deadline:
        time.sleep(0.05)
    assert model.failures[9] == RETRIES
    states = json.loads(_get(f"{served['url']}/v1/models/digits")[1])["model_version_status"]
    assert states[0]["version"] == "9" and states[0]["state"] == "END"
    assert states[0]["status"]["error_message"]
    assert _post(served["predict"], {"instances": served["rows"][:1].tolist()})[0] == 200

def test_a_run_is_exported_and_served(served):
    server = ModelServer(served["run"], options=ServeOptions(port=0, batching=False))
    try:
        assert server.export_check.passed and server.model.name == "quickstart"
        url = server.start()
        status, body = _post(f"{url}/v1/models/quickstart:predict",
                             {"inputs": served["rows"].tolist(), "signature_name": "classify"})
        assert status == 200
        _same_as_graphfit_predict(body["outputs"], served["table"])
    finally:
        server.stop()
    assert not os.path.exists(server.temporary)


def test_the_command_serves_a_version_folder(served, tmp_path):
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    folder = str(served["folder"] / "serving" / "digits" / "1")
    command = [sys.executable, "-c", "import sys; from graphfit.cli import main; sys.exit(main())",
               "serve", folder, "--port", str(port),
               "--no-batching"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=tmp_path)
    try:
        line = process.stdout.readline()
        assert line.startswith("serving 'digits' version 1"), process.stderr.read()
        assert f"at http://127.0.0.1:{port}/v1/models/digits (no batching" in line
        status, body = _post(f"http://127.0.0.1:{port}/v1/models/digits:predict",
                             {"instances": served["rows"].tolist(),
                              "signature_name": "classify"})
        assert status == 200
        assert [p["class"] for p in body["predictions"]] == \
            [int(row["class"]) for row in served["table"]]
    finally:
        process.terminate()
        assert process.wait(timeout=30) == 0


def test_named_columns_of_strings_and_numbers_pass_through(tmp_path):
    """A SavedModel taking raw named columns (a dict of tensors by name, as an export with
    preprocessing inside does): rows `instances: [{...}]` and columns `inputs: {...}`."""
    import tensorflow as tf

    class Columns(tf.Module):
        def __init__(self):
            super().__init__()
            self.table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
                ["red", "green"], [1.0, 2.0], tf.string, tf.float32), 0.0)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="color"),
                                      tf.TensorSpec([None], tf.float32, name="age")])
        def serve(self, color, age):
            return {"score": self.table.lookup(color) * 10 + age,
                    "upper": tf.strings.upper(color)}

    module = Columns()
    tf.saved_model.save(module, str(tmp_path / "columns"),
                        signatures={"serving_default": module.serve})
    server = ModelServer(str(tmp_path / "columns"), options=ServeOptions(port=0))
    url = f"{server.start()}/v1/models/columns:predict"
    try:
        rows = [{"color": "green", "age": 3}, {"age": 4.5, "color": "blue"}]
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(lambda _: _post(url, {"instances": rows}), range(8)))
        assert all(a == (200, {"predictions": [{"score": 23.0, "upper": "GREEN"},
                                               {"score": 4.5, "upper": "BLUE"}]})
                   for a in answers)
        status, body = _post(url, {"inputs": {"color": ["red"], "age": [1.0]}})
        assert (status, body) == (200, {"outputs": {"score": [11.0], "upper": ["RED"]}})
        status, body = _post(url, {"instances": [{"color": "red", "age": 1, "height": 2}]})
        assert status == 400 and "unknown input(s) height" in body["error"]
        status, body = _post(url, {"instances": [{"color": "red"}]})
        assert status == 400 and "lacks the input(s) age" in body["error"]
    finally:
        server.stop()


def test_a_tensorflow_error_is_answered_with_its_own_line_not_graph_execution_error():
    from graphfit.serve.app import op_message

    @tf.function(input_signature=[tf.TensorSpec([None]), tf.TensorSpec([None])])
    def needs_equal_lengths(a, b):
        return a + b

    with pytest.raises(tf.errors.InvalidArgumentError) as caught:
        needs_equal_lengths(tf.ones([2]), tf.ones([3]))
    message = op_message(caught.value)
    assert message != "Graph execution error:" and "Incompatible shapes" in message, message


def test_a_port_in_use_is_refused_with_the_fix(served):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        # version 1 itself: other tests add versions (a broken one too) to the folder
        server = ModelServer(str(served["folder"] / "serving" / "digits" / "1"),
                             options=ServeOptions(port=port, poll_s=0))
        try:
            with pytest.raises(ValueError, match=rf"cannot listen on 127.0.0.1:{port}: .*"
                                                 r"Choose another --port, or --port 0"):
                server.start()
        finally:
            server.close()
