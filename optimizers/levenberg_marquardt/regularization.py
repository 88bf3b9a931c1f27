"""Weight regularizers under Levenberg–Marquardt: an L2 penalty as residual rows.

An L2 penalty `λ‖w‖²` is the sum of the squares of the rows `√λ·w`, whose Jacobian is `√λ·I`
on the penalized weights. Appended to the batch's rows they add `λ` to the diagonal of `JᵀJ`
(and of `diag(JᵀJ)`, which scales the damping) and `λ·w` to `Jᵀr`, so LM minimises the same
objective as `fit` reports (the compiled loss plus `regularization_loss`). The gradient half
of the system (`b`) then comes from the step's tape, whose loss holds the penalty; the rows
of the batch alone are not its gradient. A regularizer that is not a sum of squares of the
weights (L1, orthogonal, a function of your own), a loss that a layer adds in its `call`
(`add_loss`, an activity regularizer) and the cg solver, which has no place for the rows, are
refused with a reason before the step runs.

Example:

    >>> import keras, numpy as np, graphfit as gf
    >>> from graphfit import layers
    >>> model = gf.Sequential([layers.Dense(1, kernel_regularizer=keras.regularizers.L2(0.5))],
    ...                       input_shape=(2,), dtype="float64")
    >>> penalty = L2Rows.of(model, model.trainable_variables)
    >>> penalty.coefficients.tolist()  # the kernel's two entries, not the bias
    [0.5, 0.5, 0.0]
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from graphfit.core.variables import as_tf_variable
from graphfit.optimizers.levenberg_marquardt import update as lm_update

__all__ = ["L2Rows", "regularized"]


def regularized(model) -> bool:
    """Whether a trainable weight of `model` carries a regularizer."""
    return any(layer.weight_regularizers() for layer in model.flatten_layers())


class L2Rows:
    """The rows `√λ·w` of a model's L2 penalties, as one coefficient `λ` per parameter (in the
    order of the trained variables, flattened; 0 where a weight has no penalty)."""

    def __init__(self, coefficients: np.ndarray):
        self.coefficients = coefficients

    @classmethod
    def of(cls, model, variables) -> "L2Rows | None":
        """The penalty rows of `model`'s regularized weights among `variables`; None when no
        weight is regularized.

        Raises:
            ValueError: for a regularizer that is not an L2 penalty, naming the layer and the
                weight.
        """
        found = {}
        for layer in model.flatten_layers():
            for variable, regularizer in layer.weight_regularizers():
                found[as_tf_variable(variable).ref()] = _l2_factor(layer, variable, regularizer)
        if not found:
            return None
        parts = [np.full(int(np.prod(v.shape.as_list())), found.get(as_tf_variable(v).ref(), 0.0))
                 for v in variables]
        return cls(np.concatenate(parts) if parts else np.zeros([0]))

    def check(self, solver: str, geodesic_acceleration) -> None:
        """Refuses what cannot take the rows: the cg solver, and geodesic acceleration forced
        on (its residual rows are the batch's alone; "auto" leaves it off)."""
        if solver == "cg":
            raise ValueError(
                "LevenbergMarquardt writes the model's L2 penalties as rows of JᵀJ, which the "
                "cg solver does not form: use solver='direct' (raise max_parameters if needed), "
                "or train with a first-order optimizer.")
        if geodesic_acceleration is True:
            raise ValueError(
                "LevenbergMarquardt(geodesic_acceleration=True) cannot run with weight "
                "regularizers (its second derivative reads the batch's rows only): use "
                "geodesic_acceleration='auto' or False.")

    def augment(self, linear: lm_update.Linearization) -> lm_update.Linearization:
        """`linear` with the penalty's rows appended: `λ` added to the diagonal of `JᵀJ` and
        of `diag(JᵀJ)`. `b` is the tape's half gradient, which holds the penalty already."""
        lam = tf.constant(self.coefficients, tf.float64)
        return linear._replace(matrix=linear.matrix + tf.linalg.diag(lam),
                               diag=linear.diag + lam)


def _l2_factor(layer, variable, regularizer) -> float:
    if isinstance(regularizer, keras.regularizers.L2):
        return float(regularizer.l2)
    if isinstance(regularizer, keras.regularizers.L1L2) and float(regularizer.l1) == 0.0:
        return float(regularizer.l2)
    raise ValueError(
        f"LevenbergMarquardt writes an L2 penalty λ‖w‖² as residual rows √λ·w, but weight "
        f"{variable.name!r} of layer {layer.name!r} has the regularizer "
        f"{_describe(regularizer)}, which "
        f"is not a sum of squares of the weights (L1 and L1L2 with l1 > 0 have no such rows). "
        f"Use keras.regularizers.L2 with LevenbergMarquardt, or train with a first-order "
        f"optimizer (Adam, SGD).")


def _describe(regularizer) -> str:
    """`L1(l1=0.01)` for a Keras regularizer (its config), the repr of anything else."""
    get_config = getattr(regularizer, "get_config", None)
    try:
        config = get_config() if callable(get_config) else None
    except NotImplementedError:
        config = None
    if not isinstance(config, dict):
        return repr(regularizer)
    arguments = ", ".join(f"{key}={value:g}" if isinstance(value, float) else f"{key}={value!r}"
                          for key, value in config.items())
    return f"{type(regularizer).__name__}({arguments})"
