"""`check_example_jacobian`: a layer's per-example Jacobian hook against autodiff."""

from __future__ import annotations

from graphfit.optimizers.levenberg_marquardt import jacobian_hooks

__all__ = ["check_example_jacobian"]


def check_example_jacobian(layer, inputs, rtol: float = 1e-6, atol: float = 1e-9) -> float:
    """Checks a layer's `example_jacobian(inputs, variables)` hook (docs/guides/architecture.md,
    "Per-example Jacobians") against `tf.GradientTape.jacobian` of its outputs on `inputs`.

    Levenberg–Marquardt checks the hook's count and shapes while it traces, but not its
    values: a hook with a wrong sign or factor trains silently to a wrong fit. Call this
    once, in a test of the layer, on a batch of typical inputs.

    Args:
        layer: the layer (built on `inputs` if it is not yet).
        inputs: a batch of its inputs, the examples on the first axis.
        rtol, atol: the tolerance per entry: `|hook − autodiff| <= atol + rtol |autodiff|`.

    Returns:
        The largest absolute difference (a float).

    Raises:
        ValueError: the hook returns the wrong number of tensors or shapes.
        AssertionError: its values differ; the message names the layer, the variable and
            the worst entry (example, output, entry) with both values.

    Example:

        >>> import numpy as np, graphfit as gf
        >>> from graphfit import layers
        >>> curve = layers.Formula("a*exp(-k*x)", params={"a": 2.0, "k": 0.5})
        >>> x = np.linspace(0.0, 3.0, 8)[:, None].astype("float32")
        >>> gf.testing.check_example_jacobian(curve, x, rtol=1e-5) < 1e-5
        True
    """
    return jacobian_hooks.compare_with_autodiff(layer, inputs, rtol=rtol, atol=atol)
