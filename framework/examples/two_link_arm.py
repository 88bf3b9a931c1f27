"""Learning the inverse of a black box: a planar two-link arm, through `layers.BlackBox`.

The arm F(θ1, θ2) = (l1 cos θ1 + l2 cos(θ1+θ2), l1 sin θ1 + l2 sin(θ1+θ2)) is a NumPy
function whose gradient graphfit is not told. An MLP M learns the inverse, target (x, y) ->
angles θ, three ways, side by side:

(a) direct inverse learning: M is fitted to pairs (F(θ), θ) with MSE on θ. Most targets
    have two solutions (elbow up, elbow down) and both are in the data, so M learns their
    average, which misses the target;
(b) the distal teacher (Jordan & Rumelhart, 1992): M followed by `BlackBox(F)`, fitted on the
    end-effector error ||F(M(target)) - target||², with F's gradient estimated by each
    estimator ("central", "spsa", "antithetic", and "surrogate": a network fitted to F,
    taught over all angles in [-π, π]² first, then online); M settles on one solution
    per target;
(c) the same through a differentiable TensorFlow twin of F: the true gradient, the reference.

It prints, for each, the mean end-effector error on held-out targets as a fraction of the
reach l1 + l2 (overall, and on the targets whose two solutions both lie in the sampled range),
the calls to F (`BlackBox.function_calls` for (b); the calls that made the training pairs for
(a); none for (c)) and the wall time. F is vectorized, so one call evaluates a whole batch:
(a) makes all its pairs in one call; (b) calls F once per step forward plus 2·2 times
(central) or 2·num_samples times (spsa, antithetic) for the gradient; the surrogate needs
no call for the gradient, only its teaching calls before training. The first method's
wall time includes TensorFlow's warm-up.

    python -m graphfit.examples.two_link_arm [--targets 2048] [--epochs 300] [--seed 0]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

__all__ = ["ArmTask", "MethodResult", "arm", "arm_targets", "forward_kinematics", "inverse_mlp",
           "main", "run_all", "run_direct", "run_distal"]

ESTIMATORS = ("central", "spsa", "antithetic", "surrogate")
SURROGATE_EPOCHS = 20  # passes over the sampled angles that teach the surrogate F first
# Angles are sampled with θ1 in THETA1 and |θ2| in ELBOW, both signs of θ2: every target
# then has an elbow-up and an elbow-down solution, and many have both inside the range.
THETA1 = (0.0, math.pi / 2)
ELBOW = (0.3, 2.4)


@dataclasses.dataclass(frozen=True)
class ArmTask:
    """The arm's link lengths and the sampled range of its angles."""

    l1: float = 1.0
    l2: float = 0.8

    @property
    def reach(self) -> float:
        return self.l1 + self.l2

    def forward(self, theta: np.ndarray) -> np.ndarray:
        """F: angles (batch, 2) -> end-effector positions (batch, 2), in NumPy."""
        t1, t12 = theta[:, 0], theta[:, 0] + theta[:, 1]
        return np.stack([self.l1 * np.cos(t1) + self.l2 * np.cos(t12),
                         self.l1 * np.sin(t1) + self.l2 * np.sin(t12)], axis=1)

    def sample_angles(self, n: int, seed: int) -> np.ndarray:
        """n angle pairs: θ1 uniform in THETA1, |θ2| uniform in ELBOW, a random sign."""
        rng = np.random.default_rng(seed)
        t1 = rng.uniform(*THETA1, size=n)
        t2 = rng.uniform(*ELBOW, size=n) * rng.choice([-1.0, 1.0], size=n)
        return np.stack([t1, t2], axis=1)

    def other_solution(self, theta: np.ndarray) -> np.ndarray:
        """The mirror solution (elbow flipped) reaching the same point as `theta`."""
        t2 = theta[:, 1]
        shift = 2.0 * np.arctan2(self.l2 * np.sin(t2), self.l1 + self.l2 * np.cos(t2))
        return np.stack([theta[:, 0] + shift, -t2], axis=1)

    def in_range(self, theta: np.ndarray) -> np.ndarray:
        """Whether each angle pair lies in the sampled range."""
        size = np.abs(theta[:, 1])
        return ((theta[:, 0] >= THETA1[0]) & (theta[:, 0] <= THETA1[1])
                & (size >= ELBOW[0]) & (size <= ELBOW[1]))


def arm(task: ArmTask):
    """F as a plain NumPy function of a batch, float32 out (what `BlackBox` calls)."""
    def two_link_arm(theta):
        return task.forward(np.asarray(theta, np.float64)).astype(np.float32)
    return two_link_arm


def forward_kinematics(theta) -> np.ndarray:
    """F of the default arm (l1 = 1, l2 = 0.8): angles (batch, 2) -> positions (batch, 2).

    A module-level function, so a recipe can name it:
    `{type: BlackBox, function: graphfit.examples.two_link_arm:forward_kinematics, ...}`.

    Example:

        >>> import numpy as np
        >>> forward_kinematics(np.array([[0.0, np.pi / 2]])).round(4)
        array([[1. , 0.8]], dtype=float32)
    """
    return arm(ArmTask())(theta)


def arm_targets(n_samples: int = 2048, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Reachable targets of the default arm, as (x, y) = (targets, targets): the data of the
    distal teacher, whose labels are the targets its end effector must reach.

    The angles behind them are drawn as in the example (`ArmTask.sample_angles`), so both
    elbows occur. A recipe names it as its data source:
    `data: {source: function, function: graphfit.examples.two_link_arm:arm_targets}`.

    Args:
        n_samples: how many targets.
        seed: the seed of the angles drawn.

    Example:

        >>> x, y = arm_targets(3, seed=0)
        >>> x.shape, x.dtype, bool((x == y).all())
        ((3, 2), dtype('float32'), True)
    """
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) \
            or n_samples < 1:
        raise ValueError(f"arm_targets: n_samples must be a positive integer; received "
                         f"n_samples={n_samples!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"arm_targets: seed must be an integer; received seed={seed!r}")
    task = ArmTask()
    targets = task.forward(task.sample_angles(int(n_samples), int(seed))).astype(np.float32)
    return targets, targets.copy()


def _twin_layer(task: ArmTask):
    """F written in TensorFlow ops: the same map with its true gradient, for (c)."""
    import tensorflow as tf

    import graphfit as gf

    class ArmTwin(gf.Layer):
        def call(self, theta, training=False):
            t1, t12 = theta[:, 0], theta[:, 0] + theta[:, 1]
            return tf.stack([task.l1 * tf.cos(t1) + task.l2 * tf.cos(t12),
                             task.l1 * tf.sin(t1) + task.l2 * tf.sin(t12)], axis=1)

    return ArmTwin(name="arm_twin")


def inverse_mlp(width: int, start=(0.8, 1.2)):
    """M: target (x, y) -> θ, a tanh MLP whose output starts near the angles `start`.

    Starting M at one elbow (θ2 > 0) matters for the distal teacher: at θ2 = 0 the arm is
    stretched out and the gradient cannot tell elbow up from down, so M would pick per region
    and leave a seam of large errors between them."""
    import keras

    from graphfit import layers

    return [layers.Dense(width, activation="tanh"), layers.Dense(width, activation="tanh"),
            layers.Dense(2, kernel_initializer=keras.initializers.GlorotUniform(),
                         bias_initializer=keras.initializers.Constant(list(start)))]


@dataclasses.dataclass
class MethodResult:
    """One row of the table: errors are fractions of the reach."""

    method: str
    estimator: str
    function_calls: int
    seconds: float
    error: float
    error_two_solutions: float


def _errors(task: ArmTask, reached: np.ndarray, targets: np.ndarray, both: np.ndarray):
    distance = np.linalg.norm(reached - targets, axis=1) / task.reach
    return float(distance.mean()), float(distance[both].mean())


def _fit(model, targets, labels, args, learning_rate):
    import keras

    import graphfit as gf
    from graphfit import optimizers

    gf.set_seed(args.seed)
    # Cosine decay to 1 %: a large step finds the solution, a small one polishes it (the
    # last fraction of a percent of reach is what a constant step cannot reach).
    steps = args.epochs * math.ceil(len(targets) / args.batch_size)
    schedule = keras.optimizers.schedules.CosineDecay(learning_rate, steps, alpha=0.01)
    model.compile(optimizer=optimizers.Adam(schedule), loss="mse")
    model.fit(targets, labels, batch_size=args.batch_size, epochs=args.epochs, verbose=0)


def run_direct(task, train_angles, test, args) -> MethodResult:
    """(a): fit M on pairs (F(θ), θ); one F call made the pairs (vectorized)."""
    import graphfit as gf

    test_targets, both = test
    start = time.perf_counter()
    gf.set_seed(args.seed)
    pairs = arm(task)(train_angles)
    model = gf.Sequential(inverse_mlp(args.width))
    _fit(model, pairs, train_angles.astype(np.float32), args, args.learning_rate)
    reached = task.forward(model.predict(test_targets, verbose=0))
    seconds = time.perf_counter() - start
    return MethodResult("direct inverse", "-", 1, seconds,
                        *_errors(task, reached, test_targets, both))


def run_distal(task, train_targets, test, args, estimator: str | None) -> MethodResult:
    """(b) with `estimator`, or (c) through the TF twin when `estimator` is None."""
    import graphfit as gf
    from graphfit import layers

    test_targets, both = test
    start = time.perf_counter()
    gf.set_seed(args.seed)
    if estimator is None:
        plant = _twin_layer(task)
    else:
        plant = layers.BlackBox(arm(task), output_shape=(2,), estimator=estimator,
                                num_samples=args.num_samples, sigma=args.sigma, seed=args.seed,
                                name="arm")
    if estimator == "surrogate":
        # Teach the surrogate F over the arm's range of angles first (its calls counted):
        # learnt online only, from M's first guesses, its gradient can lead M astray.
        angles = np.random.default_rng(args.seed + 1).uniform(-np.pi, np.pi, (args.targets, 2))
        plant.fit_surrogate(angles, epochs=SURROGATE_EPOCHS, batch_size=args.batch_size,
                            seed=args.seed)
    inverse = inverse_mlp(args.width)
    model = gf.Sequential(inverse + [plant])
    _fit(model, train_targets, train_targets, args, args.learning_rate)
    calls = plant.function_calls if estimator is not None else 0
    # Score M itself: F(M(target)) in NumPy, so scoring adds no calls to the count.
    angles = test_targets
    for layer in inverse:
        angles = layer(angles)
    seconds = time.perf_counter() - start
    reached = task.forward(np.asarray(angles))
    return MethodResult("distal teacher", estimator or "analytic (TF twin)", calls, seconds,
                        *_errors(task, reached, test_targets, both))


def run_all(args) -> list[MethodResult]:
    """All methods on one seeded task: (a), (b) per estimator, (c)."""
    task = ArmTask()
    train_angles = task.sample_angles(args.targets, args.seed)
    train_targets = task.forward(train_angles).astype(np.float32)
    test_angles = task.sample_angles(args.test_targets, args.seed + 1)
    test_targets = task.forward(test_angles).astype(np.float32)
    both = task.in_range(task.other_solution(test_angles))
    test = (test_targets, both)
    results = [run_direct(task, train_angles, test, args)]
    results += [run_distal(task, train_targets, test, args, name) for name in args.estimators]
    results.append(run_distal(task, train_targets, test, args, None))
    return results


def format_table(results: list[MethodResult]) -> str:
    lines = [f"{'method':<16} {'estimator':<20} {'F calls':>9} {'wall s':>7} "
             f"{'error/reach':>12} {'(2-solution)':>13}"]
    for r in results:
        lines.append(f"{r.method:<16} {r.estimator:<20} {r.function_calls:>9} "
                     f"{r.seconds:>7.1f} {r.error:>12.2%} {r.error_two_solutions:>13.2%}")
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=2048, help="training targets")
    parser.add_argument("--test-targets", type=int, default=1024, help="held-out targets")
    parser.add_argument("--epochs", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--width", type=int, default=64, help="hidden units of M")
    parser.add_argument("--learning-rate", type=float, default=2e-2)
    parser.add_argument("--num-samples", type=int, default=4,
                        help="directions per example and step (spsa, antithetic)")
    parser.add_argument("--sigma", type=float, default=1e-3, help="perturbation, radians")
    parser.add_argument("--estimators", nargs="+", choices=ESTIMATORS, default=list(ESTIMATORS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for name in ("targets", "test_targets", "epochs", "batch_size", "width", "num_samples"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be a positive integer; "
                         f"received {getattr(args, name)}")
    if args.sigma <= 0 or args.learning_rate <= 0:
        parser.error("--sigma and --learning-rate must be positive")
    return args


def main(argv: list[str] | None = None) -> list[MethodResult]:
    args = parse_args(argv)
    results = run_all(args)
    print(f"two-link arm, l1={ArmTask().l1}, l2={ArmTask().l2}: {args.targets} training "
          f"targets, {args.test_targets} held out, {args.epochs} epochs")
    print(format_table(results))
    return results


if __name__ == "__main__":
    main()
