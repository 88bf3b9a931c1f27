"""Fits the overflow model of test_loss_scale.py under MirroredStrategy on 2 logical CPUs, with
and without the overflowing batch, and prints `RESULT {json}` of what differs (run by
test_loss_scale.py in its own process: logical devices must be set before TensorFlow starts).
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))  # tests/
import two_cpus  # noqa: E402  (sets up 2 logical CPUs before TensorFlow starts)

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import test_loss_scale as cases  # noqa: E402

STRATEGY = two_cpus.STRATEGY


def _state(model):
    return [np.asarray(v.numpy()) for v in [*model.variables,
                                            *model.optimizer.inner_optimizer.variables]]


def main() -> None:
    with_bad, without = (cases.fitted(bad, STRATEGY) for bad in (True, False))
    differences = [float(np.max(np.abs(a - b))) for a, b in zip(_state(with_bad),
                                                                 _state(without))]
    print("RESULT " + json.dumps({
        "state": max(differences),
        "iterations": [int(m.optimizer.iterations.numpy()) for m in (with_bad, without)],
        "scales": [float(m.optimizer.loss_scale.numpy()) for m in (with_bad, without)],
        "moved": float(np.max(np.abs(with_bad.layers[2].moving_mean.numpy()))),
    }))


if __name__ == "__main__":
    main()
