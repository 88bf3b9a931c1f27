"""Jacobians of any node, and per-example (unaggregated) gradients, vectorized.

`tf.gradients` and `GradientTape.gradient` return the gradient of a *sum*: the gradient of a
batch loss, or of every element of a tensor added up. This module returns the pieces.

`jacobian(model, x, of=..., wrt=...)` differentiates the model output, or any named layer's
output, with respect to the trainable variables, one layer's variables, or the inputs, in
forward mode (`tf.autodiff.ForwardAccumulator`, one Jacobian-vector product per input number,
vectorized over a basis of tangents with `tf.vectorized_map`) or reverse mode
(`GradientTape.jacobian` / `batch_jacobian` with pfor, one vector-Jacobian product per output
number). "auto" picks forward mode when fewer numbers go in than come out.

Shape conventions (`out` is the differentiated tensor, `x` the inputs, batch axis first):

    wrt="variables" / a layer name / a list:  {variable name: (batch, *out[1:], *var.shape)}
    wrt="inputs", per_example=True:           (batch, *out[1:], *x[1:])           batch_jacobian
    wrt="inputs", per_example=False:          (batch, *out[1:], batch, *x[1:])    full Jacobian

`per_example=True` keeps only the blocks d out[b] / d x[b], computed as if each example were
alone: exact when examples do not interact, which holds for every graphfit layer at
`training=False` (batch normalization then uses its moving statistics). At `training=True`
batch normalization mixes the examples of a batch: the default `per_example="auto"` then cuts
the exact blocks out of the full Jacobian, and an explicit `per_example=True` warns.

`per_example_gradients(model, x, y)` returns one gradient per example for every trainable
variable, shaped (batch, *var.shape), whose sum over the examples is the gradient of the
batch loss as the training step computes it. With a mean-reduced loss (every Keras loss by
default) the batch loss is sum_i w_i loss_i / batch, so example i's gradient is
grad(w_i loss_i) / batch.

Neither function moves batch-norm statistics or any other update-hook state, whatever
`training` is: their forward passes collect the update hooks and drop them.

Both work eagerly and inside a `tf.function` (XLA included). An eager call runs as a
`tf.function` kept per model and arguments (the model held weakly): the first call traces it
(about a second for a small model), later calls with the same input shape reuse the trace.

Example:

    >>> import numpy as np, graphfit as gf
    >>> from graphfit import autodiff, layers
    >>> model = gf.Sequential([layers.Dense(3, activation="tanh", name="hidden"),
    ...                        layers.Dense(2, name="head")], input_shape=(4,), name="mlp")
    >>> x = np.ones((5, 4), "float32")
    >>> J = autodiff.jacobian(model, x, of="hidden", wrt="inputs")
    >>> J.shape
    TensorShape([5, 3, 4])
    >>> {name: tuple(j.shape) for name, j in autodiff.jacobian(model, x, wrt="head").items()}
    {'mlp/head/kernel': (5, 2, 3, 2), 'mlp/head/bias': (5, 2, 2)}
    >>> grads = autodiff.per_example_gradients(model, x, np.zeros((5, 2)), loss="mse")
    >>> [tuple(g.shape) for g in grads]
    [(5, 4, 3), (5, 3), (5, 3, 2), (5, 2)]
"""

from __future__ import annotations

import collections
import functools
import warnings
import weakref
from typing import Any, Callable, Sequence

import tensorflow as tf

from graphfit.autodiff import node_jacobian
from graphfit.autodiff import per_example as per_example_lib

__all__ = ["jacobian", "per_example_gradients", "variable_key"]

_MODES = ("auto", "forward", "reverse")
# Eager calls run as tf.functions kept per model (weakly) and per arguments, so calling again
# traces again only for a new input shape. The functions hold the model by a weak reference.
_TRACED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_MAX_TRACED_PER_MODEL = 16


def _run(model, key, body: Callable, *args):
    """`body(model, *args)`: directly inside a trace, else as a concrete function kept per
    (model, key, input signature), called directly so that a new key (another layer or
    model) is not counted by TensorFlow as a retrace; a None key traces afresh."""
    if not tf.executing_eagerly():
        return body(model, *args)
    if key is None:
        return tf.function(functools.partial(body, model)).get_concrete_function(*args)(*args)
    functions = _TRACED.setdefault(model, collections.OrderedDict())
    # The policy too: compile(dtype_policy=...) changes what the same model computes in.
    cache_key = (key, model.dtype_policy.name, _signature(args))
    if cache_key not in functions:
        ref = weakref.ref(model)
        traced = tf.function(lambda *inner: body(ref(), *inner))
        functions[cache_key] = traced.get_concrete_function(*args)
        if len(functions) > _MAX_TRACED_PER_MODEL:
            functions.popitem(last=False)
    functions.move_to_end(cache_key)
    return functions[cache_key](*args)


def _signature(args) -> tuple:
    """A hashable description of the arguments' structure, shapes and dtypes."""
    leaves = tuple(None if t is None else (tuple(t.shape.as_list()), t.dtype.name)
                   for t in tf.nest.flatten(args))
    return str(tf.nest.map_structure(lambda _: 0, args)), leaves


def _loss_key(loss):
    """A key that is equal for equal losses: a name, a Keras loss by class and config (a new
    `MeanSquaredError()` per call reuses the trace), a function by identity."""
    if isinstance(loss, dict):
        return tuple((k, _loss_key(v)) for k, v in sorted(loss.items()))
    if isinstance(loss, (list, tuple)):
        return tuple(_loss_key(v) for v in loss)
    if hasattr(loss, "get_config") and not isinstance(loss, type):
        try:
            return type(loss), repr(sorted(loss.get_config().items()))
        except Exception:  # a config that cannot be read: key by identity
            pass
    hash(loss)
    return loss


def variable_key(variable: tf.Variable) -> str:
    """The key of a variable in a Jacobian dict: its name without ':0' ('model/dense/kernel').

    Two variables with the same name (layers given the same name by hand) get the keys
    'name' and 'name_1', in `wrt`'s order.
    """
    name = variable.name
    return name[:-2] if name.endswith(":0") else name


def _keys(variables) -> list[str]:
    keys, seen = [], {}
    for variable in variables:
        key = variable_key(variable)
        count = seen.get(key, 0)
        seen[key] = count + 1
        keys.append(key if count == 0 else f"{key}_{count}")
    return keys


def _as_inputs(model, x):
    """x as tensors; floating arrays in the model's dtype (the dtype the layers compute in)."""
    def convert(value):
        tensor = tf.convert_to_tensor(value)
        if tensor.dtype.is_floating and tensor.dtype != model.dtype:
            tensor = tf.cast(tensor, model.dtype)
        return tensor

    return tf.nest.map_structure(convert, x)


def _check_model(model, what: str) -> None:
    from graphfit.models.model import Model

    if not isinstance(model, Model):
        raise ValueError(f"{what} needs a graphfit Model. Received: model={model!r}")
    model.require_built(what)


def _wrt_variables(model, wrt) -> list[tf.Variable] | None:
    """The variables `wrt` names, or None for wrt="inputs"."""
    if isinstance(wrt, str):
        if wrt == "inputs":
            return None
        if wrt == "variables":
            variables = model.trainable_variables
            if not variables:
                raise ValueError(f"Model {model.name!r} has no trainable variables.")
            return variables
        names = node_jacobian.layer_names(model)
        if wrt not in names:
            layer = next((name for name in names if wrt.startswith(name) and wrt[len(name):]
                          .strip("_:.").lower() in ("output", "out", "activation")), None)
            hint = (f" For the derivative with respect to layer {layer!r}'s output (its "
                    f"activation), pass wrt=graphfit.autodiff.activation({layer!r})."
                    if layer else " For a layer's output (its activation) pass "
                                  "wrt=graphfit.autodiff.activation(name).")
            raise ValueError(
                f"wrt must be 'variables', 'inputs', a layer name (its variables), "
                f"activation(layer name) or a list of variables. Model {model.name!r} has no "
                f"layer named {wrt!r}. Its layers: {names}.{hint} Received: wrt={wrt!r}"
            )
        variables = model.get_layer(wrt).trainable_variables
        if not variables:
            raise ValueError(f"Layer {wrt!r} has no trainable variables (it is frozen or has "
                             f"no weights), so there is nothing to differentiate against.")
        return variables
    if isinstance(wrt, (list, tuple)) and wrt and all(isinstance(v, tf.Variable) for v in wrt):
        return list(wrt)
    raise ValueError("wrt must be 'variables', 'inputs', a layer name or a non-empty list of "
                     f"tf.Variable. Received: wrt={wrt!r}")


def jacobian(model, x, of: str = "output", wrt: str | Sequence[tf.Variable] = "variables",
             mode: str = "auto", training: bool = False, per_example: bool | str = "auto"):
    """The Jacobian of the model output, or of a named layer's output, for one batch.

    Args:
        model: a built graphfit `Model`.
        x: the batch of inputs (arrays or tensors, the structure the model takes).
        of: "output" for the model output; the name of one output of a model with several
            (a dict of outputs); or the name of any layer, whose output in this forward pass
            is differentiated. A model with a layer named "output" has its output win.
        wrt: "variables" (all trainable variables), a layer name (that layer's trainable
            variables), a list of variables, "inputs", or `activation(layer name)`: that
            layer's output in this forward pass (any node: the result is shaped as for
            "inputs", with the activation in place of x).
        mode: "forward", "reverse" or "auto" (forward mode when the numbers differentiated
            against are fewer than the numbers differentiated; reverse otherwise).
        training: the `training` flag of the forward pass. Update hooks never fire.
        per_example: for wrt="inputs": True for the batch_jacobian-style blocks
            (batch, *out[1:], *x[1:]) (exact when examples do not interact, see the module
            docstring; a warning when a layer mixes them), False for the full
            (batch, *out[1:], batch, *x[1:]) Jacobian, "auto" (default) for the blocks,
            computed exactly: cut out of the full Jacobian when a layer mixes the examples
            at `training` (`Layer.mixes_examples`, batch normalization in training).

    Returns:
        For variables, a dict `{variable_key(v): tensor (batch, *out[1:], *v.shape)}` in
        `wrt`'s order; a variable that `of` does not depend on has zeros. For inputs, a tensor
        (or the structure of `x`, one Jacobian per input) with the shapes above.

    Raises:
        ValueError: for a model that is not built, an unknown layer name (the names are
            listed), a layer that runs more than once per forward pass (ambiguous) or not at
            all, of="output" on a model with several outputs, integer inputs with
            wrt="inputs", or a bad `mode`.

    Example:

        >>> import numpy as np, tensorflow as tf, graphfit as gf
        >>> from graphfit import autodiff, layers
        >>> model = gf.Sequential([layers.Dense(2, name="d")], input_shape=(3,))
        >>> x = np.ones((4, 3), "float32")
        >>> J = autodiff.jacobian(model, x, wrt="inputs")          # (batch, out, in)
        >>> bool(tf.reduce_all(J == tf.transpose(model.get_layer("d").kernel)))
        True
        >>> autodiff.jacobian(model, x, wrt="inputs", per_example=False).shape
        TensorShape([4, 2, 4, 3])
    """
    _check_model(model, "jacobian")
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES}. Received: mode={mode!r}")
    if not isinstance(per_example, bool) and per_example != "auto":
        raise ValueError("per_example must be True, False or 'auto'. "
                         f"Received: per_example={per_example!r}")
    if isinstance(wrt, node_jacobian.Activation):
        return _jacobian_of_activation(model, x, of, wrt, training, per_example)
    variables = _wrt_variables(model, wrt)
    x = _as_inputs(model, x)
    node_fn = node_jacobian.node_function(model, of, training)
    if variables is None:
        integers = [t.dtype.name for t in tf.nest.flatten(x) if not t.dtype.is_floating]
        if integers:
            raise ValueError(
                f"wrt='inputs' needs floating inputs, but x has {integers[0]} values (token "
                f"ids or class labels cannot be nudged). Differentiate with respect to the "
                f"variables (an Embedding layer's name, say) or an Embedding's output instead."
            )
    node_fn(x)  # checks the node (eagerly: clean errors before any tracing)
    if variables is None:
        per_example = _per_example_mode(model, per_example, training)
    wrt_key = "inputs" if variables is None else tuple(v.ref() for v in variables)
    body = functools.partial(_jacobian_body, of=of, variables=variables, mode=mode,
                             training=training, per_example=per_example)
    return _run(model, ("jacobian", of, wrt_key, mode, training, per_example), body, x)


def _jacobian_of_activation(model, x, of, wrt, training, per_example):
    """d of / d (another layer's output), per example or full, as for wrt="inputs"."""
    node_jacobian.check_activation(model, wrt)
    x = _as_inputs(model, x)
    node_fn = node_jacobian.node_function(model, of, training)
    node_fn(x)  # checks the node (eagerly: clean errors before any tracing)
    per_example = _per_example_mode(model, per_example, training)

    def body(model, x):
        return node_jacobian.wrt_activation(model, node_jacobian.node_function(
            model, of, training), x, wrt.layer, per_example)

    return _run(model, ("jacobian", of, wrt, training, per_example), body, x)


def _mixing_layers(model, training: bool) -> list[str]:
    """The layers whose training-mode call mixes the examples of a batch."""
    if not training:
        return []
    return [layer.name for layer in model.flatten_layers() if layer.mixes_examples]


def _per_example_mode(model, per_example, training: bool):
    """True (blocks), False (full) or "diagonal": the exact blocks, cut out of the full
    Jacobian, for "auto" on a model whose layers mix the examples at `training`."""
    mixing = _mixing_layers(model, training)
    if per_example == "auto":
        return "diagonal" if mixing else True
    if per_example is True and mixing:
        warnings.warn(
            f"jacobian(per_example=True) differentiates every example as if it were alone, "
            f"but at training=True layers {mixing} of model {model.name!r} mix the examples "
            f"of a batch (batch statistics), so the blocks are not exact. Use "
            f"per_example='auto' (exact blocks, from the full Jacobian), per_example=False, "
            f"or training=False.", stacklevel=3)
    return per_example


def _jacobian_body(model, x, of, variables, mode, training, per_example):
    node_fn = node_jacobian.node_function(model, of, training)
    out = node_fn(x)  # its shape; the ops of this pass are pruned when traced
    out_shape = tf.shape(out)
    out_size = node_jacobian.size(out.shape[1:])
    if variables is not None:
        inputs = sum(node_jacobian.size(v.shape) for v in variables)
        chosen = node_jacobian.choose_mode(mode, inputs, (out.shape[0] or 1) * out_size)
        parts = node_jacobian.wrt_variables(node_fn, x, out_shape, variables, chosen)
        # In the variables' dtype (float32 under a mixed policy), whichever mode ran.
        parts = [tf.cast(part, v.dtype) for part, v in zip(parts, variables)]
        return dict(zip(_keys(variables), parts))
    inputs = sum(node_jacobian.size(t.shape[1:]) for t in tf.nest.flatten(x))
    chosen = node_jacobian.choose_mode(mode, inputs, out_size)
    if per_example == "diagonal":
        full = node_jacobian.wrt_inputs(node_fn, x, out_shape, chosen, False)
        return tf.nest.map_structure(
            lambda j, t: node_jacobian.diagonal_blocks(j, out, t), full, x)
    return node_jacobian.wrt_inputs(node_fn, x, out_shape, chosen, per_example)


def per_example_gradients(model, x, y, loss: Any = None, sample_weight=None,
                          training: bool = False, method: str = "auto") -> list[tf.Tensor]:
    """One gradient per example for every trainable variable, without batches of one.

    Example i's gradient is the gradient of its term of the batch loss, so the sum over the
    examples equals the gradient of the batch loss as `fit`'s training step computes it. With
    a mean-reduced loss (reduction "sum_over_batch_size", every Keras loss by default) the
    batch loss is sum_i w_i loss_i / batch, so example i contributes grad(w_i loss_i) / batch;
    with reduction "sum", grad(w_i loss_i).

    Args:
        model: a built graphfit `Model`.
        x: the batch of inputs.
        y: the labels (a dict by output name for a model with several outputs).
        loss: a Keras loss, its name, or a function `(y_true, y_pred) -> losses`; None uses
            the compiled model's loss (with its loss weights).
        sample_weight: optional per-example weights, shape (batch,).
        training: the `training` flag of the forward passes. At True, layers that mix examples
            (BatchNormalization) see each example as a batch of one. Update hooks never fire.
        method: "vectorized" (`tf.vectorized_map` over the examples: each example's forward
            and backward pass, all examples at once; an error if an op cannot be vectorized),
            "loop" (`tf.map_fn`, one example after the other) or "auto" (vectorized, and the
            loop, with a warning, for models pfor cannot vectorize: e.g. Dropout at
            training=True, whose random generator has no vectorized form).

    Returns:
        A list aligned with `model.trainable_variables`: for each variable a tensor of shape
        (batch, *var.shape).

    Raises:
        ValueError: for a model that is not built, no loss (not compiled and none given), a
            loss reduction other than "sum_over_batch_size"/"sum", or a bad `method`.

    Example:

        >>> import numpy as np, tensorflow as tf, graphfit as gf
        >>> from graphfit import autodiff, layers
        >>> model = gf.Sequential([layers.Dense(1)], input_shape=(2,))
        >>> x, y = np.array([[1.0, 0.0], [0.0, 2.0]], "float32"), np.zeros((2, 1), "float32")
        >>> kernel_grads, bias_grads = autodiff.per_example_gradients(model, x, y, loss="mse")
        >>> kernel_grads.shape, bias_grads.shape
        (TensorShape([2, 2, 1]), TensorShape([2, 1]))
    """
    _check_model(model, "per_example_gradients")
    if method not in per_example_lib.METHODS:
        raise ValueError(f"method must be one of {per_example_lib.METHODS}. "
                         f"Received: method={method!r}")
    if y is None:
        raise ValueError("per_example_gradients needs the labels y to compute the loss.")
    loss_set = per_example_lib.resolve_loss_set(model, loss)
    mixing = _mixing_layers(model, training)
    if mixing:
        warnings.warn(
            f"per_example_gradients(training=True) runs every example as a batch of one, but "
            f"layers {mixing} of model {model.name!r} mix the examples of a batch (batch "
            f"statistics), so these gradients do not add up to the batch gradient. Use "
            f"training=False (moving statistics) for exact per-example gradients.",
            stacklevel=2)
    x = _as_inputs(model, x)
    y = tf.nest.map_structure(tf.convert_to_tensor, y)
    if sample_weight is not None:
        sample_weight = tf.cast(tf.convert_to_tensor(sample_weight), model.dtype)
    _check_same_batch(x, y, sample_weight)
    variables = model.trainable_variables
    if not variables:
        raise ValueError(f"Model {model.name!r} has no trainable variables.")
    try:
        loss_key = loss_set if loss is None else _loss_key(loss)
    except TypeError:  # an unhashable loss: traced afresh on each call
        loss_key = None
    key = None if loss_key is None else (
        "per_example_gradients", loss_key, tuple(v.ref() for v in variables), training, method)
    body = functools.partial(_per_example_body, loss_set=loss_set, variables=variables,
                             training=training, method=method)
    return _run(model, key, body, x, y, sample_weight)


def _per_example_body(model, x, y, sample_weight, loss_set, variables, training, method):
    return per_example_lib.compute(model, loss_set, x, y, sample_weight, variables,
                                training=training, method=method)


def _check_same_batch(x, y, sample_weight) -> None:
    """A clear error when x, y and sample_weight disagree on the number of examples (pfor
    would otherwise fail deep inside the vectorized loop with a gather index error)."""
    sizes = {}
    for label, value in (("x", x), ("y", y), ("sample_weight", sample_weight)):
        for tensor in tf.nest.flatten(value):
            if tensor is None:
                continue
            size = tensor.shape[0] if tensor.shape.rank else None
            if size is not None:
                sizes.setdefault(label, (size, tuple(tensor.shape)))
    if len({size for size, _ in sizes.values()}) > 1:
        shapes = ", ".join(f"{label} {shape}" for label, (_, shape) in sizes.items())
        raise ValueError(
            f"per_example_gradients needs as many labels and sample weights as examples; "
            f"received {shapes}. Pass one label (and weight) per row of x."
        )

