"""GINConv: the GIN formula against NumPy (isolated nodes, repeated edges, epsilon), padding,
numeric gradients, errors, and a graph classifier in a GraphModel: fit, flops, checkpoints."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers

INPUT_NAMES = ["node_features", "senders", "receivers", "graph_index", "node_counts"]


def numpy_gin(layer, nodes, senders, receivers, activation=lambda z: np.maximum(z, 0)):
    """(1 + eps) h_i + sum_{j->i} h_j through the two Dense layers, edge by edge."""
    epsilon = layer.epsilon if layer.epsilon_variable is None else layer.epsilon_variable.numpy()
    hidden = (1 + epsilon) * nodes.astype("float64")
    for s, r in zip(senders, receivers):
        hidden[r] += nodes[s]
    for dense in layer.mlp:
        hidden = activation(hidden @ dense.kernel.numpy() + dense.bias.numpy())
    return hidden


def small_graph(seed=0):
    """5 nodes: a triangle 0-1-2 (both directions), the edge 3->0 twice, node 4 isolated."""
    nodes = np.random.default_rng(seed).normal(size=(5, 3)).astype("float32")
    senders = np.array([0, 1, 1, 2, 2, 0, 3, 3], "int32")
    receivers = np.array([1, 0, 2, 1, 0, 2, 0, 0], "int32")
    return nodes, senders, receivers


def test_aggregation_is_hand_computed_sum_with_repeated_edges_and_isolated_nodes():
    nodes = np.array([[1.0], [2.0], [4.0], [8.0], [16.0]], "float32")
    _, senders, receivers = small_graph()
    layer = layers.GINConv(2, epsilon=0.5)
    layer([nodes, senders, receivers])
    # node 0: 1.5*1 + 2 + 4 + 8 + 8 (3->0 twice); node 3 receives nothing; node 4 isolated.
    np.testing.assert_allclose(layer.aggregate([nodes, senders, receivers]).numpy()[:, 0],
                               [23.5, 3 + 1 + 4, 6 + 1 + 2, 12, 24])


@pytest.mark.parametrize("train_epsilon", [False, True])
def test_output_equals_numpy_gin(train_epsilon):
    nodes, senders, receivers = small_graph()
    layer = layers.GINConv(4, epsilon=-0.3, train_epsilon=train_epsilon,
                           bias_initializer="random_normal")
    out = layer([nodes, senders, receivers]).numpy()
    assert out.shape == (5, 4)
    assert len(layer.trainable_variables) == 4 + train_epsilon
    np.testing.assert_allclose(out, numpy_gin(layer, nodes, senders, receivers), rtol=1e-5,
                               atol=1e-6)
    if train_epsilon:
        layer.epsilon_variable.assign(2.0)
        np.testing.assert_allclose(layer([nodes, senders, receivers]).numpy(),
                                   numpy_gin(layer, nodes, senders, receivers), rtol=1e-5,
                                   atol=1e-6)


def test_padding_nodes_and_edges_do_not_change_real_nodes():
    nodes, senders, receivers = small_graph(1)
    layer = layers.GINConv(4, activation="tanh")
    expected = layer([nodes, senders, receivers]).numpy()
    padded_nodes = np.concatenate([nodes, np.full((3, 3), 1e3, "float32")])
    padded_senders = np.concatenate([senders, [5, 6, 7, 7]]).astype("int32")
    padded_receivers = np.concatenate([receivers, [6, 5, 5, 7]]).astype("int32")
    out = layer([padded_nodes, padded_senders, padded_receivers]).numpy()
    np.testing.assert_allclose(out[:5], expected, rtol=1e-6)


def test_gradients_match_finite_differences():
    nodes, senders, receivers = small_graph(2)
    layer = layers.GINConv(3, activation="tanh", train_epsilon=True, epsilon=0.2,
                           dtype="float64")
    layer([nodes, senders, receivers])
    projection = np.random.default_rng(3).normal(size=(5, 3))

    def loss(x):
        return tf.reduce_sum(layer([x, senders, receivers]) * projection)

    theoretical, numerical = tf.test.compute_gradient(loss, [nodes.astype("float64")])
    np.testing.assert_allclose(theoretical[0], numerical[0], rtol=1e-5, atol=1e-6)
    x = tf.constant(nodes, tf.float64)
    with tf.GradientTape() as tape:
        value = loss(x)
    analytic = tape.gradient(value, layer.epsilon_variable).numpy()
    epsilon = layer.epsilon_variable.numpy()
    differences = []
    for sign in (1, -1):
        layer.epsilon_variable.assign(epsilon + sign * 1e-6)
        differences.append(float(loss(x)))
    layer.epsilon_variable.assign(epsilon)
    np.testing.assert_allclose(analytic, (differences[0] - differences[1]) / 2e-6, rtol=1e-5)


def test_bad_inputs_and_arguments_give_errors_naming_the_layer():
    nodes, senders, receivers = small_graph()
    cases = [
        ([nodes, senders], r"GINConv 'gin' takes \[node_features \(N, F\), senders \(E,\), "
                           r"receivers \(E,\)\]; received 2 input\(s\)"),
        ([nodes, senders.astype("float32"), receivers], r"senders has dtype float32, but must "
                                                        r"be integers"),
        ([nodes[None], senders, receivers], r"node_features has shape \(1, 5, 3\), rank 3"),
        ([nodes, senders, receivers[:3]], r"senders has 8 entries but receivers 3"),
    ]
    for inputs, message in cases:
        with pytest.raises(ValueError, match=message):
            layers.GINConv(2, name="gin")(inputs)
    for kwargs, message in [({"units": 0}, "units must be a positive integer"),
                            ({"units": 2, "epsilon": float("nan")}, "epsilon must be a finite"),
                            ({"units": 2, "train_epsilon": "yes"}, "train_epsilon must be True"),
                            ({"units": 2, "activation": "relux"}, "activation must be")]:
        with pytest.raises(ValueError, match=message):
            layers.GINConv(**kwargs)


# --------------------------------------------------------------- a graph classifier, end to end
def cycle_or_star(kind, n, rng):
    """Node features (ones plus noise) and both-direction edges of a cycle or a star."""
    if kind == "cycle":
        ends = [(i, (i + 1) % n) for i in range(n)]
    else:
        ends = [(0, i) for i in range(1, n)]
    senders = [a for a, _ in ends] + [b for _, b in ends]
    receivers = [b for _, b in ends] + [a for a, _ in ends]
    return 1 + 0.1 * rng.normal(size=(n, 2)), senders, receivers


def graph_batch(seed, count=8):
    """A ready-made batch: `count` cycles (label 1) and stars (label 0), and an empty graph."""
    rng = np.random.default_rng(seed)
    parts, labels, offset = {name: [] for name in INPUT_NAMES}, [], 0
    for g in range(count + 1):
        kind, n = ("cycle", "star")[g % 2], (0 if g == count // 2 else int(rng.integers(3, 6)))
        features, senders, receivers = cycle_or_star(kind, n, rng) if n else (
            np.zeros((0, 2)), [], [])
        parts["node_features"].append(features)
        parts["senders"].append(np.add(senders, offset))
        parts["receivers"].append(np.add(receivers, offset))
        parts["graph_index"].append(np.full(n, g))
        parts["node_counts"].append([n])
        labels.append(int(kind == "cycle"))
        offset += n
    x = {k: np.concatenate(v).astype("float32" if k == "node_features" else "int32")
         for k, v in parts.items()}
    return x, np.array(labels, "int32")


def gin_model():
    return gf.GraphModel(
        inputs=INPUT_NAMES,
        nodes=[gf.Node(layers.GINConv(16, name="gin"), ["node_features", "senders", "receivers"]),
               gf.Node(layers.SegmentPooling("mean", name="readout"),
                       ["gin", "graph_index", "node_counts"]),
               gf.Node(layers.Dense(2, activation="softmax", name="probabilities"),
                       "readout")],
        outputs="probabilities")


@pytest.fixture(scope="module")
def trained():
    """The classifier after 20 epochs on 3 ready-made batches (a tf.data.Dataset of them).

    XLA stays off: each batch has its own node count, and compiling for each costs seconds
    (XLA equality is checked on the layers themselves)."""
    keras.utils.set_random_seed(0)  # module scope: set here, not by the per-test fixture
    batches = [graph_batch(seed) for seed in range(3)]
    dataset = tf.data.Dataset.from_tensors(batches[0])
    for batch in batches[1:]:
        dataset = dataset.concatenate(tf.data.Dataset.from_tensors(batch))
    model = gin_model()
    model.compile(optimizer=gf.optimizers.Adam(0.03), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"], jit_compile=False)
    history = model.fit(dataset, epochs=20, verbose=0)
    return model, history, batches


def test_a_graph_model_with_dict_inputs_trains_with_fit(trained):
    model, history, batches = trained
    losses = history.history["loss"]
    assert losses[-1] < 0.6 * losses[0], losses
    assert history.history["accuracy"][-1] >= 0.9
    x, y = batches[0]
    probabilities = model(x).numpy()  # one row per graph, the empty one included
    assert probabilities.shape == (len(y), 2)
    assert (probabilities.argmax(1) == y).mean() >= 0.85


def test_flops_counts_the_mlps_of_a_graph_model(trained):
    counts = trained[0].flops()  # batch size 1: one node, one edge, one graph
    per_layer = counts["per_layer"]
    # Hand-computed: each Dense of the MLP is a MatMul 2*n*k*units plus a bias add.
    assert per_layer["gin_mlp_1"]["forward"] == 2 * 1 * 2 * 16 + 16
    assert per_layer["gin_mlp_2"]["forward"] == 2 * 1 * 16 * 16 + 16
    # The aggregation's (1 + eps) (one add), its scaling and the sum (2 features each), and
    # the id checks (>= 0, < N, and: per sender and per receiver); the profiler has no
    # statistic for segment sums, and lists them as uncounted.
    assert per_layer["gin"]["forward"] == 1 + 2 + 2 + 2 * 3
    assert counts["uncounted_ops"]["forward"]["UnsortedSegmentSum"] >= 2
    assert counts["backward"] > 0


def test_checkpoint_restores_the_mlp_weights(trained, tmp_path):
    model, _, batches = trained
    x, _ = batches[1]
    restored = gin_model()
    restored(x)
    assert not np.allclose(restored(x).numpy(), model(x).numpy())
    restored.load_weights(model.save_weights(str(tmp_path / "gin")))
    for a, b in zip(restored.variables, model.variables):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    # Not bit for bit: on a GPU the neighbour sums are atomic adds, in no fixed order
    # (measured on an H200: 1.04e-6 relative).
    np.testing.assert_allclose(restored(x).numpy(), model(x).numpy(), rtol=1e-5)


def test_an_edge_outside_the_batch_is_refused_in_a_call():
    nodes, senders, receivers = small_graph()
    for name, bad in (("senders", senders.copy()), ("receivers", receivers.copy())):
        bad[2] = -1 if name == "receivers" else len(nodes)
        inputs = [nodes, bad, receivers] if name == "senders" else [nodes, senders, bad]
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=rf"GINConv 'gin': {name} must index the batch's nodes"):
            layers.GINConv(2, name="gin")(inputs)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_an_edge_outside_the_batch_from_a_dataset_stops_fit(jit_compile):
    """XLA would clamp the sender (and any step drops a negative receiver's edge) silently:
    the loop checks each batch before its step, whatever XLA does with the layer's asserts."""
    x, y = graph_batch(0)
    x["receivers"] = x["receivers"].copy()
    x["receivers"][3] = len(x["node_features"])
    model = gin_model()
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy",
                  jit_compile=jit_compile)
    before = None
    with pytest.raises(ValueError, match=r"^GINConv 'gin': receivers must index the batch's "
                                         r"nodes, 0 to the node count - 1; an edge names a node "
                                         r"outside\. .*\(batch 0\)\.$"):
        model.fit(tf.data.Dataset.from_tensors((x, y)), epochs=1, verbose=0)
        before = model.get_weights()
    assert before is None


def test_flops_and_step_report_of_a_real_graph_batch(trained):
    """A graph batch's rows are its nodes and edges: counted at an example batch's shapes
    (`inputs=`), the MLPs run once per node, and the report traces those shapes."""
    from graphfit import inspect as gf_inspect

    model, _, batches = trained
    x, y = batches[0]
    nodes = len(x["node_features"])
    counts = model.flops(batch_size=len(y), inputs=x)
    assert counts["per_layer"]["gin_mlp_1"]["forward"] == 2 * nodes * 2 * 16 + nodes * 16
    assert counts["per_layer"]["gin_mlp_2"]["forward"] == 2 * nodes * 16 * 16 + nodes * 16
    assert f"node_features[{nodes}, 2]" in counts["method"]
    report = gf_inspect.step_graph(model, "test", len(y), x=x, y=y, flops=False,
                                   keep_shapes=True)
    assert f"node_features: float32[{nodes}, 2]" in report.signature
    assert f"senders: int32[{len(x['senders'])}]" in report.signature


@pytest.mark.parametrize("embedded", [False, True], ids=["direct", "through_dense"])
def test_an_edge_outside_the_batch_stops_every_loop_under_xla(embedded):
    """fit, evaluate and predict check a dataset's ids in the loop; the node count is the
    rows of the model input the GINConv's node features come from, through a Dense too."""
    x, y = graph_batch(1)
    x["senders"] = x["senders"].copy()
    x["senders"][0] = len(x["node_features"]) + 2
    source = "node_features"
    nodes = []
    if embedded:
        nodes.append(gf.Node(layers.Dense(4, name="embed"), "node_features"))
        source = "embed"
    nodes += [gf.Node(layers.GINConv(8, name="gin"), [source, "senders", "receivers"]),
              gf.Node(layers.SegmentPooling("mean", name="readout"),
                      ["gin", "graph_index", "node_counts"]),
              gf.Node(layers.Dense(2, name="logits"), "readout")]
    model = gf.GraphModel(inputs=INPUT_NAMES, nodes=nodes, outputs="logits")
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", jit_compile=True)
    dataset = tf.data.Dataset.from_tensors((x, y))
    message = r"^GINConv 'gin': senders must index the batch's nodes"
    for run in (lambda: model.fit(dataset, epochs=1, verbose=0),
                lambda: model.evaluate(dataset, verbose=0),
                lambda: model.predict(dataset.map(lambda a, b: a), verbose=0)):
        with pytest.raises(ValueError, match=message):
            run()


def test_regularizers_and_constraints_reach_both_dense_layers_of_the_mlp():
    import keras

    gin = layers.GINConv(4, kernel_regularizer=keras.regularizers.L2(0.1),
                         bias_constraint="non_neg", activity_regularizer="l1")
    out = gin([tf.ones((3, 2)), tf.constant([0, 1]), tf.constant([1, 2])])
    kernels = [dense.kernel.numpy() for dense in gin.mlp]
    penalties = sorted(float(v) for v in gin.losses)
    expected = sorted([0.1 * float((k ** 2).sum()) for k in kernels]
                      + [0.01 * float(np.abs(out.numpy()).sum()) / 3])  # Keras: / batch
    np.testing.assert_allclose(penalties, expected, rtol=1e-5)
    rebuilt = layers.GINConv.from_config(gin.get_config())
    assert [type(d.kernel_regularizer).__name__ for d in rebuilt.mlp] == ["L2", "L2"]
    assert all(type(d.bias_constraint).__name__ == "NonNeg" for d in rebuilt.mlp)
    assert rebuilt.mlp[0].activity_regularizer is None  # the GIN layer's output only
