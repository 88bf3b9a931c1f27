"""Dtype policies: the dtype a layer computes in and the dtype its variables are kept in.

Keras's policy names, with Keras's meaning:

    "float32", "float64"   variables and computation in that dtype
    "mixed_bfloat16"       computation in bfloat16, variables in float32 (CPUs with bfloat16
                           matrix units, TPUs)
    "mixed_float16"        computation in float16, variables in float32 (GPUs); training
                           needs loss scaling (`optimizers.LossScaleOptimizer`)

Under a mixed policy everything that accumulates stays in float32: the variables, the
optimizer's slots, update-hook state (moving statistics, class means), the loss and the
metrics. Layers whose computation must not round to 16 bits (normalisation statistics,
softmax outputs) compute in float32 and say so in their docstring.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

__all__ = ["DTypePolicy", "POLICY_NAMES", "dtype_policy", "floating_dtype"]

POLICY_NAMES = ("float32", "float64", "mixed_bfloat16", "mixed_float16")


@dataclasses.dataclass(frozen=True)
class DTypePolicy:
    """A named pair of dtypes: what a layer computes in and what its variables are kept in.

    Attributes:
        name: the policy's name ("float32", "mixed_bfloat16", ...).
        compute_dtype: the dtype of the layer's inputs, outputs and arithmetic.
        variable_dtype: the dtype of its variables (and of the optimizer's slots).

    Example:

        >>> import graphfit as gf
        >>> policy = gf.dtype_policy("mixed_bfloat16")
        >>> policy.compute_dtype.name, policy.variable_dtype.name, policy.is_mixed
        ('bfloat16', 'float32', True)
    """

    name: str
    compute_dtype: tf.DType
    variable_dtype: tf.DType

    @property
    def is_mixed(self) -> bool:
        """Whether computation runs in a lower precision than the variables."""
        return self.compute_dtype != self.variable_dtype

    @property
    def needs_loss_scaling(self) -> bool:
        """Whether training needs loss scaling: float16's range underflows small gradients."""
        return self.compute_dtype == tf.float16


def _named(name: str) -> DTypePolicy:
    if name.startswith("mixed_"):
        return DTypePolicy(name, tf.as_dtype(name[len("mixed_"):]), tf.float32)
    return DTypePolicy(name, tf.as_dtype(name), tf.as_dtype(name))


def dtype_policy(value, argument: str = "dtype_policy") -> DTypePolicy:
    """`value` as a `DTypePolicy`: a policy, its name, a float32/float64 `tf.DType` or NumPy
    dtype, or a Keras `DTypePolicy` with one of those names.

    Args:
        value: what to convert.
        argument: the argument's name, for the error message.

    Returns:
        The policy.

    Raises:
        ValueError: for anything else, listing the valid names (16-bit variables are refused:
            they lose the small updates that training accumulates; use a mixed policy).
    """
    if isinstance(value, DTypePolicy):
        return value
    name = getattr(value, "name", value)  # a tf.DType or a keras DTypePolicy
    if not isinstance(name, str):
        try:
            name = tf.as_dtype(value).name
        except TypeError:
            name = None
    if name in POLICY_NAMES:
        return _named(name)
    hint = ""
    if name in ("float16", "bfloat16"):
        hint = (f" Variables in {name} lose the small updates training adds up; use "
                f"'mixed_{name}' (compute in {name}, variables in float32).")
    raise ValueError(
        f"{argument} must be one of {', '.join(repr(n) for n in POLICY_NAMES)}.{hint} "
        f"Received: {argument}={value!r}"
    )


def floating_dtype(value, argument: str = "dtype", detail: str = "") -> tf.DType:
    """`value` as a floating `tf.DType`, else a ValueError naming `argument` (`detail`: why
    it must be floating, or what else is accepted, inserted before "Received")."""
    try:
        resolved = tf.as_dtype(value)
    except TypeError:
        resolved = None
    if resolved is None or not resolved.is_floating:
        raise ValueError(
            f"{argument} must be a floating dtype such as 'float32' or 'float64'{detail}. "
            f"Received: {argument}={value!r}"
        )
    return resolved
