"""Log values: metric results as Keras logs them, a step's returned logs, and epoch logs for
writers that take one number per key.

Keras logs a metric with one value per threshold or class (`Precision(thresholds=[0.5, 0.7])`,
`F1Score()`) as one NumPy array under the metric's name; graphfit's logs do the same. TensorBoard
scalars, `history.json` and `metrics.json` take numbers only, so they get one key per element.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

__all__ = ["flat_logs", "float64_scalar", "metric_log_value", "scalar_logs"]


def scalar_logs(logs: dict | None) -> dict:
    """`logs` with every array value split into one key per element, `name_0`, `name_1`, ...

    Args:
        logs: {key: number or array}.

    Returns:
        {key: number}: numbers unchanged, arrays flattened in order.

    Example:
        >>> scalar_logs({"loss": 0.5, "precision": np.array([0.5, 0.25])})
        {'loss': 0.5, 'precision_0': 0.5, 'precision_1': 0.25}
    """
    flat = {}
    for key, value in (logs or {}).items():
        array = np.asarray(value) if isinstance(value, (np.ndarray, list, tuple)) else None
        if array is None or array.ndim == 0:
            flat[key] = value if array is None else array.item()
            continue
        for index, element in enumerate(array.reshape(-1)):
            flat[f"{key}_{index}"] = element.item()
    return flat


def metric_log_value(value):
    """A metric's result as Keras logs it: a float, or a NumPy array for a metric with one
    value per threshold or class (`Precision(thresholds=[0.5, 0.7])`, `F1Score()`).

    The array is a copy: a tensor read from a variable on the CPU may share its memory, so
    that the next reset of the metric would change the logged numbers (which happens to Keras's
    training numbers of such metrics when validation runs: see docs/guides/keras_parity.md).
    """
    value = np.array(tf.convert_to_tensor(value), copy=True)
    return float(value) if value.ndim == 0 else value


def flat_logs(logs: dict, flat: dict | None = None) -> dict:
    """A step's returned logs with nested dicts flattened (Keras's `CompileMetrics` result)."""
    flat = {} if flat is None else flat
    for name, value in logs.items():
        if isinstance(value, dict):
            flat_logs(value, flat)
        else:
            flat[name] = value
    return flat


def float64_scalar(value) -> tf.Tensor:
    """A returned log as a float64 scalar (a per-class result as its mean)."""
    value = tf.convert_to_tensor(value)
    if value.shape.rank:
        value = tf.reduce_mean(value)
    return tf.cast(value, tf.float64)
