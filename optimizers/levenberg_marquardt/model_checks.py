"""What Levenberg–Marquardt refuses, or warns about, in the model it is asked to train:
nothing to train, and layers that are random in training (whose loss the gain ratio cannot
judge)."""

from __future__ import annotations

import warnings

from graphfit.training.frozen_split import is_stochastic

__all__ = ["check_trainable", "warn_random_layers"]


def check_trainable(variables) -> None:
    """Raises a ValueError when there is nothing to fit."""
    if not variables:
        raise ValueError(
            "LevenbergMarquardt has no trainable variables to fit: every layer of the model "
            "is frozen (trainable=False) or has no variables. Unfreeze the layers to train, "
            "or call evaluate/predict instead of fit.")


def warn_random_layers(model) -> None:
    """Warns (once per traced step) about layers that draw random numbers in training: each
    trial is judged by the loss at two points, which such a layer makes differ by noise."""
    random = [f"{layer.name!r} ({type(layer).__name__})" for layer in model.flatten_layers()
              if layer is not model and is_stochastic(layer)]
    if random:
        warnings.warn(
            f"LevenbergMarquardt judges each trial step by comparing the loss before and "
            f"after it, but {', '.join(random)} "
            f"{'is' if len(random) == 1 else 'are'} random in training "
            f"(stochastic_in_training), so that comparison measures noise. Remove dropout and "
            f"noise layers (or set their rate to 0), or train with a first-order optimizer "
            f"such as Adam. A layer that is in fact deterministic can set "
            f"stochastic_in_training = False.", stacklevel=4)
