"""graphfit.datasets graphs: the structural-class generator and the GraphSet container."""

import numpy as np
import pytest

from graphfit.datasets import GRAPH_CLASSES, GraphSet, make_graph_classes
from graphfit.datasets.graph_set import bucket_size


@pytest.fixture(scope="module")
def data():
    return make_graph_classes(64, seed=3)


def _degrees(graphs, i):
    one = graphs[[i]]
    return np.bincount(one.receivers, minlength=int(one.node_counts[0]))


def test_classes_sizes_and_dtypes(data):
    graphs, labels = data
    assert len(GRAPH_CLASSES) >= 6 and len(graphs) == 64
    assert labels.dtype == np.int32 and set(labels.tolist()) == set(range(len(GRAPH_CLASSES)))
    assert graphs.node_counts.min() >= 10 and graphs.node_counts.max() <= 30
    assert graphs.senders.dtype == np.int32 and graphs.node_features.dtype == np.float32
    np.testing.assert_array_equal(graphs.node_features, 1.0)  # constant: no class hint


@pytest.mark.parametrize("name, check", [
    ("cycle", lambda d, n: set(d) == {2}),
    ("path", lambda d, n: sorted(d)[:3] == [1, 1, 2] and d.max() == 2),
    ("star", lambda d, n: sorted(d) == [1] * (n - 1) + [n - 1]),
    ("wheel", lambda d, n: sorted(d) == [3] * (n - 1) + [n - 1]),
    ("complete", lambda d, n: set(d) == {n - 1}),
    ("grid", lambda d, n: sorted(d)[:4] == [2, 2, 2, 2] and d.max() in (3, 4)),
    ("circular_ladder", lambda d, n: set(d) == {3} and n % 2 == 0),
])
def test_each_class_has_its_structure(data, name, check):
    graphs, labels = data
    for i in np.where(labels == GRAPH_CLASSES.index(name))[0]:
        degrees = _degrees(graphs, i)
        assert check(degrees, len(degrees)), (name, sorted(degrees))


def test_edges_are_undirected_and_seeded(data):
    graphs, labels = data
    pairs = set(zip(graphs.senders.tolist(), graphs.receivers.tolist()))
    one = graphs[[5]]
    assert {(r, s) for s, r in zip(one.senders, one.receivers)} == \
        set(zip(one.senders.tolist(), one.receivers.tolist()))
    assert pairs  # non-empty
    again, _ = make_graph_classes(64, seed=3)
    np.testing.assert_array_equal(again.senders, graphs.senders)
    other, _ = make_graph_classes(64, seed=4)
    assert not np.array_equal(other.node_counts, graphs.node_counts)
    degree, _ = make_graph_classes(8, seed=3, features="degree")
    np.testing.assert_array_equal(degree.node_features[:, 0],
                                  np.bincount(degree.receivers + np.repeat(
                                      np.cumsum(np.r_[0, degree.node_counts[:-1]]),
                                      degree.edge_counts)))



@pytest.mark.parametrize("max_degree", [3, 8])
def test_one_hot_degree_caps_high_degrees_into_the_last_column(max_degree):
    graphs, labels = make_graph_classes(16, seed=5, features="one_hot_degree",
                                        max_degree=max_degree)
    plain, _ = make_graph_classes(16, seed=5, features="degree")  # same draws, scalar degree
    degree = plain.node_features[:, 0].astype(int)
    expected = np.zeros((len(degree), max_degree + 1), np.float32)
    expected[np.arange(len(degree)), np.minimum(degree, max_degree)] = 1.0
    np.testing.assert_array_equal(graphs.node_features, expected)
    np.testing.assert_array_equal(graphs.senders, plain.senders)
    hub = np.argmax(labels == GRAPH_CLASSES.index("star"))  # hub degree n - 1 >= 9: last column
    assert graphs[[hub]].node_features[:, max_degree].sum() == 1.0

def test_batch_shifts_edges_and_marks_graphs():
    graphs = GraphSet.from_lists([np.ones((3, 2)), np.zeros((0, 2)), 2 * np.ones((2, 2))],
                                 [[0, 1], [], [1]], [[1, 2], [], [0]])
    batch = graphs.batch([2, 1, 0])
    assert batch["node_counts"].tolist() == [2, 0, 3]
    assert batch["graph_index"].tolist() == [0, 0, 2, 2, 2]
    assert batch["senders"].tolist() == [1, 2, 3] and batch["receivers"].tolist() == [0, 3, 4]
    padded = graphs.batch([2, 1, 0], pad_nodes=8, pad_edges=5)
    assert padded["graph_index"].tolist()[5:] == [3, 3, 3]  # padding nodes: graph G
    assert padded["senders"].tolist()[3:] == [5, 5]  # padding edges join a padding node
    assert padded["node_features"][5:].sum() == 0


def test_dataset_batches_equal_numpy_batches(data):
    graphs, labels = data
    batch, y = next(iter(graphs.to_dataset(7, labels, pad=False)))
    expected = graphs.batch(range(7))
    for key, value in expected.items():
        assert batch[key].dtype.name == value.dtype.name, key
        np.testing.assert_array_equal(batch[key].numpy(), value)
    np.testing.assert_array_equal(y.numpy(), labels[:7])


def test_padded_batches_take_few_shapes_and_keep_the_data(data):
    graphs, labels = data
    shapes = set()
    for batch, _ in graphs.to_dataset(8, labels, shuffle=True, seed=1).repeat(3):
        g = int(batch["node_counts"].shape[0])
        real = int(batch["node_counts"].numpy().sum())
        index = batch["graph_index"].numpy()
        assert (index[:real] < g).all() and (index[real:] == g).all() and len(index) > real
        assert (batch["senders"].numpy() >= real).sum() == (batch["receivers"].numpy()
                                                             >= real).sum()
        shapes.add((len(index), int(batch["senders"].shape[0]), g))
    assert len(shapes) <= 2  # one or two capacity levels, all batches full (64 = 8 x 8)


def test_bucket_sizes_waste_little():
    for count in range(1, 5000, 7):
        size = bucket_size(count)
        assert count <= size <= max(count * 1.25, 8)


@pytest.mark.parametrize("call, message", [
    (lambda: make_graph_classes(0), "n_graphs"),
    (lambda: make_graph_classes(8, min_nodes=5), "min_nodes"),
    (lambda: make_graph_classes(8, features="onehot"), "features"),
    (lambda: make_graph_classes(8, features="one_hot_degree", max_degree=0), "max_degree"),
    (lambda: GraphSet.from_lists([np.ones((2, 1))], [[0]], [[2]]), "receivers"),
    (lambda: GraphSet.from_lists([np.ones((2, 1))], [[0, 1]], [[1]]), "as many receivers"),
    (lambda: GraphSet(np.ones((3, 1)), [2], [], [], [0]), "node_features"),
])
def test_bad_arguments_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_npz_round_trip(tmp_path, data):
    graphs, _ = data
    graphs.save_npz(tmp_path / "g.npz")
    again = GraphSet.load_npz(tmp_path / "g.npz")
    for key in ("node_features", "node_counts", "senders", "receivers", "edge_counts"):
        np.testing.assert_array_equal(getattr(again, key), getattr(graphs, key))
