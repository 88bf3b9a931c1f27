"""One call to make a run reproducible."""

import keras

__all__ = ["set_seed"]


def set_seed(seed: int) -> None:
    """Seeds Python's `random`, NumPy and TensorFlow (and Keras initializers) at once.

    With the same seed, the same program gives the same initial weights, the same shuffling
    order and the same dropout masks.
    """
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer. Received: seed={seed!r}")
    keras.utils.set_random_seed(seed)
