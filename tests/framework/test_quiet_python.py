"""Quiet in Python too: `import graphfit` and a `fit` from Python print nothing of graphfit's
own making, and nothing twice.

Each case runs in a fresh process without `TF_CPP_MIN_LOG_LEVEL` (a Python user does not set
it; the suite's conftest does), so TensorFlow and XLA log everything they would. What
TensorFlow prints of its own (its start-up lines, XLA's "Compiled cluster") is measured in
a process that runs the same kind of fit in Keras under XLA: graphfit's `fit` process may
print those lines and no other (XLA's "Ignoring Assert operator" from a layer's batch
check, a warning of graphfit's), none more often than Keras's fit prints it.
"""

from __future__ import annotations

import os
import re
import sys
from collections import Counter

import pytest

from ..side_by_side import run_side_by_side

# What a Keras user sees of TensorFlow: the same kind of fit, under XLA.
KERAS_FIT = """
import numpy as np
import keras

x, y = np.ones((64, 4), "float32"), np.zeros((64,), "int32")
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", jit_compile=True)
model.fit(x, y, epochs=2, batch_size=8, verbose=0, validation_data=(x[:16], y[:16]))
model.predict(x, verbose=0)
print("done")
"""

IMPORT_ONLY = """
import graphfit
print("tensorflow imported" if "tensorflow" in __import__("sys").modules else "lazy")
"""

# Layers with batch checks (Embedding's ids, ClassMeans's labels) under XLA, fit with
# validation, evaluate and predict, over arrays and over a dataset.
FIT = """
import numpy as np
import tensorflow as tf
import graphfit as gf
from graphfit import layers

rng = np.random.default_rng(0)
ids = rng.integers(0, 10, size=(64, 4))
labels = rng.integers(0, 3, size=(64,))
model = gf.Sequential([layers.Embedding(10, 3), layers.Flatten(), layers.Dense(4),
                       layers.ClassMeans(3, center_loss_weight=0.1),
                       layers.Dense(3, activation="softmax")],
                      input_shape=(4,))
model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", metrics=["accuracy"],
              jit_compile=True)
model.fit(ids, labels, epochs=2, batch_size=8, verbose=0, validation_data=(ids[:16], labels[:16]))
model.evaluate(ids, labels, verbose=0)
model.predict(ids, verbose=0)
batches = tf.data.Dataset.from_tensor_slices((ids, labels)).batch(8)
model.fit(batches, epochs=1, verbose=0)
model.predict(batches.map(lambda x, y: x), verbose=0)
print("done")
"""


def _normalized(line: str) -> str:
    """A log line without what changes between processes: absl's time and thread prefix,
    addresses, numbers."""
    line = re.sub(r"^[IWEF]\d{4} [\d:.]+\s+\d+ ", "", line)
    line = re.sub(r"0x[0-9a-f]+", "0x", line)
    return re.sub(r"\d+", "N", line).strip()


def _lines(text: str) -> list[str]:
    return [_normalized(line) for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def runs() -> dict:
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    return run_side_by_side({
        name: ([sys.executable, "-c", code], {"env": environment})
        for name, code in (("keras", KERAS_FIT), ("import", IMPORT_ONLY),
                           ("fit", FIT))})


def test_import_graphfit_prints_nothing_and_starts_no_tensorflow(runs):
    result = runs["import"]
    assert result.returncode == 0, result.stderr
    assert (result.stdout, result.stderr) == ("lazy\n", "")


def test_fit_from_python_prints_only_tensorflows_own_lines_once(runs):
    baseline, result = runs["keras"], runs["fit"]
    assert baseline.returncode == 0 and result.returncode == 0, result.stderr
    assert result.stdout == "done\n"
    lines = _lines(result.stderr)
    # More often than Keras prints it (TensorFlow itself prints its start-up lines twice).
    extra = Counter(lines) - Counter(_lines(baseline.stderr))
    assert not extra, f"graphfit printed {sorted(extra)}:\n" + result.stderr
