"""Gradient transforms: functions of the whole gradient list, applied before any update.

A transform maps the list of gradients of one training step to a new list of the same length
(Optax's `GradientTransformation`, without state). Because it sees the whole list, a transform
can gate every gradient on all of them, which is what clipping by global norm needs: every
gradient is computed first, then all are scaled by one factor, and only then is any variable
updated (TensorFlow 1's `GATE_GRAPH`).

The optimizer flags `clipvalue`, `clipnorm` and `global_clipnorm` build the transforms below;
`gradient_transforms=` appends transforms of your own (any callable `grads -> grads`). The
gradients a transform receives are dense tensors, never None (the optimizer drops missing
gradients and densifies `tf.IndexedSlices` first).

Example:

    >>> import tensorflow as tf
    >>> from graphfit.optimizers import transforms
    >>> clip = transforms.chain(transforms.ClipByValue(1.0), transforms.ClipByGlobalNorm(1.0))
    >>> [g.numpy().tolist() for g in clip([tf.constant([3.0, 0.0]), tf.constant([0.0, 1.0])])]
    [[0.7071067690849304, 0.0], [0.0, 0.7071067690849304]]
"""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

import tensorflow as tf

from graphfit.core import autograph_scope, registry, validation

__all__ = [
    "GradientTransform",
    "ClipByValue",
    "ClipByNorm",
    "ClipByGlobalNorm",
    "Chain",
    "chain",
    "from_flags",
    "DecoupledWeightDecay",
    "get",
    "register_transform",
    "serialize",
]


class GradientTransform:
    """Base class of gradient transforms: `__call__(grads) -> grads` on the whole list.

    Subclasses implement `__call__` and, when they have arguments, `get_config` (the
    constructor arguments, so that `from_config(get_config())` rebuilds them). A transform
    that needs the variables the gradients belong to overrides `apply(grads, variables)`
    instead; one with state of its own creates it in `build(optimizer)` and tracks it there
    (`optimizer.track_variable`), so checkpoints keep it. A transform that computes the
    batch's gradient itself rather than transforming it (`PerExampleClipping`, from the
    step's per-example gradients) sets `computes_gradients`: it must come first, and runs
    before the clipping flags.

    Example:

        >>> import tensorflow as tf
        >>> class Scale(GradientTransform):
        ...     def __call__(self, grads):
        ...         return [2.0 * g for g in grads]
        >>> float(Scale()([tf.constant(1.0)])[0])
        2.0
    """

    computes_gradients: bool = False

    def __call__(self, grads: Sequence[tf.Tensor]) -> list[tf.Tensor]:
        raise NotImplementedError(f"{type(self).__name__} must implement __call__(grads).")

    def apply(self, grads: Sequence[tf.Tensor], variables: Sequence[tf.Variable]) -> list:
        """The transform of `grads`, the gradients of `variables` (in order); `self(grads)`
        unless overridden."""
        del variables
        return autograph_scope.convert_user_code(self.__call__)(grads)

    def build(self, optimizer) -> None:
        """Creates the transform's state, once, outside any trace (the optimizer's `build`
        calls it); the default has none."""
        del optimizer

    def get_config(self) -> dict[str, Any]:
        """The constructor arguments of this transform."""
        return {}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "GradientTransform":
        return cls(**config)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


class ClipByValue(GradientTransform):
    """Clips every gradient element to `[-clipvalue, clipvalue]` (`tf.clip_by_value`).

    The same as Keras's `clipvalue=` optimizer argument.

    Args:
        clipvalue: the largest absolute value an element may keep.

    Raises:
        ValueError: if `clipvalue` is not a positive number.

    Example:

        >>> import tensorflow as tf
        >>> ClipByValue(0.5)([tf.constant([-2.0, 0.25])])[0].numpy().tolist()
        [-0.5, 0.25]
    """

    def __init__(self, clipvalue: float):
        self.clipvalue = validation.positive_float("clipvalue", clipvalue)

    def __call__(self, grads: Sequence[tf.Tensor]) -> list[tf.Tensor]:
        return [tf.clip_by_value(g, -self.clipvalue, self.clipvalue) for g in grads]

    def get_config(self) -> dict[str, Any]:
        return {"clipvalue": self.clipvalue}


class ClipByNorm(GradientTransform):
    """Rescales each gradient on its own so that its L2 norm is at most `clipnorm`.

    Each variable's gradient is clipped independently (`tf.clip_by_norm`), exactly as Keras's
    `clipnorm=` optimizer argument does on TensorFlow.

    Args:
        clipnorm: the largest L2 norm a single gradient may keep.

    Raises:
        ValueError: if `clipnorm` is not a positive number.

    Example:

        >>> import tensorflow as tf
        >>> ClipByNorm(1.0)([tf.constant([3.0, 4.0])])[0].numpy().tolist()
        [0.6000000238418579, 0.800000011920929]
    """

    def __init__(self, clipnorm: float):
        self.clipnorm = validation.positive_float("clipnorm", clipnorm)

    def __call__(self, grads: Sequence[tf.Tensor]) -> list[tf.Tensor]:
        return [tf.clip_by_norm(g, self.clipnorm) for g in grads]

    def get_config(self) -> dict[str, Any]:
        return {"clipnorm": self.clipnorm}


class ClipByGlobalNorm(GradientTransform):
    """Scales ALL gradients by one factor so that their joint L2 norm is at most the limit.

    The factor is `global_clipnorm / max(global_norm, global_clipnorm)`, where `global_norm`
    is the norm of all gradients concatenated (`tf.clip_by_global_norm`). The direction of the
    whole update is kept, which per-variable clipping does not do. Same as Keras's
    `global_clipnorm=`. A non-finite global norm makes every gradient NaN (as in TensorFlow).

    Args:
        global_clipnorm: the largest joint L2 norm of all gradients.

    Raises:
        ValueError: if `global_clipnorm` is not a positive number.

    Example:

        >>> import tensorflow as tf
        >>> grads = ClipByGlobalNorm(1.0)([tf.constant([3.0]), tf.constant([4.0])])
        >>> [round(float(g[0]), 6) for g in grads]
        [0.6, 0.8]
    """

    def __init__(self, global_clipnorm: float):
        self.global_clipnorm = validation.positive_float("global_clipnorm", global_clipnorm)

    def __call__(self, grads: Sequence[tf.Tensor]) -> list[tf.Tensor]:
        grads = list(grads)
        if not grads:
            return grads
        if len({g.dtype for g in grads}) == 1:
            clipped, _ = tf.clip_by_global_norm(grads, self.global_clipnorm)
            return list(clipped)
        # Mixed precisions: tf.clip_by_global_norm stacks the norms and needs one dtype, so
        # measure in float64 and scale each gradient in its own dtype.
        norm = tf.linalg.global_norm([tf.cast(g, tf.float64) for g in grads])
        limit = tf.constant(self.global_clipnorm, tf.float64)
        scale = limit * tf.minimum(1.0 / norm, 1.0 / limit) + (norm - norm)
        return [g * tf.cast(scale, g.dtype) for g in grads]

    def get_config(self) -> dict[str, Any]:
        return {"global_clipnorm": self.global_clipnorm}


class Chain(GradientTransform):
    """Applies several transforms one after the other (Optax `chain`).

    Args:
        transforms: transforms (or callables `grads -> grads`), applied in the given order.

    Example:

        >>> import tensorflow as tf
        >>> both = Chain([ClipByValue(3.0), ClipByNorm(1.0)])
        >>> both([tf.constant([4.0, 0.0])])[0].numpy().tolist()
        [1.0, 0.0]
    """

    def __init__(self, transforms: Sequence[Callable | dict] = ()):
        self.transforms = [get(t) for t in transforms]

    def take_gradient_source(self) -> GradientTransform | None:
        """Removes and returns the first transform when it computes the gradient itself
        (`computes_gradients`), else None.

        Raises:
            ValueError: when such a transform is not the first, or appears twice.
        """
        positions = [i for i, t in enumerate(self.transforms)
                     if getattr(t, "computes_gradients", False)]
        if not positions:
            return None
        if positions != [0]:
            name = type(self.transforms[positions[0]]).__name__
            raise ValueError(
                f"{name} must be the first (and only one) of gradient_transforms: it computes "
                f"the batch gradient the other transforms act on. Received: "
                f"gradient_transforms={self.transforms!r}")
        return self.transforms.pop(0)

    def __call__(self, grads: Sequence[tf.Tensor]) -> list[tf.Tensor]:
        return self.apply(grads, None)

    def apply(self, grads: Sequence[tf.Tensor], variables) -> list[tf.Tensor]:
        grads = list(grads)
        for transform in self.transforms:
            count = len(grads)
            if isinstance(transform, GradientTransform):
                grads = list(autograph_scope.convert_user_code(transform.apply)(grads,
                                                                                variables))
            else:
                grads = list(autograph_scope.convert_user_code(transform)(grads))
            if len(grads) != count:
                raise ValueError(
                    f"Gradient transform {transform!r} must return one gradient per input "
                    f"gradient. It received {count} and returned {len(grads)}."
                )
        return grads

    def get_config(self) -> dict[str, Any]:
        return {"transforms": [serialize(t) for t in self.transforms]}


def chain(*transforms: Callable | dict) -> Chain:
    """`Chain(transforms)`: the transforms applied left to right."""
    return Chain(transforms)


def from_flags(clipvalue=None, clipnorm=None, global_clipnorm=None) -> Chain:
    """The transform that the optimizer's clipping flag stands for: exactly Keras's clipping.

    Raises:
        ValueError: when more than one flag is set, as Keras refuses it (to clip in several
            ways, pass the transforms in order in `gradient_transforms`).
    """
    given = {"clipnorm": clipnorm, "clipvalue": clipvalue, "global_clipnorm": global_clipnorm}
    if sum(value is not None for value in given.values()) > 1:
        raise ValueError(
            f"Only one of `clipnorm`, `clipvalue` and `global_clipnorm` can be set (as in "
            f"Keras). Received: clipnorm={clipnorm}, clipvalue={clipvalue}, global_clipnorm="
            f"{global_clipnorm}. To clip in several ways, give the transforms in the order to "
            f"apply them: gradient_transforms=[transforms.ClipByValue(...), "
            f"transforms.ClipByGlobalNorm(...)].")
    flags = []
    if clipvalue is not None:
        flags.append(ClipByValue(clipvalue))
    if clipnorm is not None:
        flags.append(ClipByNorm(clipnorm))
    if global_clipnorm is not None:
        flags.append(ClipByGlobalNorm(global_clipnorm))
    return Chain(flags)


class DecoupledWeightDecay:
    """Keras's decoupled weight decay: `v <- v - v * weight_decay * learning_rate`.

    The optimizer applies it to each variable's value after the gradient transforms and
    before the update rule, with the step's learning rate (Loshchilov & Hutter's decoupling:
    the decay is not added to the gradient, where Adam would rescale it). It acts on values,
    not gradients, so it is not a `GradientTransform`.

    Args:
        weight_decay: the decay rate, a non-negative float.

    Raises:
        ValueError: if `weight_decay` is negative or not a number.

    Example:

        >>> import tensorflow as tf
        >>> decay = DecoupledWeightDecay(0.5)
        >>> value, learning_rate = tf.constant(2.0, tf.float64), tf.constant(0.1, tf.float64)
        >>> float(decay(value, learning_rate))  # 2 - 2 * 0.5 * 0.1
        1.9
    """

    def __init__(self, weight_decay: float):
        if not validation.is_real(weight_decay) or weight_decay < 0:
            raise validation.invalid("weight_decay", weight_decay,
                                     "None or a non-negative float")
        self.weight_decay = float(weight_decay)
        self._excluded: set = set()  # variable.ref()
        self._pattern: re.Pattern | None = None

    def exclude(self, var_list: Sequence[tf.Variable] = (), var_names=None) -> None:
        """Exempts the variables in `var_list`, and those whose name matches a `var_names` entry."""
        self._excluded = {v.ref() for v in var_list}
        self._pattern = re.compile("|".join(var_names)) if var_names else None

    def applies_to(self, variable: tf.Variable) -> bool:
        if variable.ref() in self._excluded:
            return False
        return self._pattern is None or self._pattern.search(variable.name) is None

    def __call__(self, value: tf.Tensor, learning_rate: tf.Tensor) -> tf.Tensor:
        # Keras: variable.assign_sub(variable * wd * lr), the same operations in this order.
        decay = tf.convert_to_tensor(self.weight_decay, dtype=value.dtype)
        return value - value * decay * learning_rate


_BUILT_IN = {cls.__name__: cls for cls in (ClipByValue, ClipByNorm, ClipByGlobalNorm, Chain)}


def register_transform(cls: type) -> type:
    """Lets configs and recipes name a transform class (`{type: ClassName, ...}`); a
    decorator. The class needs `get_config` and `from_config` (as `GradientTransform` has)."""
    _BUILT_IN[cls.__name__] = cls
    return cls


def serialize(transform: GradientTransform) -> dict[str, Any]:
    """`{"type": ClassName, **constructor arguments}` for a built-in transform.

    Raises:
        ValueError: for a transform that graphfit cannot rebuild from a config (a user
            function or class); keep such optimizers in Python rather than in a config.
    """
    name = type(transform).__name__
    if _BUILT_IN.get(name) is not type(transform):
        raise ValueError(
            f"Cannot serialize the gradient transform {transform!r}: only the built-in "
            f"transforms ({', '.join(sorted(_BUILT_IN))}) can be written to a config."
        )
    return {"type": name, **transform.get_config()}


def get(identifier: Callable | dict) -> Callable:
    """A gradient transform from an instance, a callable or a `{"type": ..., **args}` dict.

    Raises:
        ValueError: for an unknown type name (with the closest known name) or anything else.
    """
    if isinstance(identifier, dict):
        config = dict(identifier)
        name = config.pop("type", None)
        if name not in _BUILT_IN:
            raise registry.unknown_name_error(
                "gradient transform", str(name), _BUILT_IN,
                "or pass a callable grads -> grads.",
            )
        return _BUILT_IN[name].from_config(config)
    if callable(identifier):
        return identifier
    raise ValueError(
        "A gradient transform must be a callable grads -> grads or a dict "
        f"{{'type': name, ...}}. Received: {identifier!r}"
    )
