"""graphfit.autodiff: Jacobians of any node and per-example gradients, against finite
differences and against tf.GradientTape used directly."""

import gc
import warnings
import weakref

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import autodiff, layers
from graphfit.autodiff import node_jacobian
from graphfit.core import layer_outputs


def mlp(dtype="float32", batch_norm=False):
    stack = [layers.Dense(3, activation="tanh", name="hidden")]
    if batch_norm:
        stack.append(layers.BatchNormalization(name="bn"))
    stack.append(layers.Dense(2, name="head"))
    return gf.Sequential(stack, input_shape=(2,), dtype=dtype)


def node_value(model, x, of):
    """The forward value of the output or of a named layer, read directly."""
    if of == "output":
        return model(x).numpy()
    with layer_outputs.capture_outputs(model, [of]) as captured:
        model(x)
    return captured[of].numpy()


def finite_differences(f, value, eps=1e-6):
    """d f / d value by central differences: shape f().shape + value.shape."""
    value = np.array(value, dtype=np.float64)
    columns = []
    for index in np.ndindex(*value.shape):
        plus, minus = value.copy(), value.copy()
        plus[index] += eps
        minus[index] -= eps
        columns.append((f(plus) - f(minus)) / (2 * eps))
    out = np.stack(columns, axis=-1)
    return out.reshape(out.shape[:-1] + value.shape)


@pytest.fixture(scope="module")
def model64():
    keras.utils.set_random_seed(7)
    return mlp("float64")


@pytest.fixture(scope="module")
def x64():
    return np.random.default_rng(0).normal(size=(4, 2))


# ------------------------------------------------------------------------------- jacobian
@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_jacobian_wrt_variables_matches_finite_differences(model64, x64, mode):
    jac = autodiff.jacobian(model64, x64, of="hidden", wrt="variables", mode=mode)
    assert list(jac) == [autodiff.variable_key(v) for v in model64.trainable_variables]
    for variable in model64.trainable_variables:
        original = variable.numpy()

        def f(value, variable=variable):
            variable.assign(value)
            return node_value(model64, x64, "hidden")

        expected = finite_differences(f, original)
        variable.assign(original)
        got = jac[autodiff.variable_key(variable)].numpy()
        assert got.shape == (4, 3, *variable.shape)
        np.testing.assert_allclose(got, expected, atol=1e-8)
    # The hidden layer does not depend on the head: zeros, not missing entries.
    assert not np.any(jac[autodiff.variable_key(model64.get_layer("head").kernel)].numpy())


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_jacobian_wrt_inputs_matches_finite_differences(model64, x64, mode):
    expected = finite_differences(lambda v: node_value(model64, v, "output"), x64)  # (4,2,4,2)
    full = autodiff.jacobian(model64, x64, wrt="inputs", mode=mode, per_example=False)
    assert full.shape == (4, 2, 4, 2)
    np.testing.assert_allclose(full.numpy(), expected, atol=1e-8)
    blocks = autodiff.jacobian(model64, x64, wrt="inputs", mode=mode)
    assert blocks.shape == (4, 2, 2)  # (batch, out, in): the diagonal blocks of the full one
    for b in range(4):
        np.testing.assert_allclose(blocks[b].numpy(), expected[b, :, b], atol=1e-8)
    off_diagonal = expected.copy()
    for b in range(4):
        off_diagonal[b, :, b] = 0
    assert np.abs(off_diagonal).max() < 1e-8  # examples independent at training=False


@pytest.fixture(scope="module")
def bn_model():
    keras.utils.set_random_seed(3)
    model = mlp(batch_norm=True)
    bn = model.get_layer("bn")  # non-trivial moving statistics
    bn.moving_mean.assign([0.1, -0.2, 0.3])
    bn.moving_variance.assign([0.5, 2.0, 1.5])
    return model


@pytest.mark.parametrize("mode", ["forward", "reverse"])
@pytest.mark.parametrize("of", ["output", "hidden"])
def test_jacobian_matches_gradient_tape_jacobian(bn_model, of, mode):
    x = tf.constant(np.random.default_rng(1).normal(size=(3, 2)), tf.float32)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        with layer_outputs.capture_outputs(bn_model, ["hidden"]) as captured:
            y = bn_model(x)
        node = y if of == "output" else captured["hidden"]
    variables = bn_model.trainable_variables
    expected = tape.jacobian(node, variables, unconnected_gradients="zero")
    got = autodiff.jacobian(bn_model, x, of=of, wrt="variables", mode=mode)
    for variable, want in zip(variables, expected):
        np.testing.assert_allclose(got[autodiff.variable_key(variable)], want, atol=1e-6)
    np.testing.assert_allclose(autodiff.jacobian(bn_model, x, of=of, wrt="inputs", mode=mode),
                               tape.batch_jacobian(node, x), atol=1e-6)
    np.testing.assert_allclose(
        autodiff.jacobian(bn_model, x, of=of, wrt="inputs", mode=mode, per_example=False),
        tape.jacobian(node, x), atol=1e-6)


def test_jacobian_wrt_one_layers_variables_and_a_list(bn_model):
    x = np.ones((2, 2), "float32")
    by_layer = autodiff.jacobian(bn_model, x, wrt="head")
    head = bn_model.get_layer("head")
    kernel, bias = autodiff.variable_key(head.kernel), autodiff.variable_key(head.bias)
    assert list(by_layer) == [kernel, bias] and kernel.endswith("/head/kernel")
    assert by_layer[kernel].shape == (2, 2, 3, 2)
    assert by_layer[bias].shape == (2, 2, 2)
    # d y_bo / d bias_p = [o == p] for every example.
    np.testing.assert_array_equal(by_layer[bias], np.stack([np.eye(2)] * 2))
    by_list = autodiff.jacobian(bn_model, x, wrt=[head.kernel])
    assert list(by_list) == [kernel]
    np.testing.assert_array_equal(by_list[kernel], by_layer[kernel])


def test_auto_mode_choice_and_one_trace_per_input_shape(monkeypatch):
    keras.utils.set_random_seed(8)
    model = mlp(batch_norm=True)
    chosen = []
    # wrt_inputs(node_fn, x, out_shape, mode, per_example), wrt_variables(..., variables, mode)
    for name, position in (("wrt_inputs", 0), ("wrt_variables", 1)):
        original = getattr(node_jacobian, name)

        def spy(node_fn, x, out_shape, *args, original=original, position=position):
            chosen.append(args[position])  # runs when traced, not when a trace is reused
            return original(node_fn, x, out_shape, *args)

        monkeypatch.setattr(node_jacobian, name, spy)
    x = np.ones((2, 2), "float32")
    autodiff.jacobian(model, x, of="hidden", wrt="inputs")  # 2 in, 3 out per example
    autodiff.jacobian(model, x, of="head", wrt="inputs")  # 2 in, 2 out
    autodiff.jacobian(model, x, of="hidden", wrt="bn")  # 6 parameters, 2 x 3 outputs
    autodiff.jacobian(model, x, of="head", wrt="bn")  # 6 parameters, 2 x 2 outputs
    assert chosen == ["forward", "reverse", "reverse", "reverse"]
    autodiff.jacobian(model, 2 * x, of="head", wrt="bn")  # same shape: the trace is reused
    assert len(chosen) == 4
    autodiff.jacobian(model, np.ones((3, 2), "float32"), of="hidden", wrt="bn")  # 9 > 6
    assert chosen[-1] == "forward"
    # The kept traces hold the model weakly.
    model_ref = weakref.ref(model)
    del model
    gc.collect()
    assert model_ref() is None


def test_jacobian_and_per_example_gradients_never_move_batch_norm_statistics(bn_model):
    bn = bn_model.get_layer("bn")
    before = [bn.moving_mean.numpy(), bn.moving_variance.numpy()]
    x = np.random.default_rng(2).normal(size=(4, 2)).astype("float32")
    autodiff.jacobian(bn_model, x, wrt="variables", mode="forward", training=True)
    autodiff.jacobian(bn_model, x, wrt="inputs", mode="reverse", training=True)
    autodiff.per_example_gradients(bn_model, x, np.zeros((4, 2)), loss="mse", training=True)
    np.testing.assert_array_equal(bn.moving_mean, before[0])
    np.testing.assert_array_equal(bn.moving_variance, before[1])
    bn_model(x, training=True)  # a plain training-mode call does move them
    assert not np.array_equal(bn.moving_mean.numpy(), before[0])
    bn.moving_mean.assign(before[0])
    bn.moving_variance.assign(before[1])


class Shared(gf.Model):
    def __init__(self):
        super().__init__()
        self.twice = layers.Dense(2, name="twice")

    def call(self, x, training=False):
        return self.twice(self.twice(x))


def two_outputs():
    return gf.GraphModel(
        inputs={"x": (2,)},
        nodes=[gf.Node(layers.Dense(3, name="trunk"), "x"),
               gf.Node(layers.Dense(2, name="a"), "trunk"),
               gf.Node(layers.Dense(1, name="b"), "trunk")],
        outputs=["a", "b"])


def test_jacobian_errors(bn_model):
    x = np.ones((2, 2), "float32")
    with pytest.raises(ValueError, match=r"no layer named 'hiden'.*'hidden', 'bn', 'head'"):
        autodiff.jacobian(bn_model, x, wrt="hiden")
    with pytest.raises(ValueError, match=r"Did you mean 'hidden'.*Its layers"):
        autodiff.jacobian(bn_model, x, of="hiden")
    with pytest.raises(ValueError, match="mode must be one of"):
        autodiff.jacobian(bn_model, x, mode="sideways")
    shared = Shared()
    shared(x)
    with pytest.raises(ValueError, match="'twice' runs 2 times.*ambiguous"):
        autodiff.jacobian(shared, x, of="twice")
    model = two_outputs()
    with pytest.raises(ValueError, match=r"several outputs \['a', 'b'\].*of=<one output name>"):
        autodiff.jacobian(model, {"x": x}, wrt="inputs")
    jac = autodiff.jacobian(model, {"x": x}, of="b", wrt="inputs")
    assert jac["x"].shape == (2, 1, 2)  # a Jacobian per input, in the structure of x
    embed = gf.Sequential([layers.Embedding(5, 2, name="embed"), layers.Dense(1)],
                          input_shape=(3,))
    ids = np.array([[0, 1, 2], [3, 4, 0]], "int32")
    with pytest.raises(ValueError, match="wrt='inputs' needs floating inputs.*int32"):
        autodiff.jacobian(embed, ids, wrt="inputs")
    # The variables of an integer-input model are differentiable: (batch, 3, 1, 5, 2).
    (embedding,) = autodiff.jacobian(embed, ids, wrt="embed").values()
    assert embedding.shape == (2, 3, 1, 5, 2)
    with pytest.raises(ValueError, match="not built yet"):
        autodiff.jacobian(gf.Sequential([layers.Dense(2)]), x)


# ------------------------------------------------------------------- per-example gradients
def batch_gradient(model, loss, x, y, sample_weight):
    with tf.GradientTape() as tape:
        value = loss(y, model(x), sample_weight=sample_weight)
    return tape.gradient(value, model.trainable_variables)


@pytest.mark.parametrize("case", ["mse", "sparse_categorical"])
def test_per_example_gradients_sum_to_the_batch_gradient(bn_model, case):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(6, 2)).astype("float32")
    weights = rng.uniform(0.5, 2.0, size=6).astype("float32")
    if case == "mse":
        y, loss = rng.normal(size=(6, 2)).astype("float32"), keras.losses.MeanSquaredError()
    else:
        y = rng.integers(0, 2, size=6)
        loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    grads = autodiff.per_example_gradients(bn_model, x, y, loss=loss, sample_weight=weights,
                                           method="vectorized")
    expected = batch_gradient(bn_model, loss, x, y, weights)
    for variable, g, want in zip(bn_model.trainable_variables, grads, expected):
        assert g.shape == (6, *variable.shape)
        np.testing.assert_allclose(tf.reduce_sum(g, axis=0), want, atol=1e-5)
    # Example 0 alone: its weighted loss over the batch size (the mean reduction's share).
    alone = batch_gradient(bn_model, loss, x[:1], y[:1], weights[:1])
    for g, want in zip(grads, alone):
        np.testing.assert_allclose(g[0], want / 6, atol=1e-6)
    loop = autodiff.per_example_gradients(bn_model, x, y, loss=loss, sample_weight=weights,
                                          method="loop")
    for g, h in zip(grads, loop):
        np.testing.assert_allclose(g, h, atol=1e-6)


def test_per_example_gradients_use_the_compiled_loss():
    keras.utils.set_random_seed(5)
    model = mlp()
    model.compile(optimizer="sgd", loss=keras.losses.MeanSquaredError(reduction="sum"))
    x, y = np.ones((3, 2), "float32"), np.zeros((3, 2), "float32")
    grads = autodiff.per_example_gradients(model, x, y)
    expected = batch_gradient(model, keras.losses.MeanSquaredError(reduction="sum"), x, y, None)
    for g, want in zip(grads, expected):
        np.testing.assert_allclose(tf.reduce_sum(g, axis=0), want, atol=1e-5)
    # Several outputs, loss weights and sample weights: the compiled LossSet's batch loss.
    graph = two_outputs()
    graph.compile(optimizer="sgd", loss={"a": "mse", "b": "mae"}, loss_weights={"a": 0.3, "b": 2.0})
    inputs, weights = {"x": np.arange(6, dtype="float32").reshape(3, 2)}, np.array([1, 2, 3.0])
    labels = {"a": np.ones((3, 2), "float32"), "b": np.zeros((3, 1), "float32")}
    grads = autodiff.per_example_gradients(graph, inputs, labels, sample_weight=weights)
    with tf.GradientTape() as tape:
        batch_loss, _ = graph.compile_state.loss_set(labels, graph(inputs), weights)
    expected = tape.gradient(batch_loss, graph.trainable_variables)
    for g, want in zip(grads, expected):
        np.testing.assert_allclose(tf.reduce_sum(g, axis=0), want, atol=1e-5)
    uncompiled = mlp()
    with pytest.raises(ValueError, match="no compiled loss: pass loss="):
        autodiff.per_example_gradients(uncompiled, x, y)
    with pytest.raises(ValueError, match="reduction='mean_with_sample_weight'"):
        autodiff.per_example_gradients(
            model, x, y, loss=keras.losses.MeanSquaredError(reduction="mean_with_sample_weight"))
    with pytest.raises(ValueError, match="method must be one of"):
        autodiff.per_example_gradients(model, x, y, method="fast")


class PositivePart(gf.Layer):
    """Sums the positive entries of each row, found with tf.where: a data-dependent shape,
    whose `Where` op pfor cannot vectorize (its while-loop fallback fails too, at run time)."""

    def call(self, x, training=False):
        where = tf.where(x > 0)  # (count, 2) indices of the positive entries
        sums = tf.math.unsorted_segment_sum(tf.gather_nd(x, where), where[:, 0], tf.shape(x)[0])
        return sums[:, None]


def test_auto_falls_back_to_a_loop_when_pfor_cannot_vectorize():
    keras.utils.set_random_seed(6)
    model = gf.Sequential([layers.Dense(3, name="hidden"), PositivePart(name="positive")],
                          input_shape=(2,))
    x = np.random.default_rng(5).normal(size=(4, 2)).astype("float32")
    y = np.ones((4, 1), "float32")
    with pytest.raises(ValueError, match="No pfor vectorization defined for Where"):
        autodiff.per_example_gradients(model, x, y, loss="mse", method="vectorized")
    with pytest.warns(UserWarning, match="could not be vectorized.*tf.map_fn"):
        grads = autodiff.per_example_gradients(model, x, y, loss="mse")
    expected = batch_gradient(model, keras.losses.MeanSquaredError(), x, y, None)
    for g, want in zip(grads, expected):
        np.testing.assert_allclose(tf.reduce_sum(g, axis=0), want, atol=1e-5)
    loop = autodiff.per_example_gradients(model, x, y, loss="mse", method="loop")
    for g, h in zip(grads, loop):
        np.testing.assert_array_equal(g, h)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the loop, asked for, does not warn
        autodiff.per_example_gradients(model, x, y, loss="mse", method="loop")


def test_per_example_gradients_refuse_mismatched_batches():
    model = gf.Sequential([layers.Dense(2)], input_shape=(4,))
    with pytest.raises(ValueError, match=r"received x \(3, 4\), y \(2, 2\)"):
        autodiff.per_example_gradients(model, np.ones((3, 4), "float32"),
                                       np.ones((2, 2), "float32"), loss="mse")
    with pytest.raises(ValueError, match=r"sample_weight \(5,\)"):
        autodiff.per_example_gradients(model, np.ones((3, 4), "float32"),
                                       np.ones((3, 2), "float32"), loss="mse",
                                       sample_weight=np.ones(5))

