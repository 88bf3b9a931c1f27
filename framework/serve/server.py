"""`ModelServer`: a served model behind uvicorn, in this process (`graphfit serve`).

`ModelServer(source)` loads a SavedModel folder, a model base folder in TensorFlow Serving's
layout (the newest version, with newer ones picked up as they appear) or a finished run
(exported first, to a temporary version folder); `serve_forever()` answers until stopped,
`start()` answers from a background thread (tests, notebooks) and returns the URL.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import gc
import os
import shutil
import socket
import tempfile
import threading
import time

from graphfit.serve.app import create_app, run_in
from graphfit.serve.batching import Batcher
from graphfit.serve.metrics import Metrics
from graphfit.serve.models import ServedModel

__all__ = ["ServeOptions", "ModelServer", "is_run_directory"]


@dataclasses.dataclass(frozen=True)
class ServeOptions:
    """How the server listens, batches and limits requests.

    Attributes:
        host: the address to bind (127.0.0.1: this machine only; 0.0.0.0 to be reached
            from elsewhere).
        port: the port (0: a free one, see `ModelServer.url`).
        batching: put concurrent requests into one signature call.
        max_batch_rows: the most rows in one batched call.
        batch_delay_ms: how long a request waits for others to join its batch (0: none;
            a batch is then what queued while the previous one ran).
        max_request_rows: the most rows one request may hold (413 above).
        max_body_bytes: the largest request body (413 above).
        poll_s: how often to look for a newer version folder (0: never).
        threads: worker threads running the model when batching is off.
        freeze_gc: move the objects alive once the model is loaded out of Python's cyclic
            garbage collector (`gc.freeze`): TensorFlow's millions of objects, scanned by
            every full collection, stalled all requests for ~0.7 s twice in 5 s under load
            (benchmarks/serve.py). `graphfit serve` sets it; in a process that goes on doing
            other work (tests, a notebook) objects frozen then are never collected.

    Example:

        >>> ServeOptions(port=0).host
        '127.0.0.1'
    """

    host: str = "127.0.0.1"
    port: int = 8501
    batching: bool = True
    max_batch_rows: int = 64
    batch_delay_ms: float = 0.0
    max_request_rows: int = 1024
    max_body_bytes: int = 8 << 20
    poll_s: float = 1.0
    threads: int = 2
    freeze_gc: bool = False

    def __post_init__(self):
        for name in ("max_batch_rows", "max_request_rows", "max_body_bytes", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}: give a positive number")
        if self.batch_delay_ms < 0 or self.poll_s < 0:
            raise ValueError(f"batch_delay_ms={self.batch_delay_ms}, poll_s={self.poll_s}: "
                             f"give 0 or more")
        if not 0 <= self.port < 65536:
            raise ValueError(f"port={self.port}: give a port from 0 to 65535")


def is_run_directory(path: str) -> bool:
    """Whether `path` is a finished recipe run (its recipe and final weights)."""
    return os.path.isfile(os.path.join(path, "recipe.yaml")) and os.path.isfile(
        os.path.join(path, "preprocessing.json"))


def _run_of(source: str) -> str | None:
    """The run `source` names (a run directory, or a folder holding runs such as
    runs/quickstart), or None for an export."""
    from graphfit.serve.models import find_source

    if is_run_directory(source):
        return source
    try:
        find_source(source)
        return None
    except ValueError as not_an_export:
        from graphfit.recipes.running import run_directory

        try:
            return run_directory.find_run(source)
        except ValueError:
            raise ValueError(f"{not_an_export}, nor a finished run (its recipe.yaml and "
                             f"weights)") from None


def _default_name(path: str) -> str:
    path = os.path.abspath(path)
    name = os.path.basename(path)
    if name.isdigit():  # a version folder
        name = os.path.basename(os.path.dirname(path))
    return "model" if name in ("saved_model", "") else name


def _check_port_free(host: str, port: int) -> None:
    """A ValueError naming the fix when `port` is taken (uvicorn only logs it and exits)."""
    if port == 0:
        return
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            raise ValueError(f"cannot listen on {host}:{port}: {error.strerror or error} "
                             f"(another server?). Choose another --port, or --port 0 for a "
                             f"free one") from None


class ModelServer:
    """One model served over HTTP with TensorFlow Serving's REST API.

    Args:
        source: a SavedModel folder, a model base folder (`BASE/<version>/`), or a run.
        name: the model's name in the URLs; default the folder's (a run: its recipe's).
        options: `ServeOptions`.

    Example:

        >>> import graphfit as gf
        >>> from graphfit import layers
        >>> import tempfile, os, json, urllib.request
        >>> model = gf.Sequential([layers.Dense(1, kernel_initializer="ones")])
        >>> model.build((None, 2))
        >>> folder = model.export(os.path.join(tempfile.mkdtemp(), "adder"))
        >>> server = ModelServer(folder, options=ServeOptions(port=0))
        >>> url = server.start()
        >>> request = urllib.request.Request(url + "/v1/models/adder:predict",
        ...                                  data=b'{"instances": [[1, 2]]}')
        >>> json.load(urllib.request.urlopen(request))
        {'predictions': [[3.0]]}
        >>> server.stop()
    """

    def __init__(self, source: str, name: str | None = None,
                 options: ServeOptions | None = None):
        self.options = options or ServeOptions()
        self.temporary = None
        self.export_check = None
        path = source
        run = _run_of(source)
        if run is not None:
            path, name = self._export_run(run, name)
        self.model = ServedModel(name or _default_name(path), path,
                                 freeze_gc=self.options.freeze_gc)
        self.metrics = Metrics()
        self.executor = concurrent.futures.ThreadPoolExecutor(self.options.threads, "model")
        self.batcher = Batcher(self._call, self.options.max_batch_rows,
                               self.options.batch_delay_ms / 1000.0)
        self.app = create_app(self)
        self.started_at = time.time()
        self._server = None
        self._thread = None
        self.url = None

    def _export_run(self, run: str, name: str | None) -> tuple[str, str]:
        from graphfit.export.run_export import export_run_as

        self.temporary = tempfile.mkdtemp(prefix="graphfit-serve-")
        try:
            self.export_check = export_run_as(run, serving_dir=self.temporary, name=name)
        except BaseException:
            shutil.rmtree(self.temporary, ignore_errors=True)  # nothing is left behind
            raise
        folder = os.path.dirname(self.export_check.path)
        return folder, os.path.basename(folder)

    @staticmethod
    def _call(version, signature: str, arrays: dict) -> dict:
        return version.run(signature, arrays)

    def model_named(self, name: str) -> ServedModel:
        """The served model called `name`, or a 404 problem."""
        from graphfit.serve.app import HTTPProblem

        if name != self.model.name:
            raise HTTPProblem(404, f"no model named {name!r} here; this server serves "
                                   f"{self.model.name!r}")
        return self.model

    async def run(self, version, signature: str, arrays: dict) -> dict:
        """The outputs of one request: batched, or run on its own."""
        if self.options.batching and version.batchable[signature]:
            return await self.batcher.submit(version, signature, arrays)
        return await run_in(self.executor, self._call, version, signature, arrays)

    def gauges(self) -> dict[str, float]:
        """The numbers /metrics shows besides the request counts."""
        return {"graphfit_model_version": self.model.current.version,
                "graphfit_model_reloads_total": self.model.reloads,
                "graphfit_batches_total": self.batcher.batches,
                "graphfit_batched_rows_total": self.batcher.batched_rows,
                "graphfit_uptime_seconds": round(time.time() - self.started_at, 3)}

    def _uvicorn(self):
        import uvicorn

        config = uvicorn.Config(self.app, host=self.options.host, port=self.options.port,
                                log_level="warning", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self.model.watch(self.options.poll_s)
        return self._server

    def serve_forever(self, on_start=None) -> None:
        """Answers requests until interrupted (Ctrl-C, SIGTERM); `on_start(url)` is called
        once it listens."""
        import signal

        def terminate(signum, frame):
            raise KeyboardInterrupt

        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, terminate)
        try:
            url = self.start()
            if on_start is not None:
                on_start(url)
            while self._thread.is_alive():
                self._thread.join(timeout=0.5)
        except KeyboardInterrupt:
            pass
        finally:
            self.stop()

    def start(self, timeout_s: float = 30.0) -> str:
        """Serves from a background thread; returns the base URL once it listens."""
        _check_port_free(self.options.host, self.options.port)
        if self.options.freeze_gc:
            gc.collect()
            gc.freeze()
        server = self._uvicorn()
        self._thread = threading.Thread(target=server.run, name="graphfit-serve", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start on {self.options.host}:"
                                   f"{self.options.port}")
            time.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://{self.options.host}:{port}"
        return self.url

    def stop(self) -> None:
        """Stops a server `start` started, and lets go of the model."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.close()

    def close(self) -> None:
        """Stops the version watcher and removes a run's temporary export."""
        self.model.close()
        self.executor.shutdown(wait=False)
        if self.temporary is not None:
            shutil.rmtree(self.temporary, ignore_errors=True)
