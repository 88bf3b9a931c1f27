"""graphfit.optimizers: update rules with explicit slot state, and gradient transforms.

Optimizers here are `tf.Module`s whose slot variables (momentum, Adam moments) are created once
by `build`, outside any trace, and updated by the ops of the compiled training step; see
`graphfit.optimizers.optimizer` for how that makes state carry across steps. `SGD`, `Adam`,
`AdamW`, `RMSprop`, `Adagrad`, `Adadelta`, `Adamax`, `Nadam`, `Ftrl`, `Lion` and `Lamb`
reproduce `keras.optimizers` numerically. `get` turns a name or a config into an optimizer,
as recipes need.

Example:

    >>> from graphfit import optimizers
    >>> optimizers.get("adam").get_config()["learning_rate"]
    0.001
    >>> optimizers.get({"type": "SGD", "learning_rate": 0.1, "momentum": 0.9}).momentum
    0.9
"""

from __future__ import annotations

from typing import Any

from graphfit.core.registry import OPTIMIZERS
from graphfit.optimizers import (
    accumulation,
    after_update,
    ema,
    optimizer_state,
    schedules,
    transforms,
)
from graphfit.optimizers.adadelta import Adadelta
from graphfit.optimizers.adafactor import Adafactor
from graphfit.optimizers.adagrad import Adagrad
from graphfit.optimizers.adam import Adam
from graphfit.optimizers.adamax import Adamax
from graphfit.optimizers.adamw import AdamW
from graphfit.optimizers.base import BaseOptimizer
from graphfit.optimizers.ftrl import Ftrl
from graphfit.optimizers.lamb import Lamb
from graphfit.optimizers.levenberg_marquardt import LevenbergMarquardt
from graphfit.optimizers.levenberg_marquardt.residuals import ResidualLoss
from graphfit.optimizers.lion import Lion
from graphfit.optimizers.loss_scale import LossScaleOptimizer
from graphfit.optimizers.multi_optimizer import MultiOptimizer, OptimizerMap
from graphfit.optimizers.muon import Muon
from graphfit.optimizers.nadam import Nadam
from graphfit.optimizers.optimizer import Optimizer
from graphfit.optimizers.per_example_clipping import PerExampleClipping
from graphfit.optimizers.rmsprop import RMSprop
from graphfit.optimizers.schedule_free_adamw import ScheduleFreeAdamW
from graphfit.optimizers.second_order import SecondOrderOptimizer
from graphfit.optimizers.sgd import SGD
from graphfit.optimizers.transforms import (
    ClipByGlobalNorm,
    ClipByNorm,
    ClipByValue,
    GradientTransform,
    chain,
)

__all__ = [
    "BaseOptimizer",
    "Optimizer",
    "SecondOrderOptimizer",
    "SGD",
    "Adam",
    "Adafactor",
    "Muon",
    "ScheduleFreeAdamW",
    "AdamW",
    "RMSprop",
    "Adagrad",
    "Adadelta",
    "Adamax",
    "Nadam",
    "Ftrl",
    "Lion",
    "Lamb",
    "LevenbergMarquardt",
    "LossScaleOptimizer",
    "MultiOptimizer",
    "OptimizerMap",
    "ResidualLoss",
    "GradientTransform",
    "ClipByValue",
    "ClipByNorm",
    "ClipByGlobalNorm",
    "PerExampleClipping",
    "chain",
    "accumulation",
    "after_update",
    "ema",
    "optimizer_state",
    "schedules",
    "transforms",
    "get",
    "serialize",
    "deserialize",
]


def _lookup(name: str) -> type[BaseOptimizer]:
    if name in OPTIMIZERS:
        return OPTIMIZERS.get(name)
    matches = [known for known in OPTIMIZERS.names() if known.lower() == name.lower()]
    if len(matches) == 1:
        return OPTIMIZERS.get(matches[0])
    return OPTIMIZERS.get(name)  # raises, naming the closest name and all valid ones


def get(identifier: Any, dtype_policy=None) -> BaseOptimizer | None:
    """An optimizer from an instance, a class, a registered name or a config (Keras's
    `keras.optimizers.get`, which returns None for None).

    Args:
        identifier: an optimizer (returned as it is); an optimizer class or a registered
            name, case-insensitive ("sgd", "Adam"), giving a new instance with default
            arguments; a dict `{"type": name, **constructor arguments}` (Keras's
            `{"class_name": name, "config": {...}}`, as `keras.optimizers.serialize` writes
            it, is accepted too); or None, giving None.
        dtype_policy: the model's `DTypePolicy`, or None: under one whose 16-bit gradients
            underflow ("mixed_float16") the optimizer is wrapped in a `LossScaleOptimizer`
            (Keras's dynamic loss scaling), unless it is one.

    Returns:
        A `BaseOptimizer`.

    Raises:
        ValueError: for an unknown name (with a "did you mean" and all valid names) or an
            identifier of another kind.
    """
    if identifier is None:
        return None
    optimizer = _resolve(identifier)
    if (dtype_policy is not None and dtype_policy.needs_loss_scaling
            and not isinstance(optimizer, LossScaleOptimizer)):
        return LossScaleOptimizer(optimizer)
    return optimizer


def _resolve(identifier: Any) -> BaseOptimizer:
    if isinstance(identifier, BaseOptimizer):
        return identifier
    if isinstance(identifier, type) and issubclass(identifier, BaseOptimizer):
        return identifier()
    if isinstance(identifier, str):
        return _lookup(identifier)()
    if isinstance(identifier, dict):
        if "class_name" in identifier:
            name, config = identifier["class_name"], dict(identifier.get("config") or {})
        elif "type" in identifier:
            config = dict(identifier)
            name = config.pop("type")
        else:
            raise ValueError(
                "An optimizer config needs a 'type' key naming the optimizer, e.g. "
                f"{{'type': 'Adam', 'learning_rate': 0.001}}. Received: {identifier!r}"
            )
        return _lookup(str(name)).from_config(config)
    if type(identifier).__module__.startswith("keras"):
        name = type(identifier).__name__
        raise ValueError(
            f"A Keras optimizer ({name}) cannot update graphfit's variables and slots. Use "
            f"graphfit.optimizers.{name}(...) with the same arguments"
            + (f" (available: {', '.join(OPTIMIZERS.names())})." if name not in OPTIMIZERS else ".")
        )
    raise ValueError(
        "Could not interpret the optimizer identifier: expected a graphfit Optimizer, a name "
        f"({', '.join(OPTIMIZERS.names())}) or a config dict. Received: {identifier!r}"
    )


def serialize(optimizer: BaseOptimizer) -> dict[str, Any]:
    """`{"type": ClassName, **optimizer.get_config()}`, the inverse of `get(dict)`: the form
    a recipe writes (Keras's `serialize` nests the config under "config" instead; both
    `get` and `deserialize` read either)."""
    return {"type": type(optimizer).__name__, **optimizer.get_config()}


def deserialize(config: dict[str, Any]) -> BaseOptimizer:
    """The optimizer of a `serialize` (or `keras.optimizers.serialize`) config.

    Raises:
        ValueError: for something that is not such a dict, or an unknown name.
    """
    if not isinstance(config, dict):
        raise ValueError("deserialize() takes an optimizer config dict ({'type': 'Adam', ...} "
                         f"or Keras's {{'class_name': 'Adam', 'config': {{...}}}}). "
                         f"Received: {config!r}")
    return _resolve(config)
