"""`graphfit serve` under load: the digits MLP served over HTTP to 1, 8 and 64 concurrent
clients, with batching on and off; and the single-row latency of its TFLite and ONNX exports
against the SavedModel's, in their own runtimes.

The server runs as users run it (`graphfit serve DIR --port P [--no-batching]`, its own
process); the clients are asyncio connections on 127.0.0.1 in this process (HTTP/1.1
keep-alive, one request in flight each, a single-row `instances` body), each level bounded
in time (--seconds) and count (--max-requests). Latency is measured by the client, from
sending a request to having read its answer. The project's targets (printed, never asserted):
0 errors; with batching, 64 clients reach at least 3x the requests per second of batching off,
with p99 under 100 ms. Client and server share this machine's cores: the numbers are a floor.

Usage:

    python benchmarks/serve.py                    # trains the quickstart recipe (3 epochs)
    python benchmarks/serve.py --run runs/quickstart/latest --seconds 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

RECIPE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "recipes",
                      "quickstart.yaml")
CLIENTS = (1, 8, 64)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def client(port: int, body: bytes, until: float, budget: list, latencies: list,
                 errors: list) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (f"POST /v1/models/digits:predict HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    try:
        while time.perf_counter() < until and budget[0] > 0:
            budget[0] -= 1
            started = time.perf_counter()
            writer.write(head + body)
            status = (await reader.readline()).split()[1]
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            answer = await reader.readexactly(length)
            latencies.append(time.perf_counter() - started)
            if status != b"200" or b"predictions" not in answer:
                errors.append(status)
    finally:
        writer.close()


async def load(port: int, clients: int, seconds: float, max_requests: int, body: bytes):
    latencies, errors, budget = [], [], [max_requests]
    started = time.perf_counter()
    until = started + seconds
    await asyncio.gather(*[client(port, body, until, budget, latencies, errors)
                           for _ in range(clients)])
    elapsed = time.perf_counter() - started
    ms = np.array(latencies) * 1000
    return {"clients": clients, "requests": len(latencies), "rps": len(latencies) / elapsed,
            "p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99)),
            "errors": len(errors)}


def start_server(folder: str, port: int, batching: bool) -> subprocess.Popen:
    command = [sys.executable, "-c", "import sys; from graphfit.cli import main; sys.exit(main())",
               "serve", folder, "--port", str(port),
               "--name", "digits", "--poll-seconds", "0"]
    if not batching:
        command.append("--no-batching")
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    if not line.startswith("serving"):
        process.kill()
        raise RuntimeError(f"the server did not start: {line}")
    return process


def serve_table(folder: str, args, body: bytes) -> list[dict]:
    rows = []
    for batching in (False, True):
        port = free_port()
        process = start_server(folder, port, batching)
        try:
            asyncio.run(load(port, 8, 1.0, 500, body))  # warm the connections and the model
            for clients in CLIENTS:
                result = asyncio.run(load(port, clients, args.seconds, args.max_requests, body))
                rows.append({"batching": "on" if batching else "off", **result})
        finally:
            process.terminate()
            process.wait(timeout=30)
    return rows


def single_row_latency(model, folder: str, row: np.ndarray, calls: int) -> list[tuple]:
    """(format, median and p99 ms of one single-row call) in each format's runtime."""
    import tensorflow as tf

    from graphfit.export import formats

    found = []
    loaded = tf.saved_model.load(folder)
    signature = loaded.signatures["serving_default"]
    runners = {"saved_model (TensorFlow)": lambda: signature(x=tf.constant(row))}
    for format in ("tflite", "onnx"):
        path = os.path.join(os.path.dirname(folder), f"model.{format}")
        check = formats.export_as(model, path, format)
        print(check)
        if format == "tflite":
            from ai_edge_litert.interpreter import Interpreter

            runner = Interpreter(model_path=path).get_signature_runner("serving_default")
            runners[f"tflite ({check.runtime})"] = lambda runner=runner: runner(x=row)
        else:
            import onnxruntime

            session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
            runners["onnx (onnxruntime)"] = lambda session=session: session.run(None, {"x": row})
    for name, run in runners.items():
        for _ in range(50):
            run()
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            run()
            times.append(time.perf_counter() - started)
        ms = np.array(times) * 1000
        found.append((name, float(np.median(ms)), float(np.percentile(ms, 99))))
    return found


def prepare(args, folder: str):
    from graphfit.export.run_export import export_run_as
    from graphfit.recipes import load_recipe
    from graphfit.recipes.running import runner, training_run

    run = args.run
    if run is None:
        run = os.path.join(folder, "run")
        recipe = load_recipe(RECIPE, ["training.epochs=3"])
        training_run.train(recipe, run_dir=run, verbose=0)
    check = export_run_as(run, serving_dir=os.path.join(folder, "serving"), name="digits")
    print(check)
    return runner.load_run(run, data=False)[0].model, check.path


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", default=None, help="a finished quickstart run (default: "
                                                    "train one for 3 epochs)")
    parser.add_argument("--seconds", type=float, default=5.0, help="per load level")
    parser.add_argument("--max-requests", type=int, default=50000, help="per load level")
    parser.add_argument("--calls", type=int, default=2000, help="single-row calls per format")
    args = parser.parse_args(argv)
    from graphfit import datasets

    row = np.asarray(datasets.load_digits()[0][:1], np.float32)
    body = json.dumps({"instances": row.tolist()}).encode()
    with tempfile.TemporaryDirectory() as folder:
        model, version = prepare(args, folder)
        table = serve_table(os.path.dirname(version), args, body)
        latency = single_row_latency(model, version, row, args.calls)
    print(f"\n{os.cpu_count()} CPUs; {args.seconds:g} s or {args.max_requests} requests per "
          f"level; single-row instances bodies\n")
    print("| batching | clients | requests | requests/s | p50 (ms) | p99 (ms) | errors |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in table:
        print(f"| {r['batching']} | {r['clients']} | {r['requests']} | {r['rps']:.0f} | "
              f"{r['p50']:.2f} | {r['p99']:.2f} | {r['errors']} |")
    on = next(r for r in table if r["batching"] == "on" and r["clients"] == 64)
    off = next(r for r in table if r["batching"] == "off" and r["clients"] == 64)
    errors = sum(r["errors"] for r in table)
    print(f"\n64 clients: batching on / off = {on['rps'] / off['rps']:.2f}x requests/s (target "
          f">= 3x), p99 with batching {on['p99']:.1f} ms (target < 100 ms), errors {errors} "
          f"(target 0)\n")
    print("| format (runtime) | single-row median (ms) | p99 (ms) |")
    print("|---|---:|---:|")
    for name, median, p99 in latency:
        print(f"| {name} | {median:.3f} | {p99:.3f} |")


if __name__ == "__main__":
    main()
