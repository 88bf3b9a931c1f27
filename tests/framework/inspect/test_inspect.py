"""graphfit.inspect: Grappler's constant folding and common-subexpression elimination shown on
small graphs, op counts of a Dense model's compiled steps, and XLA's fusions."""

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import inspect as gf_inspect
from graphfit import layers
from graphfit.inspect import xla_report


@tf.function
def affine():
    w, x, b = tf.constant(2.0), tf.constant(3.0), tf.constant(1.0)
    return w * x + b


def twice(x):
    return tf.exp(x) * 2.0 + tf.exp(x) * 2.0


def _two_dense(jit_compile):
    model = gf.Sequential([layers.Dense(4, activation="relu"), layers.Dense(3)])
    model.build((None, 5))
    model.compile(optimizer="sgd", loss="mse", jit_compile=jit_compile)
    return model


@pytest.fixture(scope="module")
def dense():
    """A 2-Dense model (never trained) and its three step reports at batch size 8."""
    model = _two_dense(jit_compile=False)
    values = [v.numpy().copy() for v in model.variables]
    reports = {stage: gf_inspect.step_graph(model, stage, batch_size=8)
               for stage in gf_inspect.STAGES}
    return model, values, reports


@pytest.fixture(scope="module")
def cse_report():
    return gf_inspect.function_graph(tf.function(twice, jit_compile=True), tf.TensorSpec([4]))


# ------------------------------------------------------------------ the two doc examples
def test_constant_w_x_plus_b_folds_to_one_constant_holding_7():
    report = gf_inspect.function_graph(affine)
    assert report.before.by_type == {"Const": 3, "Mul": 1, "AddV2": 1, "Identity": 1}
    assert report.after.by_type == {"Const": 1}
    (node,) = report.optimized.node
    assert tf.make_ndarray(node.attr["value"].tensor) == pytest.approx(2.0 * 3.0 + 1.0)
    folding = report.pass_effect("constfold")
    assert folding.ops_after == 1
    assert folding.removed == {"Const": 3, "AddV2": 1, "Mul": 1}
    assert report.pass_effect("common_subgraph_elimination").changed is False
    text = str(report)
    assert "before: 6 ops" in text and "after:  1 op: Const 1" in text
    assert "constant folding: 6 -> 1 op; replaced by constants: Identity 1" in text


def test_common_subexpression_elimination_removes_the_duplicate(cse_report):
    assert cse_report.before.by_type["Exp"] == 2
    assert cse_report.before.by_type["Mul"] == 2
    cse = cse_report.pass_effect("common_subgraph_elimination")
    assert sorted(cse.merged) == [("Const", "mul_1/y", "mul/y"), ("Exp", "Exp_1", "Exp"),
                                  ("Mul", "mul_1", "mul")]
    assert (cse.ops_before, cse.ops_after) == (9, 6)
    # Constant folding alone cannot merge them; the default pipeline keeps one exp.
    assert not cse_report.pass_effect("constfold").merged
    assert cse_report.after.by_type["Exp"] == 1
    assert "common-subexpression elimination: 9 -> 6 ops; merged into an identical node: " \
           "Mul 1, Exp 1, Const 1" in str(cse_report)


def test_xla_fuses_the_cse_example_and_drops_its_duplicate_exp(cse_report):
    xla = cse_report.xla
    assert cse_report.jit_compile and "XLA: on (jit_compile=True)" in str(cse_report)
    assert xla.before["exponential"] == 2
    assert xla.fusions == {"kLoop": 1}
    assert xla.after == {"fusion": 1, "parameter": 1}
    assert xla.fused["exponential"] == 1  # XLA's own CSE
    assert xla.fused_instructions < xla.instructions_before


# ---------------------------------------------------------------------- op counts of steps
def test_predict_step_of_two_dense_layers(dense):
    _, _, reports = dense
    report = reports["predict"]
    assert report.signature == "x: float32[8, 5]"
    before = report.before.by_type
    assert (before["MatMul"], before["AddV2"], before["Relu"]) == (2, 2, 1)
    assert before["ReadVariableOp"] == 4  # kernel and bias of each layer
    assert before["Placeholder"] == 5  # x and the four variable handles
    assert report.after.by_type["MatMul"] == 2
    assert report.before.functions == ()


def test_train_step_holds_forward_backward_and_update(dense):
    model, _, reports = dense
    report = reports["train"]
    assert report.signature == "x: float32[8, 5], y: float32[8, 3], sample_weight: None"
    before = report.before.by_type
    # Forward 2; backward: both kernels' gradients and the hidden activation's gradient
    # (the input's gradient is never asked for).
    assert before["MatMul"] == 5
    assert before["ReluGrad"] == 1
    assert before["AssignVariableOp"] == 4  # plain SGD: one update per variable
    assert report.after.total < report.before.total
    assert report.model == gf_inspect.ModelCounts((4, 5 * 4 + 4 + 4 * 3 + 3), (0, 0), ())
    assert "variables: 4 trainable (39 parameters), 0 non-trainable (0 values), 0 update " \
           "hooks" in str(report)


def test_reports_are_stable_across_traces(dense):
    model, _, reports = dense
    again = gf_inspect.step_graph(model, "train", batch_size=8, flops=False)
    assert again.before == reports["train"].before
    assert again.after == reports["train"].after


def test_inspecting_runs_no_step(dense):
    model, values, _ = dense
    for value, variable in zip(values, model.variables):
        np.testing.assert_array_equal(value, variable.numpy())
    assert int(model.optimizer.iterations) == 0


def test_xla_off_is_said_plainly(dense):
    report = dense[2]["test"]
    assert not report.jit_compile and report.xla is None
    assert "XLA: off (jit_compile=False): the step runs on the TensorFlow executor after " \
           "Grappler" in str(report)


def test_step_of_an_xla_model_reports_fusions():
    model = _two_dense(jit_compile=True)
    report = gf_inspect.step_graph(model, "predict", batch_size=8, flops=False)
    assert report.jit_compile
    assert report.xla.before["dot"] == 2
    assert report.xla.fusion_count >= 1
    assert report.xla.instructions_after < report.xla.instructions_before
    open_batch = gf_inspect.step_graph(model, "predict", batch_size=None, flops=False)
    assert open_batch.signature == "x: float32[None, 5]" and open_batch.xla is None
    assert "XLA compiles for fixed shapes" in open_batch.notes[0]


def test_flops_come_from_model_flops(dense):
    model, _, reports = dense
    flops = model.flops(batch_size=8)
    assert reports["train"].flops == flops
    text = str(reports["train"])
    parts = [flops[k] for k in ("forward_train", "loss", "backward", "update")]
    assert sum(parts) == flops["training_step"]
    assert (f"FLOPs (batch 8): forward (training) {parts[0]:,} + loss {parts[1]:,} + backward "
            f"{parts[2]:,} + update {parts[3]:,} = training step {flops['training_step']:,}") \
        in text
    assert f"forward {flops['forward']:,}" in str(reports["predict"])


def test_update_hooks_are_counted():
    model = gf.Sequential([layers.Dense(3), layers.BatchNormalization()])
    model.build((None, 2))
    model.compile(optimizer="sgd", loss="mse", jit_compile=False)
    counts = gf_inspect.ModelCounts.of(model)
    assert counts.non_trainable == (2, 6)
    assert len(counts.update_hooks) == 2
    assert all(hook.endswith("(moving_average)") for hook in counts.update_hooks)


# ------------------------------------------------------------------ library functions
def test_library_functions_are_counted_once_and_inlined_by_grappler():
    @tf.function
    def inner(x):
        return tf.exp(x) + 1.0

    @tf.function
    def outer(x):
        y = inner(x) + inner(x)  # two calls of one function
        return tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 2.0), [0, y])[1]

    report = gf_inspect.function_graph(outer, tf.TensorSpec([2]))
    functions = report.before.functions
    assert len(functions) == 3 and sum("inner" in name for name in functions) == 1
    assert report.before.by_type["Exp"] == 1  # inner's body, counted once
    assert report.before.by_type["PartitionedCall"] == 2
    merged = report.pass_effect("common_subgraph_elimination").merged
    assert [m for m in merged if m[0] == "PartitionedCall"] == [
        ("PartitionedCall", "PartitionedCall_1", "PartitionedCall")]  # the same call, twice
    assert report.after.functions == ()  # inlined, the loop lowered
    assert report.after.by_type["Exp"] == 1  # CSE merged the two inlined copies
    assert "counted: the traced graph + 3 library functions, each once" in str(report)


# ------------------------------------------------------------------------------ errors
def test_bad_arguments_are_refused(dense):
    model = dense[0]
    with pytest.raises(ValueError, match="stage must be one of .* Received: stage='eval'"):
        gf_inspect.step_graph(model, "eval")
    with pytest.raises(ValueError, match="Received: batch_size=0"):
        gf_inspect.step_graph(model, "train", batch_size=0)
    uncompiled = gf.Sequential([layers.Dense(1)])
    uncompiled.build((None, 2))
    with pytest.raises(RuntimeError, match="needs a compiled model"):
        gf_inspect.step_graph(uncompiled, "predict")


# --------------------------------------------------------------------- the HLO parser
HLO = """HloModule m, entry_computation_layout={(f32[4]{0})->(f32[4]{0}, f32[])}

%add (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %sum = f32[] add(f32[] %x, f32[] %y)
}

%fused_computation (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  %e = f32[4]{0} exponential(%p)
  ROOT %m = f32[4]{0} multiply(%e, %e)
}

ENTRY %main (a: f32[4]) -> (f32[4], f32[]) {
  %a = f32[4]{0} parameter(0)
  %f = f32[4]{0} fusion(%a), kind=kLoop, calls=%fused_computation
  %zero = f32[] constant(0)
  %r = f32[] reduce(%f, %zero), dimensions={0}, to_apply=%add
  ROOT %t = (f32[4]{0}, f32[]) tuple(%f, %r)
}
"""


def test_hlo_parser_counts_top_level_and_fused_instructions():
    computations = xla_report.parse_hlo(HLO)
    assert list(computations) == ["add", "fused_computation", "main"]
    assert computations["main"].entry
    assert computations["main"].opcodes == ["parameter", "fusion", "constant", "reduce", "tuple"]
    report = xla_report.from_hlo(HLO, HLO)
    assert report.instructions_before == 3 + 3 + 5
    assert report.after == {"parameter": 3, "add": 1, "constant": 1, "fusion": 1, "reduce": 1,
                            "tuple": 1}  # the reducer runs at the top level too
    assert report.fusions == {"kLoop": 1}
    assert report.fused == {"exponential": 1, "multiply": 1, "parameter": 1}


def test_constant_folding_does_not_call_a_folded_constant_merged():
    # 2*3 folds away with both of its constants; the kept 2.0 of x*2 is no "twin" of them.
    def folded(x):
        return tf.exp(x * 2.0) - tf.constant(2.0) * tf.constant(3.0)

    report = gf_inspect.function_graph(folded, tf.TensorSpec([4]), passes=["constfold"])
    effect = report.pass_effect("constfold")
    assert effect.merged == []
    assert effect.folded == {"Mul": 1}



# ------------------------------------------------- the optimizer's Grappler settings
def test_grappler_settings_change_the_pipeline_that_runs():
    graph_def, fetches = gf_inspect.grappler.graph_def_of(affine.get_concrete_function().graph)
    folded = gf_inspect.grappler.optimize(graph_def, fetches)
    kept = gf_inspect.grappler.optimize(graph_def, fetches,
                                        rewrites={"constant_folding": False})
    assert gf_inspect.grappler.count_ops(folded).by_type == {"Const": 1}
    assert gf_inspect.grappler.count_ops(kept).by_type.get("Mul") == 1
    with pytest.raises(ValueError, match="Unknown Grappler setting 'folding'"):
        gf_inspect.grappler.optimize(graph_def, fetches, rewrites={"folding": False})


def test_a_step_report_runs_the_optimizer_s_grappler_settings(dense):
    # fit runs an LM model's loops with one Grappler round and no memory optimizer; the
    # report's pipeline is that one, and says so. SGD keeps TensorFlow's.
    model = gf.Sequential([layers.Dense(4, activation="tanh"), layers.Dense(1)])
    model.build((None, 2))
    model.compile(optimizer=gf.optimizers.LevenbergMarquardt(), loss="mse")
    report = gf_inspect.step_graph(model, "train", batch_size=8, flops=False)
    rewrites = model.compile_state.optimizer.graph_rewrites  # set for the built parameters
    assert rewrites  # the direct solver's settings
    pipeline = report.pass_effect("default")
    assert pipeline.label == "default pipeline with " + ", ".join(
        f"{key}={value}" for key, value in rewrites.items())
    graph_def, fetches = gf_inspect.grappler.graph_def_of(
        model.compile_state.steps.train_step.get_concrete_function(
            (tf.TensorSpec([8, 2]), tf.TensorSpec([8, 1]), None)).graph)
    expected = gf_inspect.grappler.optimize(graph_def, fetches, rewrites=rewrites)
    assert report.after == gf_inspect.grappler.count_ops(expected)
    _, _, sgd_reports = dense
    assert sgd_reports["train"].pass_effect("default").label == "default pipeline"


def test_a_model_with_a_loss_on_one_of_two_outputs_gets_labels_for_that_output_only():
    # The default labels are counted once the losses are built: counted before, no output
    # had a loss yet and the step was traced without the labels its loss reads.
    inputs = gf.Input(shape=(4,), name="features")
    hidden = layers.Dense(8, activation="relu")(inputs)
    model = gf.Model(inputs, {"a": layers.Dense(1, name="a")(hidden),
                              "b": layers.Dense(3, name="b")(hidden)})
    model.compile(optimizer="sgd", loss={"a": "mse"})
    with pytest.warns(UserWarning, match=r"Gradients do not exist for variables \['b/"):
        report = gf_inspect.step_graph(model, "train", batch_size=8, flops=False)
    assert report.signature == ("x: {features: float32[8, 4]}, y: {a: float32[8, 1]}, "
                                "sample_weight: None")
    assert report.before.by_type["AssignVariableOp"] == 4  # b has no loss: not updated
