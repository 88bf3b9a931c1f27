"""Shared test set-up: quiet TensorFlow, and a fixed seed for every test."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Recipe runs draw their PNGs at the end; the suite trains dozens of runs, so only the tests
# that check the plots turn them on (tests/framework/cli/test_export_and_plot_commands.py).
os.environ.setdefault("GRAPHFIT_PLOTS", "0")

import keras  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def fixed_seed():
    """Every test starts from the same Python, NumPy and TensorFlow seeds."""
    keras.utils.set_random_seed(1234)
    yield
