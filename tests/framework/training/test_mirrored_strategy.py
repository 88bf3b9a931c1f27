"""fit, evaluate and predict under tf.distribute.MirroredStrategy on 2 logical CPUs give the
same numbers as one device (float64, same global batches).

Logical devices must be set before TensorFlow initializes its devices, so every case runs in
one subprocess (`mirrored_equivalence_script.py`), which prints the differences as JSON; the
other two-CPU scripts run in the same process (fixture `two_cpu_results`, tests/conftest.py).
"""

from __future__ import annotations

import math
import pathlib

import pytest

from .script_results import script_results

TWO_CPU_SCRIPT = pathlib.Path(__file__).with_name("mirrored_equivalence_script.py")
TOLERANCE = 1e-6


@pytest.fixture(scope="module")
def results(two_cpu_results) -> dict:
    return script_results(TWO_CPU_SCRIPT, two_cpu_results)


def test_sgd_momentum_matches_one_device(results):
    case = results["sgd_momentum"]
    assert case["trained"] > 0.1  # the weights moved: the comparison is not vacuous
    assert case["weights"] < TOLERANCE and case["slots"] < TOLERANCE
    # loss and accuracy of training and validation, every epoch
    assert case["keys"] == ["accuracy", "loss", "val_accuracy", "val_loss"]
    assert case["logs"] < TOLERANCE


def test_adam_global_clipnorm_auc_evaluate_predict_checkpoint(results):
    case = results["adam_clipnorm"]
    assert case["weights"] < TOLERANCE and case["slots"] < TOLERANCE
    assert "val_auc" in case["keys"] and case["logs"] < TOLERANCE
    assert case["evaluate"] < TOLERANCE  # batches of 13 rows: 6 and 7 per replica
    assert case["predict_rows"] == 96 and case["predict"] < TOLERANCE
    assert case["predict_dataset"] < TOLERANCE and case["evaluate_dataset"] < TOLERANCE
    assert case["checkpoint"] < TOLERANCE  # written under the strategy, read on one device
    # restored outside the scope: the slots it builds are mirrored all the same
    assert case["restored_slot_kinds"] == ["MirroredVariable"] and case["restored_slots"] == 0


def test_batch_norm_moving_statistics(results):
    case = results["batch_norm"]
    assert case["moving_mean"] < 1e-12  # updated once, from the replicas' weighted mean
    assert case["variance_single"] < 1e-12
    assert case["variance_halves"] < 1e-12  # the mean of the replicas' variances
    assert case["variance_gap"] > 1e-3  # which is not the full batch's variance


def test_levenberg_marquardt_takes_the_same_steps(results):
    case = results["levenberg_marquardt"]
    assert case["steps"] == 8 and case["loss_drop"] > 2  # it trained
    assert case["damping_rises"] >= 1  # λ went up as well as down: trials were judged
    # JᵀJ, Jᵀr and the losses summed over the replicas: the same λ, ν and loss after every
    # step (λ compared as its logarithm), and the same weights (relative to their size).
    assert case["damping"] < TOLERANCE and case["growth"] == 0.0
    assert case["losses"] < TOLERANCE and case["mae"] < TOLERANCE
    assert case["weights"] < TOLERANCE
    assert case["chunked_weights"] < TOLERANCE  # with steps_per_execution=4 as well
    assert math.isfinite(case["empty_slice_loss"])  # a replica without rows adds nothing


def test_a_keras_seed_generator_moves_once_per_step(results):
    case = results["keras_seed_state"]
    assert case["state"] == [[3, 4]]  # [seed, counter]: 2 epochs of 2 steps
    assert math.isfinite(case["loss"])


def test_unsupported_setups_are_refused(results):
    messages = results["refusals"]
    assert "jit_compile=True" in messages["jit_compile"]
    assert "synchronized=False" in messages["lm_synchronized"]
    assert "created outside the scope" in messages["optimizer_outside"]
    assert "strategy.scope()" in messages["optimizer_outside"]
