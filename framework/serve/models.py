"""The served model: its loaded versions, and the newer version folders it picks up.

A source is a SavedModel folder (one version, served as version 1), or a model base folder in
TensorFlow Serving's layout (`BASE/<version>/saved_model.pb`, as `graphfit export
--serving-dir` writes it): the highest version is served, and a newer version folder that
appears later is loaded, warmed with its `assets.extra` warm-up requests and then swapped in
(write it elsewhere and move it into place, as `graphfit export --serving-dir` does; a folder
that fails to load, half copied, is tried again at the next polls, `RETRIES` times).
A request runs on the version it started with, so none is dropped by the swap; a version that
fails to load is reported in the model's status and the previous one keeps serving.
"""

from __future__ import annotations

import gc
import os
import threading

import numpy as np
import tensorflow as tf

from graphfit.datasets.graph_set import INDEX_KEYS
from graphfit.export.serving import missing_allowed
from graphfit.export.serving_layout import read_warmup, versions

__all__ = ["ModelVersion", "ServedModel", "find_source", "RETRIES"]

RETRIES = 3  # loads of a new version that fails before it is left alone


def find_source(path: str) -> tuple[str, str | None]:
    """(SavedModel folder or model base folder, kind "saved_model" | "base").

    Raises:
        ValueError: `path` is neither.
    """
    path = os.path.abspath(path)
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        return path, "saved_model"
    if versions(path):
        return path, "base"
    raise ValueError(f"{path} is neither a SavedModel (no saved_model.pb) nor a model folder "
                     f"with numbered version folders (BASE/1/saved_model.pb, as graphfit "
                     f"export --serving-dir writes them)")


class ModelVersion:
    """One loaded SavedModel version: its signatures, input specs and column names."""

    def __init__(self, path: str, version: int):
        self.path = path
        self.version = version
        self.loaded = tf.saved_model.load(path)
        self.signatures = dict(self.loaded.signatures)
        names = getattr(self.loaded, "feature_names", None)
        self.feature_names = [] if names is None else [
            n.decode() for n in names.numpy().tolist()]
        self.specs = {name: signature.structured_input_signature[1]
                      for name, signature in self.signatures.items()}
        self.missing_allowed = missing_allowed(self.loaded)  # a table's export fills gaps
        # A graph batch's index inputs number nodes and graphs within one request: requests
        # cannot be concatenated, so such a signature runs request by request.
        self.batchable = {name: not set(specs) & set(INDEX_KEYS)
                          for name, specs in self.specs.items()}

    def run(self, signature: str, arrays: dict) -> dict[str, np.ndarray]:
        """{output: array} of one signature call on NumPy inputs."""
        outputs = self.signatures[signature](**{k: tf.constant(v) for k, v in arrays.items()})
        return {key: value.numpy() for key, value in outputs.items()}

    def warm(self) -> int:
        """Replays the SavedModel's warm-up requests (or none); returns how many."""
        requests = read_warmup(self.path)
        for inputs in requests:
            self.run("serving_default", inputs)
        return len(requests)


class ServedModel:
    """A model name and its current version, reloaded when a newer version folder appears."""

    def __init__(self, name: str, path: str, freeze_gc: bool = False):
        self.name = name
        self.freeze_gc = freeze_gc
        self.path, self.kind = find_source(path)
        self.states: dict[int, dict] = {}
        self.reloads = 0
        self.failures: dict[int, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None
        version = versions(self.path)[-1] if self.kind == "base" else 1
        self.current = self._load(version)
        if self.current is None:
            raise ValueError(f"cannot load {self._folder(version)}: "
                             f"{self.states[version]['error']}")

    def _folder(self, version: int) -> str:
        return self.path if self.kind == "saved_model" else os.path.join(self.path,
                                                                         str(version))

    def _load(self, version: int) -> ModelVersion | None:
        self.states[version] = {"state": "LOADING", "error": ""}
        try:
            loaded = ModelVersion(self._folder(version), version)
            loaded.warm()
        except Exception as error:  # a broken version is reported; the old one keeps serving
            self.states[version] = {"state": "END", "error": f"{type(error).__name__}: {error}"}
            return None
        self.states[version] = {"state": "AVAILABLE", "error": ""}
        return loaded

    def poll(self) -> bool:
        """Loads and swaps in a newer complete version folder; True when it did."""
        if self.kind != "base":
            return False
        with self._lock:
            newest = max(versions(self.path), default=0)
            if newest <= self.current.version or self.failures.get(newest, 0) >= RETRIES:
                return False
            loaded = self._load(newest)
            if loaded is None:  # (a folder still being copied): tried again, RETRIES times
                self.failures[newest] = self.failures.get(newest, 0) + 1
                return False
            previous, self.current = self.current, loaded  # requests in flight keep theirs
            if self.freeze_gc:  # the new version's objects too (see ServeOptions.freeze_gc)
                gc.collect()
                gc.freeze()
            self.states[previous.version] = {"state": "END", "error": ""}
            self.reloads += 1
            return True

    def watch(self, every_s: float) -> None:
        """Polls for new versions every `every_s` seconds in a background thread."""
        if self.kind != "base" or every_s <= 0 or self._thread is not None:
            return

        def loop():
            while not self._stop.wait(every_s):
                self.poll()

        self._thread = threading.Thread(target=loop, name=f"watch-{self.name}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stops the watcher."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def status(self, version: int | None = None) -> dict:
        """TF Serving's `GET /v1/models/NAME` answer (newest version first)."""
        shown = sorted(self.states, reverse=True)
        if version is not None:
            if version not in self.states:
                raise KeyError(version)
            shown = [version]
        return {"model_version_status": [
            {"version": str(v), "state": self.states[v]["state"],
             "status": {"error_code": "OK" if not self.states[v]["error"] else "UNKNOWN",
                        "error_message": self.states[v]["error"]}} for v in shown]}

    def metadata(self) -> dict:
        """TF Serving's `GET /v1/models/NAME/metadata` answer: the signature defs."""
        current = self.current
        signatures = {}
        for name, signature in current.signatures.items():
            signatures[name] = {
                "inputs": {k: _tensor_info(s) for k, s in current.specs[name].items()},
                "outputs": {k: _tensor_info(s)
                            for k, s in signature.structured_outputs.items()},
                "method_name": "tensorflow/serving/predict"}
        return {"model_spec": {"name": self.name, "signature_name": "",
                               "version": str(current.version)},
                "metadata": {"signature_def": {"signature_def": signatures},
                             "feature_names": current.feature_names}}


def _tensor_info(spec) -> dict:
    dims = [{"size": str(-1 if d is None else d), "name": ""} for d in spec.shape.as_list()]
    from tensorflow.core.framework import types_pb2

    return {"dtype": types_pb2.DataType.Name(spec.dtype.as_datatype_enum),
            "tensor_shape": {"dim": dims, "unknown_rank": False},
            "name": spec.name or ""}
