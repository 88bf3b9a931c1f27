"""The serving functions of an export: inputs by name, raw rows in, named outputs out.

Each function takes the model's inputs as named tensors with a dynamic batch axis (one input:
`x`; several: the model's input names; a run on a table: its raw columns by name), applies
the run's preprocessing, runs the model in inference mode and returns a dict of named outputs:

- `predict` (also `serving_default`): the model's outputs, `outputs` for a model with one,
  the output names for a model with several;
- `classify` (a single-output model compiled with a cross-entropy): `class` (int64, one per
  row), `class_name` (a table's target of class names) and
  `probabilities` (softmax or sigmoid of logits; a binary model with one output
  gives the two columns `1 - p`, `p`, so that `class` is their argmax);
- one per named layer: that layer's output, as `outputs` (an embedding, a hidden layer).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import tensorflow as tf

from graphfit.core import layer_outputs
from graphfit.export.preprocessing import Preprocessing
from graphfit.training.losses import LossKind, loss_kind

__all__ = ["RESERVED_NAMES", "input_specs", "classifier_kind", "serving_functions"]

# Signature names graphfit itself gives; a layer signature may not take one.
RESERVED_NAMES = ("serving_default", "predict", "classify")


def input_specs(model) -> dict[str, tf.TensorSpec]:
    """{input name: spec with a dynamic batch axis} of the built model."""
    spec = model.built_input_spec
    if isinstance(spec, dict):
        named = dict(spec)
    elif isinstance(spec, (list, tuple)):
        named = {f"input_{i}": s for i, s in enumerate(spec)}
    else:
        named = {"x": spec}
    for name in named:
        if not name.isidentifier():
            raise ValueError(
                f"cannot export model {model.name!r}: its input {name!r} is not a valid "
                f"signature argument name (letters, digits and underscores, not starting with "
                f"a digit); rename the input")
    return {name: tf.TensorSpec([None, *s.shape[1:]], s.dtype, name=name)
            for name, s in named.items()}


def classifier_kind(model) -> LossKind | None:
    """The loss kind of a single-output model compiled with a cross-entropy, else None."""
    state = model.compile_state
    if state is None or state.loss_set is None or model.output_names is not None:
        return None
    if not state.loss_set.built:
        state.loss_set.build(None, model.dtype)
    kind = loss_kind(state.loss_set.losses[None])
    return kind if kind.labels in ("sparse_categorical", "categorical", "binary") else None


def _model_inputs(model, named: dict):
    spec = model.built_input_spec
    if isinstance(spec, dict):
        return dict(named)
    if isinstance(spec, (list, tuple)):
        return [named[f"input_{i}"] for i in range(len(spec))]
    return named["x"]


def _probabilities(outputs, kind: LossKind) -> dict:
    if outputs.dtype in (tf.bfloat16, tf.float16):  # a mixed policy's logits
        outputs = tf.cast(outputs, tf.float32)
    if kind.labels == "binary":
        p = tf.sigmoid(outputs) if kind.from_logits else outputs
        if p.shape[-1] == 1:  # one probability: its two classes
            p = tf.concat([1 - p, p], axis=-1)
            return {"class": tf.argmax(p, axis=-1), "probabilities": p}
        return {"class": tf.cast(p > 0.5, tf.int64), "probabilities": p}
    p = tf.nn.softmax(outputs) if kind.from_logits else outputs
    return {"class": tf.argmax(p, axis=-1), "probabilities": p}


def _layer_output(model, name: str, inputs):
    with layer_outputs.capture_outputs(model, [name]) as captured:
        model(inputs, training=False)
    if captured.calls.get(name, 0) != 1:
        raise ValueError(
            f"cannot export the output of layer {name!r}: it ran "
            f"{captured.calls.get(name, 0)} times in one forward pass (a shared layer has "
            f"no single output); name a layer that runs once")
    return {"outputs": captured[name]}


def _function(specs: dict, body: Callable,
              output_dtype: tf.DType) -> tf.types.experimental.GenericFunction:
    """A tf.function of named tensor arguments (the signature's input names) whose floating
    outputs are in `output_dtype` (a mixed-precision model's 16-bit outputs are served in
    its float32 variable dtype: serving clients rarely read bfloat16)."""
    names = list(specs)

    def serve(*tensors):
        outputs = body(dict(zip(names, tensors)))
        return tf.nest.map_structure(
            lambda t: tf.cast(t, output_dtype) if t.dtype.is_floating else t, outputs)

    serve.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])
    return tf.function(serve, input_signature=[specs[n] for n in names], autograph=False)


def _column_specs(table) -> dict[str, tf.TensorSpec]:
    """One input per raw column of a table, by the column's name."""
    specs = table.raw_specs()
    for name in specs:
        if not name.isidentifier():
            raise ValueError(f"cannot export: the column {name!r} is not a valid signature "
                             f"argument name (letters, digits and underscores, not starting "
                             f"with a digit); rename the column in the data")
    return specs


def serving_functions(model, preprocessing: Preprocessing, classify: bool | None,
                      layer_names=()) -> dict[str, tf.types.experimental.GenericFunction]:
    """{signature name: tf.function} for `model` (see the module docstring).

    Args:
        model: the built model.
        preprocessing: what to do to the raw inputs first.
        classify: add `classify`; None: when `classifier_kind` finds a classifier.
        layer_names: layers whose outputs get a signature of their own (by layer name).

    Raises:
        ValueError: `classify=True` for a model that is not a classifier, an unknown layer
            or a layer name that is a reserved signature name.
    """
    table = preprocessing.table_preprocessor()
    specs = input_specs(model) if table is None else _column_specs(table)

    def inputs_of(named):
        if table is not None:
            return table.transform(named)
        return preprocessing.apply_to_inputs(_model_inputs(model, named))

    def predict(named):
        outputs = model(inputs_of(named), training=False)
        return dict(outputs) if isinstance(outputs, dict) else {"outputs": outputs}

    functions = {"predict": _function(specs, predict, model.variable_dtype)}
    kind = classifier_kind(model)
    if classify and kind is None:
        raise ValueError(
            f"cannot export a classify signature for model {model.name!r}: it is not a "
            f"classifier (one output, compiled with a cross-entropy loss); leave classify "
            f"out to export its predictions")
    if kind is not None and classify is not False:
        names = preprocessing.class_names

        def classified(named):
            result = _probabilities(model(inputs_of(named), training=False), kind)
            if names:  # a table's target of class names
                result["class_name"] = tf.gather(tf.constant(names), result["class"])
            return result

        functions["classify"] = _function(specs, classified, model.variable_dtype)
    for name in layer_names:
        if name in RESERVED_NAMES:
            raise ValueError(f"a layer signature cannot be called {name!r}: graphfit names "
                             f"its own signatures {', '.join(RESERVED_NAMES)}")
        model.get_layer(name)  # an unknown name: a ValueError listing the layers
        functions[name] = _function(
            specs, lambda named, name=name: _layer_output(model, name, inputs_of(named)),
            model.variable_dtype)
    return functions
