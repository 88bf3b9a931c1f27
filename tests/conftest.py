"""Shared test set-up: quiet TensorFlow, and a fixed seed for every test."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def fixed_seed():
    """Every test starts from the same Python, NumPy and TensorFlow seeds."""
    keras.utils.set_random_seed(1234)
    yield
