"""Data functions that misbehave when called (for the data_function_*.yaml recipes)."""
import os
import subprocess

import numpy as np

run = subprocess.run  # re-exported: still the standard library's function
system = os.system


def raises(n=10):
    raise ValueError(f"the table for n={n} is missing")


def strings(n=10):
    return np.array([f"sample {i}" for i in range(n)]), np.arange(n)


def with_nan(n=20):
    x = np.ones((n, 2), np.float32)
    x[7, 1] = np.nan
    return x, np.arange(n) % 2


def exits():
    raise SystemExit(3)


def batched(n=64, classes=2):
    import tensorflow as tf

    x = np.linspace(-1, 1, 2 * n, dtype=np.float32).reshape(n, 2)
    return tf.data.Dataset.from_tensor_slices((x, np.arange(n) % classes)).batch(8)
