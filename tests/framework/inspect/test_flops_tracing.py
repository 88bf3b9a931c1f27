"""FLOPs counted on the compiled train step's own graph (flops_tracing.StepTrace): the counts of
count_flops's traced copy of the step, with the training step traced once; where that graph is
not the copy's (Levenberg-Marquardt, a step traced before, an overridden train_step), the copy
is traced and counted instead."""

import types

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import inspect as gf_inspect
from graphfit import layers, optimizers
from graphfit.core import step_context
from graphfit.inspect import flops, flops_tracing


def _mlp_sgd():
    model = gf.Sequential([layers.Dense(3, activation="relu", name="hidden"),
                           layers.Dense(2, name="out")])
    model.build((None, 4))
    model.compile(optimizer=optimizers.SGD(0.1), loss="mse", jit_compile=False)
    return model


def _batch_norm_dropout():
    model = gf.Sequential([layers.Dense(8, activation="relu", name="d1"),
                           layers.BatchNormalization(name="bn"),
                           layers.Dropout(0.1, name="drop"), layers.Dense(3, name="logits")])
    model.build((None, 5))
    model.compile(optimizer=optimizers.SGD(0.05, momentum=0.9, nesterov=True),
                  loss="sparse_categorical_crossentropy", jit_compile=True)
    return model


def _adam():
    model = gf.Sequential([layers.Dense(3, name="dense")])
    model.build((None, 4))
    model.compile(optimizer="adam", loss="mse", jit_compile=False)
    return model


def _one_loss_of_two_outputs():
    # The compiled step returns both outputs (for the metrics); count_flops's copy returns
    # the loss, which never needs the "is_even" head: that head is left out of both.
    model = gf.GraphModel(
        inputs={"pixels": (6,)},
        nodes=[gf.Node(layers.Dense(4, name="trunk"), "pixels"),
               gf.Node(layers.Dense(3, name="digit"), "trunk"),
               gf.Node(layers.Dense(1, name="is_even"), "trunk")],
        outputs=["digit", "is_even"],
    )
    model.build({"pixels": (None, 6)})
    model.compile(optimizer="sgd", loss={"digit": "sparse_categorical_crossentropy"},
                  jit_compile=False)
    return model


def _labels(model):
    """Labels for the one loss of a two-output model (step_graph's default labels have none
    for an output without a loss); None (step_graph's default) for the others."""
    return {"digit": np.zeros(4, np.int64)} if isinstance(model, gf.GraphModel) else None


@pytest.mark.parametrize("make", [_mlp_sgd, _batch_norm_dropout, _adam,
                                  _one_loss_of_two_outputs],
                         ids=["sgd", "batch_norm_dropout_xla", "adam", "one_loss_of_two"])
def test_the_compiled_step_is_counted_on_its_own_graph_with_the_same_counts(
        make, train_step_traces):
    model = make()
    expected = flops.count_flops(model, batch_size=4)  # its own probed copy of the step
    # (traced twice where the copy of the optimizer creates its slots in the trace)
    assert set(train_step_traces) == {"probed copy"}
    train_step_traces.clear()
    counts, notes = gf_inspect.step_flops(model, 4, y=_labels(model))
    assert train_step_traces == ["compiled"], "the training step was traced more than once"
    assert notes == []
    assert counts == expected  # every key: totals, per layer, uncounted ops, notes, method
    assert model.compile_state.steps.tracing_counts()["train_step"] == 1
    if isinstance(model, gf.GraphModel):  # the head without a loss: pruned in training only
        assert counts["per_layer"]["is_even"]["forward_train"] == 0
        assert counts["per_layer"]["is_even"]["forward"] == 2 * 4 * 4 * 1 + 4


def test_a_train_step_report_with_flops_traces_the_step_once(train_step_traces):
    model = _mlp_sgd()
    report = gf_inspect.step_graph(model, "train", batch_size=5, passes=())
    assert train_step_traces == ["compiled"]
    assert report.flops == model.flops(batch_size=5)  # the probed copy, traced now
    assert train_step_traces == ["compiled", "probed copy"]
    assert report.flops["per_layer"]["hidden"]["backward"] == 2 * 5 * 4 * 3 + (5 * 3 - 3)


def _step_trace(model, x_spec, y_spec):
    """A StepTrace of the model's compiled train step, traced for (x_spec, y_spec)."""
    gf_inspect.step_graph(model, "predict", x_spec.shape[0], passes=(), flops=False)  # fit's prep
    trace = flops_tracing.StepTrace(model)
    with trace.recording():
        model.compile_state.steps.train_step.get_concrete_function((x_spec, y_spec, None))
    return trace


def test_levenberg_marquardt_is_counted_on_a_traced_copy(train_step_traces):
    # Its step computes the loss gradient only when asked to record it, which count_flops's
    # copy asks: the compiled graph, which fit runs, is another graph.
    model = gf.Sequential([layers.Dense(4, activation="tanh"), layers.Dense(1)])
    model.build((None, 2))
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse", jit_compile=False)
    x_spec = tf.TensorSpec([8, 2])
    trace = _step_trace(model, x_spec, tf.TensorSpec([8, 1]))
    assert trace.gradients == {}  # observed, not asked for: none computed
    assert "minimize reported no gradients" in trace.unusable_for(x_spec)
    assert train_step_traces == ["compiled"]  # count_flops(step=trace) traces its copy


def test_a_step_traced_before_or_for_other_shapes_is_not_reused(train_step_traces):
    model = _mlp_sgd()
    x_spec, y_spec = tf.TensorSpec([5, 4]), tf.TensorSpec([5, 2])
    first = _step_trace(model, x_spec, y_spec)
    assert first.unusable_for(x_spec) is None
    assert "shapes" in first.unusable_for(tf.TensorSpec([6, 4]))
    again = flops_tracing.StepTrace(model)
    with again.recording():  # already traced: nothing to record
        model.compile_state.steps.train_step.get_concrete_function((x_spec, y_spec, None))
    assert "traced before" in again.unusable_for(x_spec)
    assert train_step_traces == ["compiled"]
    assert flops.count_flops(model, 5, step=again) == flops.count_flops(model, 5, step=first)
    assert train_step_traces == ["compiled", "probed copy"]


def test_an_overridden_train_step_is_not_the_step_counted():
    class Custom(gf.Model):
        def __init__(self):
            super().__init__(name="custom")
            self.dense = layers.Dense(2)

        def call(self, x, training=False):
            return self.dense(x)

        def train_step(self, data):
            return super().train_step(data)

    model = Custom()
    model.build((None, 3))
    model.compile(optimizer="sgd", loss="mse", jit_compile=False)
    x_spec = tf.TensorSpec([2, 3])
    trace = _step_trace(model, x_spec, tf.TensorSpec([2, 2]))
    assert "overrides train_step" in trace.unusable_for(x_spec)


def test_an_observer_gets_the_gradients_without_asking_for_them():
    w = tf.Variable([1.0, 2.0])
    watcher = types.SimpleNamespace(gradients={}, mark=lambda phase: None)
    with step_context.observing(watcher):
        assert step_context.current_observer() is watcher
        with step_context.training_step(None) as context:
            assert not step_context.records_gradients()
            step_context.record_gradients([tf.constant([3.0, 4.0]), None], [w, tf.Variable(0.)])
        assert context.gradients is None  # the step itself records nothing
    assert step_context.current_observer() is None
    np.testing.assert_array_equal(watcher.gradients[w.ref()].numpy(), [3.0, 4.0])
    assert len(watcher.gradients) == 1  # a None gradient is skipped
    with step_context.training_step(None, record_gradients=True) as context:
        step_context.record_gradients([tf.constant(5.0)], [w])  # no observer: as before
    assert float(context.gradients[w.ref()]) == 5.0
