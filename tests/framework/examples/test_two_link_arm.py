"""The two-link-arm example at a small size: the distal teacher through a BlackBox learns the
inverse to within 1 % of the reach; direct inverse learning averages the two elbows."""

import math

from graphfit.examples import two_link_arm

TARGETS, BATCH, EPOCHS, SAMPLES = 1024, 64, 300, 4


def test_two_link_arm_distal_teacher_beats_direct_inverse():
    results = two_link_arm.main([
        "--targets", str(TARGETS), "--test-targets", "512", "--epochs", str(EPOCHS),
        "--batch-size", str(BATCH), "--num-samples", str(SAMPLES),
        "--estimators", "central", "spsa"])
    by_estimator = {r.estimator: r for r in results}
    direct = by_estimator["-"]
    distal = [by_estimator["central"], by_estimator["spsa"]]
    best = min(r.error for r in distal)
    assert best <= 0.01, results
    # Direct inverse misses: the average of elbow up and elbow down is neither.
    assert direct.error > 3 * best, results
    assert direct.error_two_solutions > 5 * best, results
    # The analytic reference agrees with the estimated gradients.
    assert by_estimator["analytic (TF twin)"].error <= 0.01
    assert by_estimator["analytic (TF twin)"].function_calls == 0
    # Every call to F is counted: one forward per step, plus 2·d (central) or 2·n (spsa).
    steps = EPOCHS * math.ceil(TARGETS / BATCH)
    assert by_estimator["central"].function_calls == steps * (1 + 2 * 2)
    assert by_estimator["spsa"].function_calls == steps * (1 + 2 * SAMPLES)
    assert direct.function_calls == 1
