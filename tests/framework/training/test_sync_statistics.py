"""Update hooks under tf.distribute.MirroredStrategy on 2 logical CPUs: synchronized batch
normalization and ClassMeans' per-class sums give the same numbers as one device (float64,
the same global batches, an uneven last batch included).

Logical devices must be set before TensorFlow initializes its devices, so every case runs in
one subprocess (`sync_statistics_script.py`), which prints the differences as JSON; the
other two-CPU scripts run in the same process (fixture `two_cpu_results`, tests/conftest.py).
"""

from __future__ import annotations

import pathlib

import pytest

from .script_results import script_results

TWO_CPU_SCRIPT = pathlib.Path(__file__).with_name("sync_statistics_script.py")


@pytest.fixture(scope="module")
def results(two_cpu_results) -> dict:
    return script_results(TWO_CPU_SCRIPT, two_cpu_results)


def test_synchronized_batch_norm_matches_one_device(results):
    case = results["batch_norm"]
    assert case["trained"] > 0.1  # the weights moved: the comparison is not vacuous
    assert case["weights"] < 1e-6  # SGD with momentum, plain and renorm layers
    for name, difference in case["statistics"].items():
        assert difference < 1e-6, name
    # Per-replica statistics (synchronized=False) train differently on the same batches.
    assert case["unsynced"] > 1e-3
    assert case["flag"] == [True, True]


def test_class_means_sums_counts_and_spread_match_one_device(results):
    case = results["class_means"]
    assert case["counts"] == case["expected_counts"]  # int64 counts added up, not averaged
    assert case["means"] < 1e-9 and case["weights"] < 1e-9
    assert case["spread"] > 1.0 and case["spread_total"] < 1e-9


def test_reduce_over_replicas_combines_per_class_sums(results):
    """Replica 0 sees class 0 twice (1, 3), replica 1 class 1 once (5): every replica gets
    the global means (class 1 not halved), counts and spread."""
    case = results["reduce_over_replicas"]
    assert case["means"] == [[[2.0], [5.0]]] * 2
    assert case["counts"] == [[2, 1]] * 2
    assert case["spread"] == [2.0, 2.0]  # (1 - 2)^2 + (3 - 2)^2 + (5 - 5)^2
