"""Seeing inside the graph: what TensorFlow and XLA do to a traced function or training step.

    report = gf.inspect.step_graph(model, stage="train")   # the compiled training step
    print(report)
    report = gf.inspect.function_graph(fn, *example_args)    # any tf.function

A report holds the op counts of the traced graph before and after TensorFlow's graph optimizer
(Grappler), what each of its main passes does when it runs alone (constant folding,
common-subexpression elimination, arithmetic simplification, dependency and layout
optimization, the remapper), and for an XLA-compiled function the HLO instruction counts
before and after XLA's passes with the fusions XLA made. A step report also counts the model's
trainable and non-trainable variables and update hooks, and its FLOPs (`model.flops`).

Tracing never runs a step: no variable changes. See `graphfit.inspect.grappler` and
`graphfit.inspect.xla_report` for how the passes are run and what is counted.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from graphfit.core import validation
from graphfit.inspect import flops as flops_lib
from graphfit.inspect import grappler, xla_report
from graphfit.inspect.flops_tracing import StepTrace
from graphfit.inspect.grappler import OpCounts, PassEffect
from graphfit.inspect.xla_report import XlaReport
from graphfit.training.feeds import SpecFeed

__all__ = ["GraphReport", "ModelCounts", "function_graph", "step_graph", "step_flops",
           "model_flops", "flops_line", "STAGES"]

STAGES = ("train", "test", "predict")


@dataclasses.dataclass(frozen=True)
class ModelCounts:
    """The model's variable collections and update hooks (UPDATE_OPS).

    Attributes:
        trainable, non_trainable: (variables, scalar values) of each collection.
        update_hooks: one "layer/variable (kind)" entry per hook a training step runs.

    Example:

        >>> import graphfit as gf
        >>> from graphfit import layers
        >>> from graphfit import inspect as gf_inspect
        >>> model = gf.Sequential([layers.Dense(3), layers.BatchNormalization(name="bn")])
        >>> model.build((None, 2))
        >>> print(gf_inspect.ModelCounts.of(model).line())
        variables: 4 trainable (15 parameters), 2 non-trainable (6 values), 2 update hooks
        (bn/moving_mean (moving_average), bn/moving_variance (moving_average))
    """

    trainable: tuple[int, int]
    non_trainable: tuple[int, int]
    update_hooks: tuple[str, ...]

    @classmethod
    def of(cls, model) -> "ModelCounts":
        def counted(variables):
            return len(variables), int(sum(np.prod(v.shape.as_list(), dtype=np.int64)
                                           for v in variables))

        hooks = tuple(f"{getattr(h.layer, 'name', h.layer)}/{_short(h.variable.name)} ({h.kind})"
                      for h in model.update_ops)
        return cls(counted(model.trainable_variables), counted(model.non_trainable_variables),
                   hooks)

    def line(self) -> str:
        hooks = f" ({', '.join(self.update_hooks)})" if self.update_hooks else ""
        return (f"variables: {self.trainable[0]} trainable ({self.trainable[1]:,} parameters), "
                f"{self.non_trainable[0]} non-trainable ({self.non_trainable[1]:,} values), "
                f"{len(self.update_hooks)} update hooks{hooks}")


def _short(name: str) -> str:
    return name.split("/")[-1].split(":")[0]


@dataclasses.dataclass(frozen=True)
class GraphReport:
    """What happened to one traced function under Grappler (and XLA); `print` it.

    Attributes:
        title: what was traced ("train step of model 'sequential'", a function's name).
        signature: the traced inputs, e.g. "x: float32[32, 64]".
        before: op counts of the traced graph (main graph plus reached library functions).
        after: op counts after Grappler's default pipeline (for a step: with its optimizer's
            `graph_rewrites`, as fit runs it).
        passes: what each pass did alone on the traced graph; the last is the pipeline.
        jit_compile: whether the function is compiled by XLA.
        xla: HLO counts and fusions when `jit_compile`, else None.
        model: the model's variable and update-hook counts (step reports only).
        flops: `model.flops(batch_size)` (step reports only; None when unavailable).
        stage: "train", "test" or "predict" for a step report, else None.
        batch_size: the batch the step was traced for (step reports).
        xla_setting: how XLA was chosen, e.g. "jit_compile='auto' chose XLA" (step reports).
        notes: anything the reader should know (why FLOPs or XLA figures are missing).
        optimized: the GraphDef after Grappler's default pipeline, to look at yourself.

    Example:

        >>> import tensorflow as tf
        >>> from graphfit import inspect as gf_inspect
        >>> @tf.function
        ... def affine():
        ...     w, x, b = tf.constant(2.0), tf.constant(3.0), tf.constant(1.0)
        ...     return w * x + b
        >>> report = gf_inspect.function_graph(affine)
        >>> report.before.total, report.after.by_type
        (6, {'Const': 1})
    """

    title: str
    signature: str
    before: OpCounts
    after: OpCounts
    passes: tuple[PassEffect, ...]
    jit_compile: bool
    xla: XlaReport | None = None
    model: ModelCounts | None = None
    flops: dict | None = None
    stage: str | None = None
    batch_size: int | None = None
    xla_setting: str | None = None
    notes: tuple[str, ...] = ()
    optimized: Any = dataclasses.field(default=None, repr=False, compare=False)

    def pass_effect(self, name: str) -> PassEffect:
        """The effect of the pass Grappler calls `name` ("constfold", ..., "default")."""
        for effect in self.passes:
            if effect.name == name:
                return effect
        raise KeyError(f"No pass {name!r} in this report; passes: {[p.name for p in self.passes]}")

    def lines(self, top: int = 8, model_details: bool = True) -> list[str]:
        """The report as text lines.

        Args:
            top: how many op types to list.
            model_details: include the variables line and the FLOPs method (a caller that
                prints several steps of one model prints them once instead).
        """
        out = [f"{self.title} ({self.signature})"]
        if self.model is not None and model_details:
            out.append("  " + self.model.line())
        what = "step" if self.stage else "function"
        setting = self.xla_setting or f"jit_compile={self.jit_compile}"
        if self.jit_compile:
            out.append(f"  XLA: on ({setting}): the whole {what} is one XLA cluster, "
                       f"compiled by XLA")
            if self.xla is not None:
                out += ["    " + line for line in self.xla.lines(top)]
        else:
            out.append(f"  XLA: off ({setting}): the {what} runs on the TensorFlow executor "
                       f"after Grappler")
        functions = len(self.before.functions)
        counted = "the traced graph" + (
            f" + {functions} library function{'s' if functions != 1 else ''}, each once"
            if functions else "")
        reference = (", shown for reference: under XLA the graph goes to XLA instead"
                     if self.jit_compile else "")
        out.append(f"  Grappler (TensorFlow's graph optimizer{reference}); counted: {counted}")
        out.append(f"    before: {_ops(self.before.total)}: {self.before.top(top)}")
        out.append(f"    after:  {_ops(self.after.total)}: {self.after.top(top)}")
        out += ["    " + effect.summary() for effect in self.passes]
        if self.flops is not None:
            out.append("  " + flops_line(self.flops, self.stage, self.batch_size))
            if model_details and self.flops.get("method"):
                out.append(f"  FLOPs method: {self.flops['method']}")
        out += [f"  note: {note}" for note in self.notes]
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def _ops(count: int) -> str:
    return f"{count} op{'s' if count != 1 else ''}"


def flops_line(flops: dict, stage: str | None, batch_size: int | None) -> str:
    """One line of FLOPs for a step: forward + backward + update for the train step."""
    batch = f" (batch {batch_size})" if batch_size else ""
    if stage == "train":
        # The step's forward pass runs with training=True (dropout, batch statistics), so it
        # is `forward_train`, not the inference `forward`; the four parts add up exactly.
        return (f"FLOPs{batch}: forward (training) {flops['forward_train']:,} + loss "
                f"{flops['loss']:,} + backward {flops['backward']:,} + update "
                f"{flops['update']:,} = training step {flops['training_step']:,}")
    return f"FLOPs{batch}: forward {flops['forward']:,} (backward in training: " \
           f"{flops['backward']:,})"


# --------------------------------------------------------------------------- any function
def _called_spec(value):
    """The TensorSpec of an input as it was given (a spec, a tensor, an array), else None."""
    if isinstance(value, tf.TensorSpec):
        return value
    if isinstance(value, (tf.Tensor, np.ndarray)):
        return tf.TensorSpec(value.shape, tf.as_dtype(value.dtype))
    return None


def _as_called(traced, given) -> str:
    """The input as `function_graph` was called with it; the traced spec where the function
    traced a more general one (an input_signature, reduce_retracing) is added."""
    text = _spec_text(traced)
    called = _called_spec(given)
    if called is None or not isinstance(traced, tf.TensorSpec):
        return text
    shown = _spec_text(called)
    return shown if shown == text else f"{shown} (traced as {text})"


def _signature_text(concrete, called=None) -> str:
    args, kwargs = concrete.structured_input_signature
    if called is not None and len(called[0]) == len(args):
        given_args, given_kwargs = called
        texts = [_as_called(a, g) for a, g in zip(args, given_args)]
        kw_texts = {k: _as_called(v, given_kwargs.get(k)) for k, v in kwargs.items()}
        names = [a.name for a in concrete.function_type.parameters.values()]
        parts = [f"{names[i] if i < len(names) else f'arg{i}'}: {text}"
                 for i, text in enumerate(texts)]
        return ", ".join(parts + [f"{k}: {t}" for k, t in kw_texts.items()]) or "no inputs"
    parts = []
    names = [a.name for a in concrete.function_type.parameters.values()] if hasattr(
        concrete, "function_type") else []
    if names == ["data"] and len(args) == 1 and isinstance(args[0], tuple):
        # A model step takes one batch, (x, y, sample_weight): name its parts.
        names, args = ["x", "y", "sample_weight"], args[0]
    for i, value in enumerate(args):
        name = names[i] if i < len(names) else f"arg{i}"
        parts.append(f"{name}: {_spec_text(value)}")
    parts += [f"{k}: {_spec_text(v)}" for k, v in kwargs.items()]
    return ", ".join(parts) or "no inputs"


def _spec_text(value) -> str:
    if isinstance(value, tf.TensorSpec):
        dims = ", ".join("None" if d is None else str(d) for d in value.shape.as_list()) \
            if value.shape.rank is not None else "..."
        return f"{value.dtype.name}[{dims}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_spec_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(_spec_text(v) for v in value) + ")"
    return repr(value)


def _is_jit(function) -> bool:
    # tf.function keeps its jit_compile argument here; there is no public accessor.
    return bool(getattr(function, "_jit_compile", False))


def _report(function, args, kwargs, title: str, passes, rewrites=None, called=None,
            **extra) -> GraphReport:
    concrete = function.get_concrete_function(*args, **kwargs)
    graph_def, fetches = grappler.graph_def_of(concrete.graph)
    optimized, effects = grappler.run_passes(graph_def, fetches, passes, rewrites)
    jit = _is_jit(function)
    notes = list(extra.pop("notes", ()))
    xla = None
    if jit:
        try:
            xla = xla_report.xla_report(function, *args, **kwargs)
        except ValueError as error:  # an open batch dimension: XLA needs fixed shapes
            notes.append(f"no XLA report: {error}")
    return GraphReport(title=title, signature=_signature_text(concrete, called),
                       before=grappler.count_ops(graph_def), after=grappler.count_ops(optimized),
                       passes=tuple(effects), jit_compile=jit, xla=xla, notes=tuple(notes),
                       optimized=optimized, **extra)


def function_graph(fn: Callable, *example_args, passes=tuple(grappler.PASSES),
                   **example_kwargs) -> GraphReport:
    """Traces `fn` for the example inputs and reports what Grappler (and XLA) make of it.

    Args:
        fn: a `tf.function` (XLA figures when it was made with `jit_compile=True`), or a plain
            Python function of tensors (wrapped in `tf.function`).
        *example_args, **example_kwargs: inputs: tensors, Python values, or `tf.TensorSpec`s
            (an XLA report needs fully defined shapes).
        passes: the Grappler passes to run alone, by Grappler's name (keys of
            `graphfit.inspect.grappler.PASSES`); the default pipeline always runs last.

    Returns:
        A `GraphReport`.
    """
    if not hasattr(fn, "get_concrete_function"):
        fn = tf.function(fn)
    title = f"function {getattr(fn, '__name__', type(fn).__name__)!r}"
    return _report(fn, example_args, example_kwargs, title, passes,
                   called=(example_args, example_kwargs))


# ---------------------------------------------------------------------------- model steps
def _with_batch(value, batch_size, dtype: tf.DType, keep: bool = False):
    """A TensorSpec with batch axis `batch_size` (its own with `keep`) for an example array,
    tensor or spec (floats in the model's dtype, as `fit` converts them)."""
    if isinstance(value, tf.TensorSpec):
        shape, value_dtype = value.shape.as_list(), value.dtype
    else:
        array = value if isinstance(value, (np.ndarray, tf.Tensor)) else np.asarray(value)
        shape, value_dtype = list(array.shape), tf.as_dtype(array.dtype)
        if value_dtype.is_floating or value_dtype == tf.bool:
            value_dtype = dtype
    return tf.TensorSpec(shape if keep else [batch_size, *shape[1:]], value_dtype)


def _default_labels(model, state, batch_size):
    """Label specs shaped as the loss expects (class ids for a sparse categorical loss)."""

    def labels(output):
        spec = model.output_spec if output is None else model.output_spec[output]
        if state.loss_set.kind(output).labels == "sparse_categorical":
            return tf.TensorSpec([batch_size, *spec.shape[1:-1]], tf.int64)  # class ids
        return tf.TensorSpec([batch_size, *spec.shape[1:]], model.dtype)

    def default_labels(names, needed):
        if state.loss_set is None:
            return None
        if not state.loss_set.built:  # its kinds are known once it has the outputs
            state.loss_set.build(model.output_names, model.dtype)
            # `needed` was counted from the losses before they were built (none yet)
            needed = state.outputs_needing_labels(names)
        return labels(None) if names is None else {n: labels(n) for n in needed}

    return default_labels


def _prepared_steps(model, stage: str, batch_size, x, y, keep_shapes: bool = False):
    """The model's compiled steps, prepared (losses, metrics, slots) as `fit` would, and the
    step's input specs."""
    if not getattr(model, "compiled", False):
        raise RuntimeError(
            "inspect.step_graph needs a compiled model: call model.compile(optimizer=..., "
            "loss=...) first."
        )
    state = model.compile_state
    if stage != "predict":
        state.require_loss("inspect.step_graph")
    if x is None:
        model.require_built("inspect.step_graph")
        x = model.built_input_spec
    keep = keep_shapes and x is not model.built_input_spec
    x_spec = tf.nest.map_structure(lambda v: _with_batch(v, batch_size, model.dtype, keep),
                                   model.arrange_inputs(x))
    if keep:  # the labels have a row per output row (a graph batch: per graph)
        batch_size = flops_lib.output_rows(model, x_spec)
    y_spec = None if y is None else tf.nest.map_structure(
        lambda v: _with_batch(v, batch_size, model.dtype), y)
    feed = SpecFeed(x_spec, y_spec, _default_labels(model, state, batch_size))
    state.prepare(model, feed)
    if state.steps.run_eagerly:
        raise ValueError("The model was compiled with run_eagerly=True, so its steps are not "
                         "traced into graphs; compile it without run_eagerly to inspect them.")
    return state.steps, feed.x_spec, feed.y_spec


def step_graph(model, stage: str = "train", batch_size: int | None = 32, *, x=None, y=None,
               passes=tuple(grappler.PASSES), flops: bool = True,
               keep_shapes: bool = False) -> GraphReport:
    """Reports on one compiled step of `model`: Grappler, XLA, variables and FLOPs.

    The step is traced (or its existing trace reused) for a batch of `batch_size`; no step
    runs, so no variable changes. A model that has not trained yet is prepared first the way
    `fit` prepares it (losses, metrics, optimizer slots), for labels shaped as the loss
    expects (class ids for a sparse categorical loss) unless `y` is given.

    Args:
        model: a built, compiled graphfit model.
        stage: "train", "test" or "predict".
        batch_size: the batch the step is traced for; None traces for any batch size, as
            `fit` does (no XLA report then: XLA compiles for fixed shapes).
        x, y: example inputs and labels (arrays, tensors or TensorSpecs): only their shapes
            and dtypes matter. `x` builds an unbuilt model.
        passes: the Grappler passes to run alone (see `function_graph`).
        flops: add `model.flops(batch_size)` to the report.
        keep_shapes: trace at `x`'s own shapes, not at `batch_size` rows (a graph batch,
            whose rows are nodes and edges; `batch_size` is then its graphs, the labels').

    Returns:
        A `GraphReport` with `model` and `flops` filled in.

    Raises:
        ValueError: for an unknown stage or a model compiled with run_eagerly=True.
        RuntimeError: when the model is not compiled (or has no loss, for train and test).
    """
    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES}. Received: stage={stage!r}")
    batch_size = validation.positive_int("batch_size", batch_size, allow_none=True)
    steps, x_spec, y_spec = _prepared_steps(model, stage, batch_size, x, y, keep_shapes)
    if stage == "predict":
        function, args = steps.predict_step, ((x_spec,),)
    else:
        function = steps.train_step if stage == "train" else steps.test_step
        args = ((x_spec, y_spec, None),)
    flop_counts, notes = None, []
    if flops and stage == "train":
        flop_counts, notes = _traced_with_flops(model, function, args, batch_size,
                                                x if keep_shapes else None)
    elif flops:
        flop_counts, notes = model_flops(model, batch_size, x if keep_shapes else None)
    setting = model.compile_state.jit_compile_setting
    # fit, evaluate and predict call the model's loops under its optimizer's Grappler
    # settings (CompiledSteps), so the pipeline shown is the one they run.
    optimizer = model.compile_state.optimizer
    rewrites = None if optimizer is None else optimizer.graph_rewrites
    return _report(function, args, {}, f"{stage} step of model {model.name!r}", passes,
                   rewrites,
                   model=ModelCounts.of(model), flops=flop_counts, stage=stage,
                   batch_size=batch_size, notes=notes,
                   xla_setting=_setting_text(setting, steps.jit_compile, model))


def _setting_text(setting, jit: bool, model) -> str:
    if setting == "auto":
        # Name the layers that kept XLA off (a BlackBox runs Python, which XLA cannot compile).
        unsupported = [f"{layer.name!r} ({type(layer).__name__})"
                       for layer in model.flatten_layers() if not layer.supports_jit]
        reason = (f", as layer(s) {', '.join(unsupported)} cannot be XLA-compiled"
                  if unsupported and not jit else "")
        return f"jit_compile='auto' chose {'XLA' if jit else 'no XLA'}{reason}"
    if bool(setting) != jit:
        return f"jit_compile={setting}, but a layer does not support XLA"
    return f"jit_compile={setting}"


def model_flops(model, batch_size: int | None, inputs=None, *,
                step: StepTrace | None = None) -> tuple[dict | None, list[str]]:
    """(`model.flops(batch_size=..., inputs=...)`, []) from `graphfit.inspect.flops`, or
    (None, [why not]); `step`: the compiled train step's `StepTrace`, to count on its graph
    (`count_flops`)."""
    try:
        return flops_lib.count_flops(model, batch_size or 1, inputs, step=step), []
    except Exception as error:  # FLOPs are one line of the report; keep the rest
        return None, [f"FLOPs not computed: {type(error).__name__}: {error}"]


def _traced_with_flops(model, train_step, args, batch_size, inputs):
    """Traces the compiled `train_step` for `args` (unless it was traced before), recording
    the trace, and counts the model's FLOPs on its graph: the step is traced once, for its
    report and its FLOPs. A step traced before is counted as `model.flops()` counts."""
    trace = StepTrace(model)
    with trace.recording():
        train_step.get_concrete_function(*args)
    return model_flops(model, batch_size, inputs, step=trace)


def step_flops(model, batch_size: int | None = 32, *, x=None, y=None,
               keep_shapes: bool = False) -> tuple[dict | None, list[str]]:
    """(FLOPs, notes) as `model_flops` gives them, counted on the graph of the model's
    compiled train step, traced here as `step_graph(model, "train", ...)` traces it for the
    same arguments, which then reports on this trace: a caller that wants the FLOPs apart
    from the step reports (`graphfit inspect` prints them once for all stages) traces the
    training step once. A model without a compiled train step (no loss, run eagerly), or a
    step for any batch size (`batch_size=None`, counted at 1), is counted by `model.flops()`
    alone.

    Args:
        model, batch_size, x, y, keep_shapes: as for `step_graph`.

    Returns:
        (`model.flops(...)`'s dict, []), or (None, [why not]).
    """
    batch_size = validation.positive_int("batch_size", batch_size, allow_none=True)
    inputs = x if keep_shapes else None
    if batch_size is None and not keep_shapes:  # a step for any batch: FLOPs need fixed ones
        return model_flops(model, batch_size, inputs)
    try:
        steps, x_spec, y_spec = _prepared_steps(model, "train", batch_size, x, y, keep_shapes)
        return _traced_with_flops(model, steps.train_step, ((x_spec, y_spec, None),),
                                  batch_size, inputs)
    except Exception:  # no train step to trace: count alone, as the report would say why
        return model_flops(model, batch_size, inputs)
