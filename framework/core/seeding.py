"""One call to make a run reproducible."""

import keras

__all__ = ["set_seed"]


def set_seed(seed: int) -> None:
    """Seeds Python's `random`, NumPy and TensorFlow (and Keras initializers) at once.

    With the same seed, the same program gives the same initial weights, the same shuffling
    order and the same dropout masks.

    Call it once, before building models: TensorFlow's `tf.random.set_seed` also clears its
    kernel caches, so the next call of every compiled step and loop pays part of its start-up
    again (docs/benchmarks/performance.md). To vary only the shuffling between two `fit` calls,
    `np.random.seed` is enough: `fit` draws its shuffle seed from NumPy.
    """
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer. Received: seed={seed!r}")
    keras.utils.set_random_seed(seed)
