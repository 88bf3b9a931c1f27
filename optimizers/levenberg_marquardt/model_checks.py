"""What Levenberg–Marquardt refuses, or warns about, in the model it is asked to train:
nothing to train, layers that are random in training (whose loss the gain ratio cannot
judge), a Dense bias that batch normalization subtracts again, and float64 variables whose
loss the model computes in a narrower dtype."""

from __future__ import annotations

import warnings

import tensorflow as tf

from graphfit.layers.batch_normalization import BatchNormalization
from graphfit.layers.dense import Dense
from graphfit.training.frozen_split import is_stochastic

__all__ = ["check_trainable", "warn_random_layers", "warn_cancelled_biases", "warn_narrow_loss"]


def check_trainable(variables, model=None) -> None:
    """Raises a ValueError when there is nothing to fit, naming the layers that are not
    frozen but hold only non-trainable variables (a Formula whose parameters are all fixed)."""
    if variables:
        return
    fixed = [] if model is None else [
        f"{layer.name!r} ({type(layer).__name__})"
        for layer in model.flatten_layers(include_self=False)
        if layer.trainable and layer.weights and not layer.trainable_weights]
    if fixed:
        raise ValueError(
            f"LevenbergMarquardt has no trainable variables to fit: the variables of "
            f"{', '.join(fixed)} are all fixed (in a Formula, every parameter has vary: false). "
            f"Let at least one parameter vary, or call evaluate/predict instead of fit.")
    raise ValueError(
        "LevenbergMarquardt has no trainable variables to fit: every layer of the model "
        "is frozen (trainable=False) or has no variables. Unfreeze the layers to train, "
        "or call evaluate/predict instead of fit.")


def warn_random_layers(model) -> None:
    """Warns (once per traced step) about layers that draw random numbers in training: each
    trial is judged by the loss at two points, which such a layer makes differ by noise."""
    random = [f"{layer.name!r} ({type(layer).__name__})"
              for layer in model.flatten_layers(include_self=False) if is_stochastic(layer)]
    if random:
        warnings.warn(
            f"LevenbergMarquardt judges each trial step by comparing the loss before and "
            f"after it, but {', '.join(random)} "
            f"{'is' if len(random) == 1 else 'are'} random in training "
            f"(stochastic_in_training), so that comparison measures noise. Remove dropout and "
            f"noise layers (or set their rate to 0), or train with a first-order optimizer "
            f"such as Adam. A layer that is in fact deterministic can set "
            f"stochastic_in_training = False.", stacklevel=4)


def warn_cancelled_biases(model, damping: str) -> None:
    """Warns (once per traced step) about a Dense bias that the next layer, a batch
    normalization in training, subtracts again: the loss does not depend on it, its Jacobian
    column is rounding noise (about 1e-16 of the others), and Marquardt's scaling
    (`damping="marquardt"`) blows that noise up to the size of a real direction. The steps
    then move the bias by about 1e16 and every trial fails, which ends the fit as if it had
    converged. Found between consecutive layers of a model's own list (`Sequential`)."""
    if damping != "marquardt":
        return
    layers = list(getattr(model, "layers", ()))
    for before, after in zip(layers, layers[1:]):
        cancels = (isinstance(before, Dense) and before.use_bias
                   and getattr(before.activation, "__name__", "") == "linear"
                   and isinstance(after, BatchNormalization) and after.trainable
                   and not after.renorm and after.axis == -1)
        if cancels:
            warnings.warn(
                f"Dense {before.name!r} adds a bias that the next layer, BatchNormalization "
                f"{after.name!r}, subtracts again in training, so the loss does not depend on "
                f"it: its Jacobian column is rounding noise, which LevenbergMarquardt's "
                f"Marquardt scaling makes as large as a real direction, and its steps fail "
                f"(the fit stops as if converged). Give {before.name!r} use_bias=False (the "
                f"usual choice before batch normalization), or use "
                f"LevenbergMarquardt(damping='identity').", stacklevel=4)


def warn_narrow_loss(model, variables) -> None:
    """Warns (once per traced step) when float64 variables are trained on a loss that the
    model computes in a narrower dtype: a `Formula(..., dtype="float64")` inside a default
    (float32) `Sequential`. `fit` feeds the labels, and computes the loss, in the model's
    dtype, so near the minimum the gain ratio compares rounding and the fit stops about
    √ε₃₂ of a standard error short; a sum of squares past float32's range ends it at once
    (docs/guides/levenberg_marquardt.md, "Fit in a float64 model", has the figures)."""
    dtype = tf.as_dtype(getattr(model, "dtype", None) or tf.float32)
    wide = [v.name for v in variables if v.dtype == tf.float64]
    if wide and dtype.is_floating and dtype.size < 8:
        warnings.warn(
            f"LevenbergMarquardt trains float64 variables ({', '.join(wide[:3])}"
            f"{', ...' if len(wide) > 3 else ''}) but the model {model.name!r} computes its "
            f"loss, and takes its labels, in {dtype.name}: the fit then resolves the "
            f"parameters only to about the square root of {dtype.name}'s precision (it stops "
            f"short of the float64 optimum, e.g. 1e-5 relative where SciPy's curve_fit agrees "
            f"to 1e-9), and a loss above {dtype.name}'s range ends it as a NaN or inf loss. "
            f"Build the model in float64: gf.Sequential([...], dtype='float64').",
            stacklevel=4)
