"""Synthetic data sets: small 2-D classification toys, a 1-D regression curve and noisy-sine
forecasting windows (sequences).

Every generator is a pure function of its arguments: the same `seed` gives the same arrays, and
all randomness comes from one `np.random.default_rng(seed)`. Classification generators return
x as float32 of shape (n, features) and y as int32 labels of shape (n,); regression generators
return float32 x and float32 y of shape (n, 1); the sequence generator's x has shape
(n, steps, 1). `graphfit.datasets` re-exports them.

Example:

    >>> import graphfit as gf
    >>> x, y = gf.datasets.make_moons(n_samples=100, noise=0.1, seed=0)
    >>> x.shape, x.dtype, y.shape, y.dtype
    ((100, 2), dtype('float32'), (100,), dtype('int32'))
"""

from __future__ import annotations

import numpy as np

from graphfit.core import validation

__all__ = ["make_moons", "make_spirals", "make_blobs", "make_sinc", "make_sine_sequences"]


def _check_range(low_name: str, low, high_name: str, high) -> tuple[float, float]:
    if not validation.finite_number(low_name, low) < validation.finite_number(high_name, high):
        raise ValueError(
            f"{low_name} must be less than {high_name}. "
            f"Received: {low_name}={low!r}, {high_name}={high!r}"
        )
    return float(low), float(high)


def _shuffled(rng: np.random.Generator, x: np.ndarray, y: np.ndarray):
    order = rng.permutation(len(x))
    return x[order], y[order]


def _split_evenly(n_samples: int, parts: int) -> np.ndarray:
    """Sizes of `parts` groups that add up to `n_samples` and differ by at most one."""
    return np.full(parts, n_samples // parts) + (np.arange(parts) < n_samples % parts)


def make_moons(n_samples: int = 500, noise: float = 0.1,
               seed: int | None = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaving half circles (the construction of scikit-learn's `make_moons`).

    Class 0 is the upper half of the unit circle, (cos t, sin t) for t in [0, pi]; class 1 is
    the lower half circle (1 - cos t, 0.5 - sin t), shifted so the two interleave. Class 0 gets
    `n_samples // 2` points, class 1 the rest, evenly spaced in t; then the points are shuffled
    and Gaussian noise is added.

    Args:
        n_samples: number of points in all.
        noise: standard deviation of the Gaussian noise added to each coordinate (0 for none).
        seed: seed of `np.random.default_rng` (None: fresh randomness).

    Returns:
        (x, y): x float32 of shape (n_samples, 2), y int32 of shape (n_samples,) in {0, 1}.

    Raises:
        ValueError: if `n_samples` is not a positive integer or `noise` is negative.

    Example:

        >>> x, y = make_moons(n_samples=7, noise=0.0)
        >>> x.shape, sorted(y.tolist())
        ((7, 2), [0, 0, 0, 1, 1, 1, 1])
    """
    n_samples = validation.positive_int("n_samples", n_samples)
    noise = validation.finite_number("noise", noise, minimum=0)
    rng = np.random.default_rng(seed)
    n_out = n_samples // 2
    n_in = n_samples - n_out
    t_out = np.linspace(0.0, np.pi, n_out)
    t_in = np.linspace(0.0, np.pi, n_in)
    x = np.concatenate([
        np.stack([np.cos(t_out), np.sin(t_out)], axis=1),
        np.stack([1.0 - np.cos(t_in), 1.0 - np.sin(t_in) - 0.5], axis=1),
    ])
    y = np.concatenate([np.zeros(n_out, np.int32), np.ones(n_in, np.int32)])
    x, y = _shuffled(rng, x, y)
    if noise > 0:
        x = x + rng.normal(scale=noise, size=x.shape)
    return x.astype(np.float32), y


def make_spirals(n_samples: int = 600, classes: int = 2, turns: float = 1.5, noise: float = 0.1,
                 seed: int | None = 0) -> tuple[np.ndarray, np.ndarray]:
    """Interleaved Archimedean spirals, one arm per class.

    Arm k is r = t, angle = 2 pi (turns t + k / classes) for t in (0, 1], with its points evenly
    spaced in t: the arms share the center and are rotated by a full turn / classes from each
    other, so neighbouring arms are 1 / (turns * classes) apart along a ray. The classes differ
    in size by at most one point. Points are shuffled, then Gaussian noise is added.

    Args:
        n_samples: number of points in all.
        classes: number of arms (and classes), at least 2.
        turns: how many times each arm winds around the center (> 0).
        noise: standard deviation of the Gaussian noise added to each coordinate (0 for none).
        seed: seed of `np.random.default_rng` (None: fresh randomness).

    Returns:
        (x, y): x float32 of shape (n_samples, 2) within radius 1 (plus noise), y int32 of
        shape (n_samples,) in 0..classes-1.

    Raises:
        ValueError: on a non-positive `n_samples`, `classes` < 2, `turns` <= 0 or negative
            `noise`.

    Example:

        >>> x, y = make_spirals(n_samples=9, classes=3, noise=0.0)
        >>> x.shape, np.bincount(y).tolist()
        ((9, 2), [3, 3, 3])
    """
    n_samples = validation.positive_int("n_samples", n_samples)
    classes = validation.int_at_least("classes", classes, 2)
    turns = validation.finite_number("turns", turns, minimum=0, exclusive=True)
    noise = validation.finite_number("noise", noise, minimum=0)
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for k, size in enumerate(_split_evenly(n_samples, classes)):
        # t starts above 0 so the arms do not all share the point at the origin.
        t = np.arange(1, size + 1) / max(size, 1)
        angle = 2.0 * np.pi * (turns * t + k / classes)
        xs.append(np.stack([t * np.cos(angle), t * np.sin(angle)], axis=1))
        ys.append(np.full(size, k, np.int32))
    x, y = _shuffled(rng, np.concatenate(xs), np.concatenate(ys))
    if noise > 0:
        x = x + rng.normal(scale=noise, size=x.shape)
    return x.astype(np.float32), y


def make_blobs(n_samples: int = 500, centers: int = 3, features: int = 2,
               cluster_std: float = 1.0, center_box: tuple[float, float] = (-8.0, 8.0),
               seed: int | None = 0) -> tuple[np.ndarray, np.ndarray]:
    """Isotropic Gaussian blobs, one per class.

    The centers are drawn uniformly from the box `center_box` in every coordinate; the points
    are split evenly among them (sizes differ by at most one), drawn from a normal distribution
    of standard deviation `cluster_std` around their center, and shuffled.

    Args:
        n_samples: number of points in all.
        centers: number of blobs (and classes).
        features: dimension of each point.
        cluster_std: standard deviation of each blob (0 puts every point on its center).
        center_box: (low, high) bounds of the center coordinates, low < high.
        seed: seed of `np.random.default_rng` (None: fresh randomness).

    Returns:
        (x, y): x float32 of shape (n_samples, features), y int32 of shape (n_samples,) in
        0..centers-1.

    Raises:
        ValueError: on a non-positive `n_samples`, `centers` or `features`, a negative
            `cluster_std`, or a `center_box` that is not (low, high) with low < high.

    Example:

        >>> x, y = make_blobs(n_samples=10, centers=2, features=3)
        >>> x.shape, x.dtype, np.bincount(y).tolist()
        ((10, 3), dtype('float32'), [5, 5])
    """
    n_samples = validation.positive_int("n_samples", n_samples)
    centers = validation.positive_int("centers", centers)
    features = validation.positive_int("features", features)
    cluster_std = validation.finite_number("cluster_std", cluster_std, minimum=0)
    if isinstance(center_box, (str, bytes)) or np.ndim(center_box) != 1 or len(center_box) != 2:
        raise ValueError(
            f"center_box must be a pair (low, high). Received: center_box={center_box!r}"
        )
    low, high = _check_range("center_box[0]", center_box[0], "center_box[1]", center_box[1])
    rng = np.random.default_rng(seed)
    means = rng.uniform(low, high, size=(centers, features))
    y = np.repeat(np.arange(centers, dtype=np.int32), _split_evenly(n_samples, centers))
    x = means[y] + rng.normal(scale=cluster_std, size=(n_samples, features))
    x, y = _shuffled(rng, x, y)
    return x.astype(np.float32), y


def make_sinc(n_samples: int = 500, noise: float = 0.05, low: float = -10.0, high: float = 10.0,
              seed: int | None = 0) -> tuple[np.ndarray, np.ndarray]:
    """The sinc curve y = sin(x) / x (1 at x = 0) at uniform random x, plus Gaussian noise.

    Args:
        n_samples: number of points.
        noise: standard deviation of the Gaussian noise added to y (0 for none).
        low: smallest x.
        high: largest x, greater than `low`.
        seed: seed of `np.random.default_rng` (None: fresh randomness).

    Returns:
        (x, y): both float32 of shape (n_samples, 1).

    Raises:
        ValueError: on a non-positive `n_samples`, a negative `noise` or `low` >= `high`.

    Example:

        >>> x, y = make_sinc(n_samples=4, noise=0.0)
        >>> x.shape, y.shape, y.dtype
        ((4, 1), (4, 1), dtype('float32'))
    """
    n_samples = validation.positive_int("n_samples", n_samples)
    noise = validation.finite_number("noise", noise, minimum=0)
    low, high = _check_range("low", low, "high", high)
    rng = np.random.default_rng(seed)
    x = rng.uniform(low, high, size=(n_samples, 1))
    y = np.sinc(x / np.pi)  # numpy's sinc is the normalized sin(pi x) / (pi x)
    if noise > 0:
        y = y + rng.normal(scale=noise, size=y.shape)
    return x.astype(np.float32), y.astype(np.float32)


def make_sine_sequences(n_samples: int = 1000, steps: int = 20, noise: float = 0.05,
                        min_frequency: float = 0.025, max_frequency: float = 0.1,
                        seed: int | None = 0) -> tuple[np.ndarray, np.ndarray]:
    """Forecasting windows of noisy sines: `steps` observations in, the next one out.

    Each sample is its own sine, sin(2 pi f t + phase) with a frequency f drawn uniformly in
    [min_frequency, max_frequency] cycles per step and a phase drawn uniformly in
    [0, 2 pi), observed at t = 0, 1, ..., steps with Gaussian noise. x holds the first `steps`
    observations, y the observation at t = steps (noise included: what one would forecast).
    Repeating the last observation ("naive" forecast, `x[:, -1]`) is the baseline to beat.

    Args:
        n_samples: number of windows.
        steps: observations per window (the sequence length).
        noise: standard deviation of the Gaussian observation noise (0 for none).
        min_frequency: lowest frequency, in cycles per step, greater than 0.
        max_frequency: highest frequency, at least `min_frequency` and at most 0.5 (Nyquist).
        seed: seed of `np.random.default_rng` (None: fresh randomness).

    Returns:
        (x, y): x float32 of shape (n_samples, steps, 1), y float32 of shape (n_samples, 1).

    Raises:
        ValueError: on a non-positive `n_samples` or `steps`, a negative `noise`, or
            frequencies outside 0 < min_frequency <= max_frequency <= 0.5.

    Example:

        >>> x, y = make_sine_sequences(n_samples=3, steps=5, noise=0.0, seed=1)
        >>> x.shape, y.shape, x.dtype
        ((3, 5, 1), (3, 1), dtype('float32'))
    """
    n_samples = validation.positive_int("n_samples", n_samples)
    steps = validation.positive_int("steps", steps)
    noise = validation.finite_number("noise", noise, minimum=0)
    low = validation.finite_number("min_frequency", min_frequency)
    high = validation.finite_number("max_frequency", max_frequency)
    if not 0 < low <= high <= 0.5:
        raise ValueError(
            "frequencies must satisfy 0 < min_frequency <= max_frequency <= 0.5 (cycles per "
            f"step; 0.5 is the Nyquist limit). Received: min_frequency={min_frequency!r}, "
            f"max_frequency={max_frequency!r}")
    rng = np.random.default_rng(seed)
    frequency = rng.uniform(low, high, size=(n_samples, 1))
    phase = rng.uniform(0.0, 2 * np.pi, size=(n_samples, 1))
    t = np.arange(steps + 1)[None, :]
    series = np.sin(2 * np.pi * frequency * t + phase)
    if noise > 0:
        series = series + rng.normal(scale=noise, size=series.shape)
    x = series[:, :steps, None]
    y = series[:, steps:]
    return x.astype(np.float32), y.astype(np.float32)
