"""SegmentPooling: hand-computed and NumPy values, empty graphs anywhere in a batch, node
permutations, per-graph attention, padding, XLA, numeric gradients, errors, checkpoints."""

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers

REDUCES = ["sum", "mean", "max", "attention"]


def numpy_pool(values, graph_index, num_graphs, reduce, kernel=None):
    """The reference: a Python loop over graphs; empty graphs give zeros."""
    out = np.zeros((num_graphs, values.shape[1]), values.dtype)
    for g in range(num_graphs):
        rows = values[graph_index == g]
        if not len(rows):
            continue
        if reduce == "attention":
            scores = (rows @ kernel)[:, 0]
            weights = np.exp(scores - scores.max())
            out[g] = (weights / weights.sum()) @ rows
        else:
            out[g] = {"sum": np.sum, "mean": np.mean, "max": np.max}[reduce](rows, axis=0)
    return out


def graphs(sizes, features=3, seed=0):
    """One (n, features) array per graph size."""
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(n, features)).astype("float32") for n in sizes]


def batch_of(graph_list):
    """[values, graph_index, node_counts] of the graphs, graph after graph."""
    counts = np.array([len(g) for g in graph_list], "int32")
    values = np.concatenate(graph_list) if graph_list else np.zeros((0, 3), "float32")
    return [values, np.repeat(np.arange(len(counts)), counts).astype("int32"), counts]


@pytest.fixture(scope="module")
def pools():
    """One layer per reduce, built on a first batch (attention with a fixed random kernel)."""
    built = {}
    for reduce in REDUCES:
        layer = layers.SegmentPooling(reduce, kernel_initializer="random_normal")
        layer(batch_of(graphs([2, 3])))
        built[reduce] = layer
    return built


def kernel_of(layer):
    return None if layer.kernel is None else layer.kernel.numpy()


def test_hand_computed_values_with_empty_graphs_first_middle_and_last():
    values = np.array([[1.0, -2.0], [3.0, 4.0], [-5.0, 6.0]], "float32")
    inputs = [values, np.array([1, 1, 3], "int32"), np.array([0, 2, 0, 1, 0], "int32")]
    expected = {
        "sum": [[0, 0], [4, 2], [0, 0], [-5, 6], [0, 0]],
        "mean": [[0, 0], [2, 1], [0, 0], [-5, 6], [0, 0]],
        "max": [[0, 0], [3, 4], [0, 0], [-5, 6], [0, 0]],  # an empty graph's max is 0
    }
    for reduce, rows in expected.items():
        out = layers.SegmentPooling(reduce)(inputs).numpy()
        assert out.shape == (5, 2) and np.all(np.isfinite(out))
        np.testing.assert_allclose(out, rows, atol=1e-6)
    attention = layers.SegmentPooling("attention", kernel_initializer="zeros")
    attention(inputs)
    attention.kernel.assign([[1.0], [0.0]])  # scores 1, 3 in graph 1; -5 alone in graph 3
    a = np.exp(1.0) / (np.exp(1.0) + np.exp(3.0))
    np.testing.assert_allclose(attention(inputs).numpy()[[1, 3]],
                               [[a * 1 + (1 - a) * 3, a * -2 + (1 - a) * 4], [-5, 6]], rtol=1e-6)
    np.testing.assert_allclose(attention.attention_weights(inputs).numpy(), [a, 1 - a, 1.0],
                               rtol=1e-6)


@pytest.mark.parametrize("reduce", REDUCES)
def test_a_graph_alone_equals_the_same_graph_in_any_batch(pools, reduce):
    layer = pools[reduce]
    one, two, three = graphs([4, 1, 3], seed=1)
    empty = np.zeros((0, 3), "float32")
    alone = [layer(batch_of([g])).numpy()[0] for g in (one, two, three)]
    for g, row in zip((one, two, three), alone):
        np.testing.assert_allclose(row, numpy_pool(g, np.zeros(len(g)), 1, reduce,
                                                   kernel_of(layer))[0], rtol=1e-5, atol=1e-6)
    for order in ([empty, one, two, three], [one, empty, two, empty, three],
                  [one, two, three, empty], [empty, one, empty, empty, two, three, empty]):
        pooled = layer(batch_of(order)).numpy()
        assert pooled.shape == (len(order), 3)  # trailing empty graphs keep their rows
        real = [i for i, g in enumerate(order) if len(g)]
        np.testing.assert_allclose(pooled[real], alone, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(pooled[[i for i, g in enumerate(order) if not len(g)]], 0)


@pytest.mark.parametrize("reduce", REDUCES)
def test_node_permutations_and_padding_nodes_change_nothing(pools, reduce):
    layer = pools[reduce]
    values, graph_index, counts = batch_of(graphs([3, 0, 5, 2, 0], seed=2))
    expected = layer([values, graph_index, counts]).numpy()
    np.testing.assert_allclose(expected, numpy_pool(values, graph_index, 5, reduce,
                                                    kernel_of(layer)), rtol=1e-5, atol=1e-6)
    order = np.random.default_rng(3).permutation(len(values))
    np.testing.assert_allclose(layer([values[order], graph_index[order], counts]).numpy(),
                               expected, rtol=1e-5, atol=1e-6)
    # Padding nodes (graph_index >= G), huge so any leak shows, mixed in among real ones.
    padded_values = np.concatenate([values, np.full((4, 3), 1e6, "float32")])
    padded_index = np.concatenate([graph_index, [5, 9, 5, 6]]).astype("int32")
    mixed = np.random.default_rng(4).permutation(len(padded_values))
    padded = layer([padded_values[mixed], padded_index[mixed], counts]).numpy()
    np.testing.assert_allclose(padded, expected, rtol=1e-5, atol=1e-6)


def test_attention_weights_sum_to_one_within_each_graph(pools):
    layer = pools["attention"]
    values, graph_index, counts = batch_of(graphs([3, 0, 4, 1], seed=5))
    values = np.concatenate([values, np.ones((2, 3), "float32")])  # two padding nodes
    graph_index = np.concatenate([graph_index, [4, 4]]).astype("int32")
    weights = layer.attention_weights([values, graph_index, counts]).numpy()
    np.testing.assert_allclose(np.bincount(graph_index, weights, minlength=5),
                               [1, 0, 1, 1, 0], rtol=1e-6)  # never one softmax over the batch
    scores = (values @ layer.kernel.numpy())[:, 0]
    for g in (0, 2, 3):
        mine = graph_index == g
        softmax = np.exp(scores[mine]) / np.exp(scores[mine]).sum()
        np.testing.assert_allclose(weights[mine], softmax, rtol=1e-5)
    with pytest.raises(ValueError, match=r"attention_weights needs reduce='attention'"):
        layers.SegmentPooling("sum").attention_weights([values, graph_index, counts])


def test_xla_equals_eager_for_batches_of_several_sizes(pools):
    # (tf.function without XLA is compared in the layer contract, test_conformance.)
    batches = [batch_of(graphs(sizes, seed=i)) for i, sizes in
               enumerate([[0, 2, 0, 3, 0], []])]
    for reduce in REDUCES:
        layer = pools[reduce]
        xla = tf.function(lambda v, i, c: layer([v, i, c]), jit_compile=True)  # noqa: B023
        for inputs in batches:
            eager = layer(inputs).numpy()
            assert eager.shape == (len(inputs[2]), 3)
            np.testing.assert_allclose(xla(*inputs).numpy(), eager, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduce", REDUCES)
def test_gradients_match_finite_differences(reduce):
    # float64, and no ties (a max's gradient is undefined at a tie), empty graphs included.
    values, graph_index, counts = batch_of(graphs([0, 3, 2, 0, 4, 0], seed=6))
    values = values.astype("float64")
    layer = layers.SegmentPooling(reduce, kernel_initializer="random_normal", dtype="float64")
    layer([values, graph_index, counts])
    projection = np.random.default_rng(7).normal(size=(6, 3))

    def loss_of_values(v):
        return tf.reduce_sum(layer([v, graph_index, counts]) * projection)

    theoretical, numerical = tf.test.compute_gradient(loss_of_values, [values])
    np.testing.assert_allclose(theoretical[0], numerical[0], rtol=1e-5, atol=1e-6)
    if reduce == "attention":  # the kernel: central differences by assigning it
        with tf.GradientTape() as tape:
            loss = loss_of_values(tf.constant(values))
        analytic = tape.gradient(loss, layer.kernel).numpy()
        kernel, numeric = layer.kernel.numpy(), np.zeros_like(analytic)
        for i in range(len(kernel)):
            for sign in (1, -1):
                layer.kernel.assign(kernel + sign * 1e-6 * (np.arange(len(kernel)) == i)[:, None])
                numeric[i] += sign * float(loss_of_values(tf.constant(values))) / 2e-6
        np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-6)
        assert np.abs(analytic).max() > 1e-3  # the kernel does learn


@pytest.mark.parametrize("reduce", REDUCES)
def test_all_graphs_empty_gives_zeros_and_finite_gradients(pools, reduce):
    values = tf.constant(np.full((2, 3), -1e30, "float32"))  # padding nodes only
    inputs = [values, tf.constant([3, 3]), tf.constant([0, 0, 0])]
    with tf.GradientTape() as tape:
        tape.watch(values)
        out = pools[reduce](inputs)
    np.testing.assert_array_equal(out.numpy(), np.zeros((3, 3)))
    gradient = tape.gradient(out, values)
    assert gradient is None or np.all(tf.convert_to_tensor(gradient).numpy() == 0)


def test_bad_inputs_give_errors_naming_the_layer():
    values, graph_index, counts = batch_of(graphs([2, 1]))
    cases = [
        ([values, graph_index], r"'pool' .*takes \[values \(N, F\), graph_index \(N,\), "
                                r"node_counts \(G,\)\]; received 2 input\(s\)"),
        (values, r"'pool' .*received one tensor, not a list"),
        ([values, graph_index.astype("float32"), counts],
         r"'pool' .*graph_index has dtype float32, but must be integers"),
        ([values, graph_index, counts.astype("float32")], r"node_counts has dtype float32"),
        ([values[None], graph_index, counts], r"values has shape \(1, 3, 3\), rank 3, but "
                                              r"must have rank 2"),
        ([values[:2], graph_index, counts], r"values has 2 rows but graph_index 3 entries"),
    ]
    for inputs, message in cases:
        with pytest.raises(ValueError, match=message):
            layers.SegmentPooling("mean", name="pool")(inputs)
    with pytest.raises(ValueError, match=r"SegmentPooling: reduce must be 'sum', 'mean', "
                                         r"'max' or 'attention'. Received: reduce='maen'. "
                                         r"Did you mean 'mean'\?"):
        layers.SegmentPooling("maen")


def test_config_round_trip_and_checkpoint_of_the_attention_kernel(tmp_path):
    layer = layers.SegmentPooling("attention", kernel_initializer="ones", name="readout")
    config = layer.get_config()
    assert config["reduce"] == "attention" and config["name"] == "readout"
    assert layers.SegmentPooling.from_config(config).get_config() == config

    def model():
        return gf.GraphModel(
            inputs=["h", "graph_index", "node_counts"],
            nodes=[gf.Node(layers.SegmentPooling("attention", name="readout"),
                           ["h", "graph_index", "node_counts"])], outputs="readout")

    inputs = dict(zip(["h", "graph_index", "node_counts"], batch_of(graphs([3, 0, 2]))))
    first, second = model(), model()
    expected = first(inputs).numpy()
    second(inputs)
    assert not np.allclose(second(inputs).numpy(), expected)
    second.load_weights(first.save_weights(str(tmp_path / "weights")))
    np.testing.assert_array_equal(second.get_layer("readout").kernel.numpy(),
                                  first.get_layer("readout").kernel.numpy())
    np.testing.assert_allclose(second(inputs).numpy(), expected, rtol=1e-6)
