"""Graph batches as data: fit / evaluate / predict on a GraphSet, batched by graph count,
integer index inputs kept int32, padding that changes no result, bounded XLA shapes."""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers
from graphfit.datasets import GraphSet, make_graph_classes

INPUTS = ["node_features", "graph_index", "node_counts", "senders", "receivers"]


def _model(jit_compile=False):
    model = gf.GraphModel(
        inputs=INPUTS,
        nodes=[gf.Node(layers.GINConv(8, name="gin"), ["node_features", "senders", "receivers"]),
               gf.Node(layers.SegmentPooling("sum", name="pool"),
                       ["gin", "graph_index", "node_counts"]),
               gf.Node(layers.Dense(8, name="logits"), "pool")],
        outputs="logits")
    model.compile(optimizer=gf.optimizers.Adam(0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], jit_compile=jit_compile)
    return model


@pytest.fixture(scope="module")
def trained():
    graphs, labels = make_graph_classes(48, seed=0, features="degree")
    model = _model()
    history = model.fit(graphs[:40], labels[:40], batch_size=6, epochs=3, verbose=0,
                        validation_data=(graphs[40:], labels[40:]))
    return graphs, labels, model, history


def test_index_inputs_stay_int32(trained):
    _, _, model, _ = trained
    spec = model.built_input_spec
    assert {k: spec[k].dtype for k in INPUTS[1:]} == dict.fromkeys(INPUTS[1:], tf.int32)
    assert spec["node_features"].dtype == tf.float32 and spec["graph_index"].shape.rank == 1


def test_fit_batches_by_graph_count_and_predicts_one_row_per_graph(trained):
    graphs, labels, model, history = trained
    assert len(history.history["loss"]) == 3 and np.isfinite(history.history["val_loss"]).all()
    out = model.predict(graphs[:13], batch_size=5, verbose=0)
    assert out.shape == (13, 8)
    one_by_one = np.concatenate([model.predict(graphs[[i]], verbose=0) for i in range(3)])
    np.testing.assert_allclose(out[:3], one_by_one, rtol=1e-5, atol=1e-5)
    direct = model(graphs.batch(range(13)), training=False).numpy()
    np.testing.assert_allclose(out, direct, rtol=1e-5, atol=1e-5)


def test_padded_results_equal_unpadded(trained):
    graphs, labels, model, _ = trained
    padded = model.predict(graphs.to_dataset(5, pad=True), verbose=0)
    plain = model.predict(graphs.to_dataset(5, pad=False), verbose=0)
    np.testing.assert_allclose(padded, plain, rtol=1e-5, atol=1e-5)
    assert padded.shape == (48, 8)
    loss_padded = model.evaluate(graphs.to_dataset(5, labels, pad=True), verbose=0)
    loss_plain = model.evaluate(graphs.to_dataset(5, labels, pad=False), verbose=0)
    np.testing.assert_allclose(loss_padded, loss_plain, rtol=1e-5)


def test_traces_stay_bounded(trained):
    graphs, labels, model, _ = trained
    model.fit(graphs[:40], labels[:40], batch_size=7, epochs=2, verbose=0)  # other sizes
    steps = model.compile_state.steps
    assert all(count == 1 for count in steps.tracing_counts().values())


def test_xla_step_sees_few_shapes():
    graphs, labels = make_graph_classes(24, seed=1, features="degree")
    model = _model(jit_compile=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "dropping XLA" warning: the shapes stay few
        model.fit(graphs, labels, batch_size=8, epochs=2, verbose=0)
    steps = model.compile_state.steps
    assert steps.jit_compile and steps.tracing_counts()["train_step"] == 1


def test_dict_of_per_graph_lists_and_sample_weight(trained):
    graphs, labels, _, _ = trained
    as_lists = {"node_features": [graphs[[i]].node_features for i in range(8)],
                "senders": [graphs[[i]].senders for i in range(8)],
                "receivers": [graphs[[i]].receivers for i in range(8)]}
    model = _model()
    model.fit(as_lists, labels[:8], sample_weight=np.ones(8), batch_size=4, epochs=1,
              verbose=0)
    np.testing.assert_allclose(model.predict(as_lists, verbose=0),
                               model.predict(graphs[:8], verbose=0), rtol=1e-6)


@pytest.mark.parametrize("x, y, message", [
    (lambda g: g.batch(range(4)), np.zeros(4), "one assembled batch"),
    (lambda g: g[:4], np.zeros(20), "one row per graph"),
    (lambda g: g[:4].with_node_features(np.full((len(g[:4].node_features), 1), np.nan)),
     np.zeros(4), "NaN"),
])
def test_bad_graph_data_is_named(trained, x, y, message):
    graphs, _, model, _ = trained
    with pytest.raises(ValueError, match=message):
        model.fit(x(graphs), y, epochs=1, verbose=0)


def test_empty_graphs_in_a_batch(trained):
    _, _, model, _ = trained
    graphs = GraphSet.from_lists([np.zeros((0, 1)), np.ones((3, 1)), np.zeros((0, 1))],
                                 [[], [0, 1], []], [[], [1, 2], []])
    out = model.predict(graphs, verbose=0)
    assert out.shape == (3, 8)
    bias = model.layers[-1].variables[-1].numpy()
    np.testing.assert_allclose(out[0], bias, atol=1e-6)  # empty graph: pooled zeros
