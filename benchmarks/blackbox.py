"""`layers.BlackBox`: what its gradient estimators cost in calls to F, and what they buy.

Two tables:

1. The two-link arm (`graphfit.examples.two_link_arm`, default size): an inverse model
   learned by direct inverse learning, by the distal teacher through `BlackBox(F)` with each
   estimator, and through a differentiable twin of F (the true gradient). Per method: calls to
   F (one call evaluates a whole batch), wall time, mean end-effector error on held-out
   targets as a fraction of the reach (and on the targets with two solutions in range).
2. Estimator accuracy: on a smooth nonlinear map F: R^d -> R^3 with a known gradient,
   F(x) = tanh(x A) + 0.1 (x B)², the relative error ||ĝ - g|| / ||g|| of the gradient of
   sum(F(x)) estimated through a BlackBox (float64, sigma 1e-3), per estimator, number of
   samples and dimension d in (1, 10, 50); the calls column is the calls to F one estimate
   made (counted by `BlackBox.function_calls`, the forward call excluded). Medians over
   `--repeats` seeds, each over a batch of 32 points. Theory: central is exact up to
   O(sigma²) for 2d calls; spsa and antithetic cost 2n calls whatever d, with an error
   falling as 1/sqrt(n) and growing as sqrt(d). The surrogate rows teach it F first
   (`fit_surrogate`, 1, 4 or 16 passes over 4096 inputs drawn like x; F is called once per
   input, in 32 batches: its calls column) and then estimate with no call.

This is a benchmark, not a test: nothing here asserts.

    python benchmarks/blackbox.py [--repeats 5] [--skip-arm]
"""

from __future__ import annotations

import argparse
import os
import statistics

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from graphfit import layers  # noqa: E402
from graphfit.examples import two_link_arm  # noqa: E402

DIMENSIONS = (1, 10, 50)
SAMPLES = (1, 4, 16, 64)
SURROGATE_EPOCHS = (1, 4, 16)  # teaching passes over 4096 inputs before the estimate
OUTPUTS = 3
BATCH = 32


def smooth_map(d: int):
    """(NumPy F, TensorFlow twin of F) for F(x) = tanh(x A) + 0.1 (x B)², fixed A and B."""
    rng = np.random.default_rng(1234 + d)
    a = rng.normal(size=(d, OUTPUTS)) / np.sqrt(d)
    b = rng.normal(size=(d, OUTPUTS)) / np.sqrt(d)

    def numpy_map(x):
        return np.tanh(x @ a) + 0.1 * (x @ b) ** 2

    def tf_map(x):
        return tf.tanh(x @ a) + 0.1 * (x @ b) ** 2

    return numpy_map, tf_map


def _gradient(function, x: tf.Tensor) -> np.ndarray:
    with tf.GradientTape() as tape:
        tape.watch(x)
        total = tf.reduce_sum(function(x))
    return tape.gradient(total, x).numpy()


def estimate_error(d: int, estimator: str, samples: int, seed: int) -> tuple[float, int]:
    """(median over the batch of the relative gradient error, calls to F per estimate).

    For "surrogate", `samples` is the teaching epochs over 4096 inputs drawn like x (F called
    once per input, in 32 calls, counted as the estimate's calls); the estimate costs none."""
    numpy_map, tf_map = smooth_map(d)
    x = tf.constant(np.random.default_rng(seed).normal(size=(BATCH, d)))
    box = layers.BlackBox(numpy_map, output_shape=(OUTPUTS,), estimator=estimator,
                          num_samples=samples, sigma=1e-3, seed=seed, dtype="float64")
    if estimator == "surrogate":
        teaching = np.random.default_rng(seed + 1000).normal(size=(4096, d))
        box.fit_surrogate(teaching, epochs=samples, batch_size=128, seed=seed)
    estimate = _gradient(box, x)
    calls = box.function_calls - 1  # the forward call is not the estimator's
    true = _gradient(tf_map, x)
    errors = np.linalg.norm(estimate - true, axis=1) / np.linalg.norm(true, axis=1)
    return float(np.median(errors)), calls


def accuracy_table(repeats: int) -> str:
    lines = [f"{'estimator':<11} {'samples':>7} " + " ".join(
        f"{'d=' + str(d) + ' calls':>11} {'rel.err':>9}" for d in DIMENSIONS)]
    rows = [("central", 1)] + [(name, n) for name in ("spsa", "antithetic") for n in SAMPLES]
    rows += [("surrogate", epochs) for epochs in SURROGATE_EPOCHS]
    for estimator, samples in rows:
        cells = []
        for d in DIMENSIONS:
            runs = [estimate_error(d, estimator, samples, seed) for seed in range(repeats)]
            error = statistics.median(r[0] for r in runs)
            cells.append(f"{runs[0][1]:>11} {error:>9.2e}")
        shown = {"central": "2d", "surrogate": f"{samples} ep"}.get(estimator, str(samples))
        lines.append(f"{estimator:<11} {shown:>7} " + " ".join(cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="seeds per accuracy cell")
    parser.add_argument("--skip-arm", action="store_true", help="only the accuracy table")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be a positive integer; received {args.repeats}")
    if not args.skip_arm:
        arm_args = two_link_arm.parse_args([])
        print("1. Two-link arm: inverse model M: target -> angles "
              f"({arm_args.targets} training targets, {arm_args.test_targets} held out, "
              f"{arm_args.epochs} epochs, batch {arm_args.batch_size})")
        print(two_link_arm.format_table(two_link_arm.run_all(arm_args)))
        print()
    print(f"2. Estimator accuracy: relative error of the gradient vs calls to F per estimate "
          f"(median over {args.repeats} seeds x {BATCH} points; float64, sigma 1e-3)")
    print(accuracy_table(args.repeats))


if __name__ == "__main__":
    main()
