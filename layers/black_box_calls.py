"""Calling a BlackBox's NumPy function, with every result checked before TensorFlow sees it.

`CheckedFunction` runs on the NumPy side of `tf.numpy_function`. It takes a stack of batches
`(n, batch, *input_shape)` (the forward pass is a stack of one; an estimator's perturbed
copies of the batch are the others), calls the user's function on each batch (vectorized)
or on each example, and returns the stacked results with the number of calls made. A result
of the wrong kind, shape, or with NaN or inf, and an exception from the function itself,
become a `ValueError` that names the layer and says what was received, so that no NaN
reaches the training silently.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from graphfit.core import host_errors

__all__ = ["CheckedFunction"]


def _describe(value) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    return f"a {type(value).__name__} ({value!r:.80})"


class CheckedFunction:
    """The user's function, called batch by batch (or example by example) and checked.

    Args:
        function: the user's NumPy function.
        owner: the layer, as "BlackBox 'name'", for messages.
        output_shape: the shape of one example's output.
        output_dtype: the NumPy dtype the outputs are converted to.
        vectorized: True: one call per batch, `(batch, *in) -> (batch, *out)`; False: one
            call per example, `in -> out`.
    """

    def __init__(self, function: Callable, owner: str, output_shape: tuple, output_dtype,
                 vectorized: bool):
        self.function = function
        self.owner = owner
        self.output_shape = tuple(output_shape)
        self.output_dtype = np.dtype(output_dtype)
        self.vectorized = vectorized
        self.name = getattr(function, "__qualname__", None) or type(function).__name__

    def __call__(self, stacked: np.ndarray):
        """Outputs `(n, batch, *output_shape)` for inputs `(n, batch, *input_shape)`, and the
        number of calls made (an int64 scalar)."""
        batch = stacked.shape[1]
        results = np.empty((stacked.shape[0], batch) + self.output_shape, self.output_dtype)
        calls = 0
        for i, inputs in enumerate(stacked):
            if batch == 0:
                continue  # nothing to evaluate: F is not called
            if self.vectorized:
                results[i] = self._call(inputs, (batch,) + self.output_shape, "a batch")
                calls += 1
            else:
                for j, example in enumerate(inputs):
                    results[i, j] = self._call(example, self.output_shape, f"example {j}")
                calls += batch
        return results, np.int64(calls)

    def _call(self, inputs: np.ndarray, expected: tuple, what: str) -> np.ndarray:
        try:
            return self._checked_call(inputs, expected, what)
        except ValueError as error:
            host_errors.record(error)  # for the loop to re-raise in place of TensorFlow's
            raise

    def _checked_call(self, inputs: np.ndarray, expected: tuple, what: str) -> np.ndarray:
        try:
            result = self.function(inputs)
        except Exception as error:  # the user's code: say which layer and on what
            raise ValueError(
                f"{self.owner}: its function {self.name} raised {type(error).__name__}: "
                f"{error} (called on {what} of shape {inputs.shape}, dtype "
                f"{inputs.dtype}).") from error
        array = self._as_array(result, what, inputs)
        if array.shape != expected:
            raise ValueError(
                f"{self.owner}: its function {self.name} returned an array of shape "
                f"{array.shape} for {what} of shape {inputs.shape}; expected shape {expected} "
                f"(output_shape={self.output_shape}"
                f"{', with the batch axis first' if self.vectorized else ''}). Fix the "
                f"function or the layer's output_shape.")
        finite = np.isfinite(array)
        if not finite.all():
            first = tuple(int(i) for i in np.argwhere(~finite)[0])
            raise ValueError(
                f"{self.owner}: its function {self.name} returned {int((~finite).sum())} "
                f"non-finite value(s) (NaN or inf) for {what} of shape {inputs.shape}, the "
                f"first at index {first}: {array[first]}. Training on them would turn the "
                f"weights into NaN; make the function return finite values (clip its inputs, "
                f"or lower the estimator's sigma if the perturbed inputs leave its domain).")
        return array.astype(self.output_dtype, copy=False)

    def _as_array(self, result, what: str, inputs: np.ndarray) -> np.ndarray:
        problem = None
        if result is None or isinstance(result, (str, bytes, dict, set)):
            problem = _describe(result)
        else:
            try:
                array = np.asarray(result)
            except Exception:  # ragged lists and the like
                array, problem = None, _describe(result)
            if array is not None and array.dtype.kind not in "biuf":
                problem = _describe(result) if isinstance(result, np.ndarray) else (
                    f"a {type(result).__name__} that is not an array of real numbers")
        if problem is not None:
            raise ValueError(
                f"{self.owner}: its function {self.name} must return a NumPy array of real "
                f"numbers; for {what} of shape {inputs.shape} it returned {problem}.")
        return array
