"""FLOPs of a model's forward pass and of its full training step, total and per layer.

How many FLOPs do the forward and the backward pass cost? `count_flops(model, batch_size)`
(also `model.flops(batch_size)`) answers from the graphs TensorFlow would run:

    >>> import graphfit as gf
    >>> from graphfit import layers
    >>> from graphfit.inspect import flops
    >>> model = gf.Sequential([layers.Dense(3, name="dense")])
    >>> model.build((None, 4))
    >>> counts = flops.count_flops(model, batch_size=1)
    >>> counts["forward"]  # MatMul 2*1*4*3 + bias add 1*3
    27
    >>> counts["per_layer"]["dense"]  # backward: dW = x^T g (2*4*1*3) + bias Sum (1*3 - 3)
    {'forward': 27, 'forward_train': 27, 'backward': 24}

Method. Each pass is traced with `tf.function(...).get_concrete_function` at a fully defined
input shape (the batch axis set to `batch_size`), never run, and TensorFlow's profiler counts
it: `tf.compat.v1.profiler.profile(graph, options=ProfileOptionBuilder.float_operation())`.
The graph is the one before Grappler and XLA rewrite it. Functions the graph calls (nested
`tf.function`s, loop bodies, cond branches) are profiled too, and ops whose results nothing
uses are left out, as `tf.function` prunes them (`flops_graph`). The keys:

- forward: `model(x, training=False)`, the inference pass `predict` runs.
- forward_train: the forward pass inside the training step (`training=True`: dropout masks,
  batch statistics).
- loss: the compiled loss on that forward pass.
- backward: the ops the gradients of the loss (with respect to the trainable variables, as
  `minimize` reports them) depend on, built after the loss: the tape's ops, named
  `gradient_tape/<forward op's scope>/...`, and its `AddN`s that sum the gradient of a tensor
  used twice. Nothing is computed for the inputs: the first layer has no `dx` product.
- update: the rest of `optimizer.minimize` (gradient transforms, the update rule, the step
  counter) plus the update hooks (moving averages; also under `update_hooks`). For an
  optimizer with its own `minimize` (LevenbergMarquardt), its whole solve is update.
- training_step: the whole step, `forward_train + loss + backward + update`. It is traced like
  the compiled train step (`CompiledSteps._train_step`: forward pass, loss, `minimize`, update
  hooks); with an optimizer that has no slots yet, a copy from its config is traced, so the
  model and its optimizer are left as they were. Where the compiled train step is traced
  anyway (`graphfit.inspect.step_graph`, `graphfit inspect`), the step is not traced again:
  its graph is counted, with the same counts (`step=`, `flops_tracing.StepTrace`).
- per_layer: {layer name: {"forward", "forward_train", "backward"}}: a forward op counts for
  the innermost layer whose `call` created it, a gradient op for the layer that owns the name
  scope after `gradient_tape/`; `outside_layers` holds the rest (the loss's gradient, the
  `AddN`s, model-level ops), so each column adds up to its total.

A model that is not compiled (or has no loss) gets `backward` from the gradient of the sum of
its outputs (`loss` is that sum) and `update == 0`; its notes say so.

What TensorFlow counts (its registered statistics): MatMul `2*m*n*k`; Conv2D
`2*batch*out_h*out_w*c_out*kh*kw*c_in`; Conv2DBackpropFilter and Conv2DBackpropInput
`2*batch*in_h*in_w*c_in*kh*kw*c_out/stride**2` (the forward count for "same" padding; more than
it for "valid"); Conv3D and DepthwiseConv2dNative likewise (`c_in` per group for a grouped
convolution, 1 for a depthwise one, times its depth multiplier). Conv1D runs as a Conv2D of
height 1; Conv*DTranspose as Conv2DBackpropInput / Conv3DBackpropInputV2 (exact for "same"
padding and a window a multiple of the stride, above it otherwise); SeparableConv as a depthwise
convolution plus a 1x1 Conv2D. The 3-D and depthwise gradients have no TensorFlow statistic: the
2-D formula counts them (`flops_graph`). Element-wise Add, Sub, Mul, RealDiv, Maximum, Square,
Neg, ...: one per output element (Rsqrt 2, Softmax 5); Sum: the input size minus the output
size; Mean the input size.
Ops without a statistic count 0, however much arithmetic they do: Relu and ReluGrad, Sigmoid,
Tanh, Exp, Sqrt, DivNoNan, fused kernels. `uncounted_ops` lists the ones met. graphfit adds
rules for a few types TensorFlow lacks that its layers run (`op_statistics`): Max/Min/Prod as
Sum (global max pooling), two-operand Einsum as `2 *` the product of its index sizes
(attention), ResizeBilinear 9 per output element (bilinear up-sampling).

Pitfalls (the report's `notes` says which ones the model met):

- Loops are counted once: a `tf.while_loop` body counts once, not once per iteration (the trip
  count is known only when the step runs). Multiply by the trip count yourself.
- Ops that may not run are counted: both branches of a `tf.cond` (a second-order optimizer's
  skipped step too). Ops that cannot run, because nothing uses their results, are left out:
  TensorFlow's gradient functions build some (Conv2D's always builds the input gradient, which
  a first layer never needs).
- Functions are counted once per call site: the profiler alone sees a nested `tf.function`
  or loop as one call op with no FLOPs; here their bodies are profiled and added.
- Static shapes only: an op whose shapes are not fully defined counts 0 (for example inside a
  nested `tf.function` traced earlier for any batch size).
- Grappler and XLA fuse and fold ops after tracing; the count is that of the traced graph.
- With `PerExampleClipping`, backward is the vectorized per-example gradient computation
  (which reruns the forward pass per example); its ops are named after the vectorized loop,
  not the layers, so per layer they count in `outside_layers`.
"""

from __future__ import annotations

import tensorflow as tf

from graphfit.core import validation
from graphfit.inspect import flops_graph, flops_tracing

__all__ = ["count_flops", "output_rows"]

_METHOD = (
    "TensorFlow profiler, tf.compat.v1.profiler.profile(graph, options=ProfileOptionBuilder."
    "float_operation()), on tf.function graphs traced (never run) at {batch}, "
    "before Grappler/XLA; the functions they call (loop bodies, cond branches, nested "
    "tf.functions) profiled too, once per call site; unused ops left out (tf.function prunes "
    "them). forward: model(x, training=False). training step: {step}. backward: the ops the "
    "gradients depend on. per layer: the layer whose call created the op."
)
_COMPILED_STEP = ("forward (training=True) + loss + optimizer.minimize + update hooks, traced "
                  "like the compiled train step")
_UNCOMPILED_STEP = ("model not compiled: gradient of the sum of the outputs (training=True) "
                    "with respect to the trainable variables; no update")


def count_flops(model, batch_size: int = 1, inputs=None, *,
                step: flops_tracing.StepTrace | None = None) -> dict:
    """Counts the FLOPs of `model`'s forward pass and training step at `batch_size`.

    Args:
        model: a built `graphfit.Model`; when compiled with a loss and an optimizer, the
            training step is its own (loss, gradients, optimizer update, update hooks).
        batch_size: the batch size to count at (a positive integer): the rows of every
            input, and of the labels.
        inputs: an example batch (arrays, tensors or TensorSpecs of known shapes, in the
            model's input structure) whose shapes to count at instead, where the inputs'
            rows are not the examples: a graph batch's nodes and edges. The labels then have
            a row per row of the model's output (per graph), and `batch_size` is not used.
            Only shapes and dtypes matter.
        step: a `flops_tracing.StepTrace` recorded while the model's compiled train step was
            traced for these inputs (`graphfit.inspect.step_graph` records one): the training
            step is counted on that graph instead of being traced again. The counts are the
            same; where that graph is not the step counted here (`StepTrace.unusable_for`: a
            step traced before the recording, an overridden `train_step`, a
            Levenberg-Marquardt step), the step is traced as without it.

    Returns:
        A dict with "forward", "backward", "update", "training_step" (ints), "per_layer"
        ({layer name: {"forward", "forward_train", "backward"}}) and "method" (a string),
        plus "forward_train", "loss", "update_hooks", "outside_layers", "batch_size",
        "uncounted_ops" ({"forward": {op type: n}, "training_step": {...}}) and "notes"
        (the pitfalls met). See the module docstring for the definitions.

    Raises:
        TypeError: if `model` is not a graphfit Model.
        ValueError: if the model is not built, `batch_size` is not a positive integer, or the
            model's input shape has unknown dimensions besides the batch axis.
    """
    from graphfit.models.model import Model  # model.py imports this module

    if not isinstance(model, Model):
        raise TypeError(f"count_flops needs a graphfit Model. Received: {type(model).__name__}")
    batch_size = validation.positive_int("batch_size", batch_size)
    model.require_built("flops()")
    if inputs is None:
        x_spec = flops_tracing.at_batch(model.built_input_spec, batch_size, model, "inputs")
    else:
        x_spec = tf.nest.map_structure(_spec_of, model.arrange_inputs(inputs))
        batch_size = output_rows(model, x_spec)
    state = model.compile_state
    compiled = state is not None and state.loss_set is not None and state.optimizer is not None
    reused = compiled and step is not None and step.unusable_for(x_spec) is None
    owners = step.owners if reused else flops_graph.LayerOwners(model)

    with owners.recording():
        forward_graph = flops_tracing.trace(lambda x: model(x, training=False), x_spec)
    # The training step's graph: the compiled step's, recorded as it was traced, else a copy.
    # Counted as the copy is: its loss alone (what only the compiled step's other outputs
    # use, such as outputs without a loss, is left out of both) and without the compiled
    # step's own ops around the default train_step (its context's reads).
    loss_only, outside = None, ()
    if reused:
        train_graph, marks, loss_only = step.graph, step.marks, [step.loss]
        outside = step.wrapper_ops()
    elif compiled:
        train_graph, marks = flops_tracing.trace_training_step(model, state, x_spec,
                                                               batch_size, owners)
    else:
        train_graph, marks = flops_tracing.trace_output_gradient(model, x_spec, owners)
    forward_stats, train_stats = flops_graph.GraphStats(), flops_graph.GraphStats()
    forward_ops = _ranked(forward_graph, flops_graph.op_flops(forward_graph, forward_stats))
    train_ops = _ranked(train_graph, flops_graph.op_flops(train_graph, train_stats,
                                                          outputs=loss_only, outside=outside))
    phase_of = _phases(train_graph, marks)

    per_layer = {layer.name: {"forward": 0, "forward_train": 0, "backward": 0}
                 for layer, _ in flops_graph.walk_layers(model)}
    outside = {"forward": 0, "forward_train": 0, "backward": 0}

    def attribute(graph, op_name: str, key: str, flops: int) -> None:
        layer = owners.owner(graph, op_name, gradient=key == "backward")
        (per_layer[layer.name] if layer is not None else outside)[key] += flops

    for _, name, flops in forward_ops:
        attribute(forward_graph, name, "forward", flops)
    phases = {"forward_train": 0, "loss": 0, "backward": 0, "update": 0, "update_hooks": 0}
    for index, name, flops in train_ops:
        phase = phase_of[index]
        phases[phase] += flops
        if phase == "update_hooks":
            phases["update"] += flops  # the hooks are part of the update
        elif phase in ("forward_train", "backward"):
            attribute(train_graph, name, phase, flops)

    return {
        "forward": sum(flops for _, _, flops in forward_ops),
        "backward": phases["backward"],
        "update": phases["update"],
        "training_step": sum(flops for _, _, flops in train_ops),
        "per_layer": per_layer,
        "method": _METHOD.format(batch=f"batch_size={batch_size}" if inputs is None
                                 else _shapes_text(x_spec),
                                 step=_COMPILED_STEP if compiled else _UNCOMPILED_STEP),
        "forward_train": phases["forward_train"],
        "loss": phases["loss"],
        "update_hooks": phases["update_hooks"],
        "outside_layers": outside,
        "batch_size": batch_size,
        "uncounted_ops": {"forward": dict(sorted(forward_stats.uncounted.items())),
                          "training_step": dict(sorted(train_stats.uncounted.items()))},
        "notes": _notes(forward_stats, train_stats, compiled,
                        _python_layers(owners, (forward_graph, train_graph))),
    }


# ----------------------------------------------------------------------------- tracing
def _spec_of(value) -> tf.TensorSpec:
    if not isinstance(value, tf.TensorSpec):
        value = tf.convert_to_tensor(value) if not hasattr(value, "dtype") else value
        value = tf.TensorSpec(value.shape, tf.as_dtype(value.dtype))
    if not value.shape.is_fully_defined():
        raise ValueError(f"FLOPs are counted from static shapes: the example inputs must have "
                         f"known shapes, but one has shape {tuple(value.shape.as_list())}. "
                         f"Give arrays, or TensorSpecs without None.")
    return value


def output_rows(model, x_spec) -> int:
    """The rows of the model's (first) output for inputs of `x_spec` (traced, not run): the
    examples a batch of these inputs holds, one label each (a graph batch: its graphs)."""
    concrete = tf.function(lambda x: model(x, training=False)).get_concrete_function(x_spec)
    rows = tf.nest.flatten(concrete.structured_outputs)[0].shape[0]
    if rows is None:
        raise ValueError("The model's output has no fixed number of rows for these inputs: "
                         "give inputs of known shapes.")
    return int(rows)


def _shapes_text(spec) -> str:
    """ "the shapes node_features[310, 9], senders[1500]" of an example batch."""
    if isinstance(spec, dict):
        parts = [f"{name}{list(s.shape)}" for name, s in spec.items()]
    else:
        parts = [str(list(s.shape)) for s in tf.nest.flatten(spec)]
    return "the shapes " + ", ".join(parts)


# ------------------------------------------------------------------------- attribution
def _ranked(graph: tf.Graph, totals: dict[str, int]) -> list[tuple[int, str, int]]:
    """(creation index, op name, FLOPs) of every op of the graph."""
    return [(i, op.name, totals[op.name]) for i, op in enumerate(graph.get_operations())]


def _phases(graph: tf.Graph, marks: dict) -> list[str]:
    """The part of the step that created each op, by creation index: "forward_train",
    "loss", "backward" (what the reported gradients depend on, built after the loss),
    "update" (the rest of minimize) or "update_hooks"."""
    operations = graph.get_operations()
    if "forward" not in marks:  # an optimizer that never called loss_fn: names only
        return ["backward" if op.name.startswith("gradient_tape/") else "update"
                for op in operations]
    start = marks["minimize"]
    index = {op.name: i for i, op in enumerate(operations)}
    gradients = [g for g in marks.get("gradients") or () if g is not None]
    backward: set[str] = set()
    stack = [t.op for g in gradients
             for t in ((g.values, g.indices) if isinstance(g, tf.IndexedSlices) else (g,))]
    while stack:
        op = stack.pop()
        if op.name not in backward and index.get(op.name, -1) >= start:
            backward.add(op.name)
            stack.extend(t.op for t in op.inputs)
            stack.extend(op.control_inputs)
    phases = []
    for i, op in enumerate(operations):
        if marks["forward"] <= i < marks["loss"]:
            phases.append("forward_train")
        elif marks["loss"] <= i < start:
            phases.append("loss")
        elif i >= marks["update_hooks"]:
            phases.append("update_hooks")
        elif op.name in backward or (not gradients and op.name.startswith("gradient_tape/")):
            phases.append("backward")
        else:
            phases.append("update")
    return phases


_PYTHON_OPS = ("PyFunc", "PyFuncStateless", "EagerPyFunc")


def _python_layers(owners: flops_graph.LayerOwners, graphs) -> list[str]:
    """"'name' (Class)" of each layer whose ops call Python code, in the order met."""
    found: dict[str, str] = {}
    for graph in graphs:
        for op in graph.get_operations():
            if op.type in _PYTHON_OPS:
                layer = owners.owner(graph, op.name, op.name.startswith("gradient_tape/"))
                if layer is not None:
                    found.setdefault(layer.name, type(layer).__name__)
    return [f"{name!r} ({kind})" for name, kind in found.items()]


def _notes(forward: flops_graph.GraphStats, train: flops_graph.GraphStats,
           compiled: bool, python_layers: list[str]) -> list[str]:
    notes = []
    if not compiled:
        notes.append("The model is not compiled (or has no loss or optimizer): backward is the "
                     "gradient of the sum of its outputs; update is 0.")
    loops = max(forward.loops, train.loops)
    if loops:
        notes.append(f"{loops} while loop(s), gradient loops included: each loop body is "
                     "counted once, not once per iteration.")
    conditionals = max(forward.conditionals, train.conditionals)
    if conditionals:
        notes.append(f"{conditionals} conditional(s), gradients included: every branch is "
                     "counted, though only one runs.")
    incomplete = forward.incomplete_shapes + train.incomplete_shapes
    if incomplete:
        notes.append(f"{incomplete} op(s) with FLOP statistics counted 0: their shapes are not "
                     "fully defined (e.g. inside a nested tf.function traced for any batch size).")
    dead_flops = forward.dead_flops + train.dead_flops
    if dead_flops:
        notes.append(f"{forward.dead_ops + train.dead_ops} op(s) whose results nothing uses "
                     f"were left out ({dead_flops} FLOPs): tf.function prunes them before "
                     "running (gradient functions build some that are never needed).")
    python_calls = max(sum(stats.uncounted.get(op, 0) for op in _PYTHON_OPS)
                       for stats in (forward, train))
    if python_calls:
        where = f"; here in layer(s) {', '.join(python_layers)}" if python_layers else ""
        notes.append(f"{python_calls} call(s) of Python code (tf.numpy_function or "
                     f"tf.py_function, as in a BlackBox layer{where}) not counted: what they "
                     "compute is outside TensorFlow's graph, so their FLOPs count 0.")
    missing = forward.missing_functions | train.missing_functions
    if missing:
        notes.append(f"Functions not found, counted 0: {sorted(missing)}.")
    return notes
