"""Grappler settings that travel with one model's function calls (`core.graph_rewrites`)."""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import config_pb2, rewriter_config_pb2
from tensorflow.python.eager import context

import graphfit as gf
from graphfit import layers, optimizers
from graphfit.core.graph_rewrites import check_rewrites, graph_rewrites

_OFF, _ONE = rewriter_config_pb2.RewriterConfig.OFF, rewriter_config_pb2.RewriterConfig.ONE


def _thread_rewrites():
    config = config_pb2.ConfigProto()
    config.ParseFromString(context.context().function_call_options.config_proto_serialized)
    return config.graph_options.rewrite_options


def _optimized_ops(settings):
    """The op types of a fresh function's graph after Grappler, run under `settings`."""

    def fold_me(x):  # two constants Grappler folds into one, when allowed
        return x * (tf.constant(2.0) * tf.constant(3.0))

    function = tf.function(fold_me, autograph=False)
    eager = context.context()
    eager.enable_run_metadata()
    try:
        with graph_rewrites(settings):
            assert float(function(tf.constant(1.0))) == 6.0
        metadata = eager.export_run_metadata()
    finally:
        eager.disable_run_metadata()
    return sorted(node.op for graph in metadata.function_graphs
                  for node in graph.post_optimization_graph.node
                  if node.op in ("Const", "Mul"))


def test_the_settings_hold_inside_and_are_restored_after():
    before = _thread_rewrites().SerializeToString()
    with graph_rewrites({"meta_optimizer_iterations": "ONE", "remapping": False,
                         "memory_optimization": "NO_MEM_OPT"}):
        inside = _thread_rewrites()
        assert inside.meta_optimizer_iterations == _ONE
        assert inside.remapping == _OFF
        assert inside.memory_optimization == rewriter_config_pb2.RewriterConfig.NO_MEM_OPT
    assert _thread_rewrites().SerializeToString() == before
    with graph_rewrites(None):  # nothing asked: the thread's options are untouched
        assert _thread_rewrites().SerializeToString() == before


def test_the_settings_restore_after_an_error():
    before = _thread_rewrites().SerializeToString()
    with pytest.raises(RuntimeError), graph_rewrites({"constant_folding": False}):
        raise RuntimeError("inside")
    assert _thread_rewrites().SerializeToString() == before


def test_grappler_applies_them_to_the_calls_inside():
    # TensorFlow's defaults fold the constants' product; with folding off both stay.
    assert _optimized_ops(None) == ["Const", "Mul"]
    assert _optimized_ops({"constant_folding": False, "arithmetic_optimization": False}) == [
        "Const", "Const", "Mul", "Mul"]


@pytest.mark.parametrize("settings, message", [
    ({"remaping": False}, "Unknown Grappler setting 'remaping'; did you mean 'remapping'?"),
    ([("remapping", False)], "Grappler settings are a mapping {setting: value}"),
    ({"remapping": "off"}, "remapping takes True or False. Received: remapping='off'"),
    ({"meta_optimizer_iterations": 3}, "takes one of DEFAULT_NUM_ITERS, ONE, TWO"),
])
def test_a_bad_setting_is_refused_with_what_is_valid(settings, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        check_rewrites(settings)


class _MisspelledRewrites(optimizers.SGD):
    graph_rewrites = {"remaping": False}


def test_an_optimizer_s_bad_setting_is_refused_at_compile():
    model = gf.Sequential([layers.Dense(1)])
    with pytest.raises(ValueError, match=r"_MisspelledRewrites.graph_rewrites: Unknown Grappler "
                                         r"setting 'remaping'"):
        model.compile(optimizer=_MisspelledRewrites(0.1), loss="mse")


class _RecordsRewrites(layers.Dense):
    """A Dense that records the thread's Grappler settings each time it is traced."""

    seen: list = []

    def call(self, inputs, training=False):
        _RecordsRewrites.seen.append(_thread_rewrites())
        return super().call(inputs, training=training)


def test_a_levenberg_marquardt_model_traces_its_loops_under_its_settings():
    gf.set_seed(0)
    x = np.linspace(-1, 1, 64, dtype=np.float32)[:, None]
    _RecordsRewrites.seen = []
    model = gf.Sequential([_RecordsRewrites(4, activation="tanh"), layers.Dense(1)])
    # Inside a LossScaleOptimizer too: the wrapper passes on its inner optimizer's settings.
    model.compile(optimizer=optimizers.LossScaleOptimizer(optimizers.LevenbergMarquardt()),
                  loss="mse")
    model.fit(x, x ** 2, batch_size=32, epochs=1, verbose=0)
    traced_in_loops = [r for r in _RecordsRewrites.seen if r.meta_optimizer_iterations == _ONE]
    assert traced_in_loops and all(r.memory_optimization ==
                                   rewriter_config_pb2.RewriterConfig.NO_MEM_OPT
                                   for r in traced_in_loops)
    # A first-order optimizer leaves TensorFlow's settings alone.
    _RecordsRewrites.seen = []
    model.compile(optimizer="sgd", loss="mse")
    model.fit(x, x ** 2, batch_size=32, epochs=1, verbose=0)
    assert _RecordsRewrites.seen
    assert all(r.meta_optimizer_iterations != _ONE for r in _RecordsRewrites.seen)
