"""Trains small float64 models with synchronized BatchNormalization and with ClassMeans on one
device and under MirroredStrategy on 2 logical CPUs, on the same global batches, and prints JSON
of what differs (run by test_sync_statistics.py in its own process: logical devices must be
configured before TensorFlow starts).

61 rows in batches of 16: the last batch has 13 rows, split 6 and 7, so the replicas' shares
are uneven there.
"""

from __future__ import annotations

import json
import pathlib
import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))  # tests/
import two_cpus  # noqa: E402  (sets up 2 logical CPUs before TensorFlow starts)

STRATEGY = two_cpus.STRATEGY

import keras  # noqa: E402

import graphfit as gf  # noqa: E402
from graphfit import layers, optimizers  # noqa: E402
from graphfit.core import update_hooks  # noqa: E402

RNG = np.random.default_rng(0)
X = RNG.normal(size=(61, 5)) * 2.0 + 1.0
Y = np.sin(X[:, :1]) + X[:, 1:2] ** 2
# Class 2 first appears in rows 24..31: the second replica's half of the second batch only.
LABELS = np.where(np.arange(61) < 24, np.arange(61) % 2, RNG.integers(0, 3, size=61))
LABELS[24:32] = 2


def _diff(a, b) -> float:
    return max(float(np.max(np.abs(np.asarray(u, np.float64) - np.asarray(v, np.float64))))
               if np.size(u) else 0.0 for u, v in zip(a, b))


def _bn_model(synchronized: bool):
    keras.utils.set_random_seed(3)
    model = gf.Sequential([
        layers.Dense(8, activation="tanh"),
        layers.BatchNormalization(momentum=0.8, synchronized=synchronized),
        layers.Dense(6, activation="tanh"),
        layers.BatchNormalization(momentum=0.7, renorm=True, renorm_momentum=0.6,
                                  renorm_clipping={"rmax": 1.5, "rmin": 0.5, "dmax": 0.5},
                                  synchronized=synchronized),
        layers.Dense(1)], dtype="float64")
    model.build_for(tf.TensorSpec([None, 5], tf.float64), "x")
    model.compile(optimizer=optimizers.SGD(0.05, momentum=0.9), loss="mse",
                  steps_per_execution=3)
    return model


def _fit(model, y):
    model.fit(X, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    return model


def batch_norm() -> dict:
    single = _fit(_bn_model(True), Y)
    with STRATEGY.scope():
        synced = _fit(_bn_model(True), Y)
        unsynced = _fit(_bn_model(False), Y)
    bns = [[layer for layer in m.layers if isinstance(layer, layers.BatchNormalization)]
           for m in (single, synced)]
    statistics = ("moving_mean", "moving_variance", "moving_stddev", "renorm_mean",
                  "renorm_stddev")
    return {
        "weights": _diff(single.get_weights(), synced.get_weights()),
        "statistics": {name: _diff(*[[getattr(bn, name) for bn in group if hasattr(bn, name)]
                                     for group in bns]) for name in statistics},
        "trained": _diff(single.get_weights(), _bn_model(True).get_weights()),
        "unsynced": _diff(single.get_weights(), unsynced.get_weights()),
        "flag": [bn.synchronizes_replicas for bn in bns[1]],
    }


def _class_means_model():
    keras.utils.set_random_seed(4)
    model = gf.Sequential([layers.Dense(4, activation="tanh"),
                           layers.ClassMeans(3, momentum=0.7, name="centers"),
                           layers.Dense(3)], dtype="float64")
    model.build_for(tf.TensorSpec([None, 5], tf.float64), "x")
    model.compile(optimizer=optimizers.SGD(0.1, momentum=0.9),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=2)
    return model


def class_means() -> dict:
    single = _fit(_class_means_model(), LABELS)
    with STRATEGY.scope():
        mirrored = _fit(_class_means_model(), LABELS)
    ours, theirs = single.layers[1], mirrored.layers[1]
    return {
        "means": _diff([ours.means], [theirs.means]),
        "counts": theirs.counts.numpy().tolist(),
        "expected_counts": (np.bincount(LABELS, minlength=3) * 2).tolist(),
        "spread_total": abs(float(ours.spread_total.numpy() - theirs.spread_total.numpy())),
        "spread": float(ours.spread_total.numpy()),
        "weights": _diff(single.get_weights(), mirrored.get_weights()),
    }


def reduce_over_replicas() -> dict:
    """The hooks `reduce_over_replicas` returns: replicated, the same on both replicas."""
    with STRATEGY.scope():
        layer = layers.ClassMeans(2, momentum=0.5, dtype="float64")
        layer.build(tf.TensorShape([None, 1]))

    @tf.function
    def step():
        def replica(x, y):
            with update_hooks.collect_updates() as pending:
                layer(x, training=True, labels=y)
            share = tf.constant(0.5, tf.float64)
            updates = update_hooks.reduce_over_replicas(pending, share)
            assert all(u.hook.replicated and u.hook.sums is None for u in updates)
            return [u.value for u in updates]

        def values(context):
            r = context.replica_id_in_sync_group
            # replica 0: class 0 twice; replica 1: class 1 once
            x = tf.constant([[[1.0], [3.0]], [[5.0], [7.0]]], tf.float64)[r][:2 - r]
            y = tf.constant([[0, 0], [1, 1]])[r][:2 - r]
            return x, y

        inputs = STRATEGY.experimental_distribute_values_from_function(values)
        return STRATEGY.run(replica, args=inputs)

    results = step()
    local = [[t.numpy().tolist() for t in STRATEGY.experimental_local_results(v)]
             for v in results]
    return {"means": local[0], "counts": local[1], "spread": local[2]}


if __name__ == "__main__":
    cases = sys.argv[1:] or ["batch_norm", "class_means", "reduce_over_replicas"]
    print("RESULT " + json.dumps({name: globals()[name]() for name in cases}))
