"""FLOP counts (graphfit.inspect.flops): Dense and the convolutions against hand counts, the
training step's parts, per-layer attribution, the pitfalls (loops, conds, nested functions,
pruned ops), and that counting leaves the model and its optimizer untouched.

TensorFlow's counts used in the hand counts: MatMul 2*m*n*k; Conv2D 2 * output elements *
kh*kw*c_in; Conv2DBackpropFilter 2 * input elements * kh*kw*c_out / stride^2; an element-wise
op (the bias add, SGD's mul and sub) 1 per output element; Sum (the bias gradient) input
elements minus output elements; Relu 0.
"""

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers
from graphfit.inspect import flops


def _dense_forward(batch, n_in, n_out):
    return 2 * batch * n_in * n_out + batch * n_out  # MatMul + bias add


def _mlp(compile_with=None, activation=None):
    model = gf.Sequential([layers.Dense(3, activation=activation, name="hidden"),
                           layers.Dense(2, name="out")])
    model.build((None, 4))
    if compile_with is not None:
        model.compile(optimizer=compile_with, loss="mse")
    return model


def _variable_values(variables):
    return [v.numpy().copy() for v in variables]


@pytest.fixture(scope="module")
def mlp_sgd_counts():
    """A compiled Dense(4->3, relu) -> Dense(3->2) MLP with plain SGD, counted at batch 5."""
    return flops.count_flops(_mlp(optimizers.SGD(0.1), activation="relu"), batch_size=5)


def test_dense_forward_matches_the_hand_count_at_several_batch_sizes():
    model = gf.Sequential([layers.Dense(3, activation="relu", name="dense")])
    model.build((None, 4))
    for batch in (1, 7):
        counts = model.flops(batch_size=batch)
        assert all(type(counts[k]) is int
                   for k in ("forward", "backward", "update", "training_step"))
        assert counts["forward"] == _dense_forward(batch, 4, 3) == 27 * batch
        assert counts["per_layer"]["dense"]["forward"] == counts["forward"]
        assert counts["batch_size"] == batch
    # TensorFlow has no FLOP statistic for Relu: it counts 0, and the report says so.
    assert counts["uncounted_ops"]["forward"] == {"Relu": 1}


@pytest.mark.parametrize(
    "kernel, strides, padding, out_hw",
    [((3, 3), 1, "valid", (4, 4)), ((3, 2), 2, "same", (3, 3))],
)
def test_conv2d_forward_matches_the_hand_count(kernel, strides, padding, out_hw):
    batch, c_in, c_out = 2, 2, 4
    model = gf.Sequential([layers.Conv2D(c_out, kernel, strides=strides, padding=padding,
                                         name="conv")])
    model.build((None, 6, 6, c_in))
    outputs = batch * out_hw[0] * out_hw[1] * c_out
    conv = 2 * outputs * kernel[0] * kernel[1] * c_in
    counts = flops.count_flops(model, batch_size=batch)
    assert counts["forward"] == conv + outputs  # + the bias add
    assert counts["per_layer"]["conv"]["forward"] == conv + outputs


def test_forward_equals_the_profilers_own_total():
    model = _mlp()
    graph = tf.function(lambda x: model(x)).get_concrete_function(
        tf.TensorSpec((3, 4), tf.float32)).graph
    builder = tf.compat.v1.profiler.ProfileOptionBuilder
    reference = tf.compat.v1.profiler.profile(
        graph, options=builder(builder.float_operation()).with_empty_output().build())
    assert flops.count_flops(model, batch_size=3)["forward"] == reference.total_float_ops


def test_dense_backward_matches_the_hand_count(mlp_sgd_counts):
    b = 5
    out_layer = (2 * b * 3 * 2      # dx = g @ W^T, into the hidden layer
                 + 2 * b * 3 * 2    # dW = x^T @ g
                 + (b * 2 - 2))     # bias gradient: Sum over the batch
    hidden = 2 * b * 4 * 3 + (b * 3 - 3)  # no dx: nothing asks for the input's gradient
    per_layer = mlp_sgd_counts["per_layer"]
    assert per_layer["out"]["backward"] == out_layer == 128
    assert per_layer["hidden"]["backward"] == hidden == 132
    assert per_layer["out"]["forward"] == _dense_forward(b, 3, 2)
    assert per_layer["hidden"]["forward"] == _dense_forward(b, 4, 3)
    # The rest of the backward pass is the loss's gradient, outside every layer.
    assert mlp_sgd_counts["backward"] == out_layer + hidden + (
        mlp_sgd_counts["outside_layers"]["backward"])
    assert mlp_sgd_counts["outside_layers"]["backward"] > 0


def test_training_step_is_the_sum_of_its_parts(mlp_sgd_counts):
    c = mlp_sgd_counts
    assert c["training_step"] == c["forward_train"] + c["loss"] + c["backward"] + c["update"]
    assert c["forward_train"] == c["forward"]  # no dropout or batch norm here
    # mean squared error of (5, 2): Sub 10 + Square 10 + Mean over the last axis 10 + Sum 4
    assert c["loss"] == 34
    assert "profiler" in c["method"] and "batch_size=5" in c["method"]


def test_plain_sgd_update_is_one_mul_and_one_sub_per_parameter(mlp_sgd_counts):
    parameters = (4 * 3 + 3) + (3 * 2 + 2)
    assert mlp_sgd_counts["update"] == 2 * parameters
    assert mlp_sgd_counts["update_hooks"] == 0


def test_adam_and_momentum_updates():
    parameters, n_variables = 4 * 3 + 3, 2
    model = gf.Sequential([layers.Dense(3)])
    model.build((None, 4))
    model.compile(optimizer=optimizers.SGD(0.1, momentum=0.9), loss="mse")
    # m <- m * momentum - g * lr (3), w <- w + m (1)
    assert flops.count_flops(model)["update"] == 4 * parameters
    model.compile(optimizer="adam", loss="mse")
    # Per element: m (3), v (Square + 3), w - m * alpha / (sqrt(v) + eps) (4; Sqrt counts 0).
    # Per variable: two Pow, 1 - beta_2^t, lr * sqrt(.), 1 - beta_1^t, the division (6).
    # Once: the step number, iterations + 1.
    assert flops.count_flops(model)["update"] == 11 * parameters + 6 * n_variables + 1


def test_per_layer_counts_add_up_with_batch_norm_and_dropout():
    model = gf.Sequential([layers.Dense(8, activation="relu", name="d1"),
                           layers.BatchNormalization(name="bn"),
                           layers.Dropout(0.1, name="drop"),
                           layers.Dense(3, name="logits")])
    model.build((None, 5))
    model.compile(optimizer=optimizers.SGD(0.05, momentum=0.9, nesterov=True),
                  loss="sparse_categorical_crossentropy")
    c = flops.count_flops(model, batch_size=4)
    for key in ("forward", "forward_train", "backward"):
        total = sum(entry[key] for entry in c["per_layer"].values())
        assert total + c["outside_layers"][key] == c[key], key
    assert list(c["per_layer"]) == ["d1", "bn", "drop", "logits"]
    # Training mode computes the batch statistics and the dropout mask; inference does not.
    assert c["per_layer"]["drop"]["forward"] == 0 < c["per_layer"]["drop"]["forward_train"]
    assert c["per_layer"]["bn"]["forward"] < c["per_layer"]["bn"]["forward_train"]
    # Two moving averages of 8 values: var * momentum + value * (1 - momentum) = 3 per value.
    assert c["update_hooks"] == 2 * 8 * 3
    assert c["training_step"] == c["forward_train"] + c["loss"] + c["backward"] + c["update"]


def test_counting_leaves_model_and_optimizer_unchanged():
    model = _mlp(compile_with="adam")
    optimizer = model.optimizer
    before = _variable_values(model.variables)
    flops.count_flops(model, batch_size=3)
    assert all(np.array_equal(a, b) for a, b in zip(before, _variable_values(model.variables)))
    assert model.compile_state.steps is None  # nothing compiled or traced for training
    assert len(optimizer.variables) == 2  # iterations and learning rate: no slots created
    assert not model.compile_state.loss_set.built
    model.fit(np.ones((6, 4), np.float32), np.zeros((6, 2), np.float32), batch_size=3,
              verbose=0)
    weights, slots = _variable_values(model.variables), _variable_values(optimizer.variables)
    tracing = model.compile_state.steps.tracing_counts()
    counts = model.flops(batch_size=3)
    assert all(np.array_equal(a, b) for a, b in zip(weights, _variable_values(model.variables)))
    assert all(np.array_equal(a, b) for a, b in zip(slots, _variable_values(optimizer.variables)))
    assert model.compile_state.steps.tracing_counts() == tracing
    assert not any(np.array_equal(a, b) for a, b in zip(before, weights))  # fit did train
    assert counts["update"] > 0


def test_uncompiled_model_differentiates_the_sum_of_its_outputs():
    c = flops.count_flops(_mlp(), batch_size=2)
    assert c["update"] == 0
    assert c["per_layer"]["hidden"]["backward"] == 2 * 2 * 4 * 3 + (2 * 3 - 3)
    assert c["loss"] == 2 * 2 - 1  # the Sum of the (2, 2) outputs
    assert any("not compiled" in note for note in c["notes"])
    assert "not compiled" in c["method"]


@pytest.mark.parametrize("padding, out_hw", [("same", 6), ("valid", 4)])
def test_conv2d_backward_counts_only_what_runs(padding, out_hw):
    batch, c_in, c_out = 2, 2, 4
    model = gf.Sequential([layers.Conv2D(c_out, 3, padding=padding, name="conv"),
                           layers.Flatten(name="flat"), layers.Dense(2, name="out")])
    model.build((None, 6, 6, c_in))
    model.compile(optimizer="sgd", loss="mse")
    c = flops.count_flops(model, batch_size=batch)
    outputs = batch * out_hw * out_hw * c_out
    # Conv2DBackpropFilter: TensorFlow counts 2 * INPUT elements * kh*kw*c_out, which is the
    # forward count for "same" padding and stride 1, and more than it for "valid". Then the
    # bias gradient's Sum. Conv2D's gradient function also builds Conv2DBackpropInput, which
    # nothing uses for a first layer: pruned, not counted.
    filter_gradient = 2 * (batch * 6 * 6 * c_in) * 3 * 3 * c_out
    assert c["per_layer"]["conv"]["backward"] == filter_gradient + (outputs - c_out)
    assert c["per_layer"]["conv"]["forward"] == 2 * outputs * 3 * 3 * c_in + outputs
    assert any("left out" in note for note in c["notes"])


class _Looping(gf.Layer):
    """h <- h @ w three times in a while loop, then a cond, then a nested tf.function."""

    def build(self, input_shape):
        self.w = self.add_weight("w", (input_shape[-1], input_shape[-1]))

    def call(self, x, training=False):
        def body(i, h):
            return i + 1, tf.matmul(h, self.w)

        _, h = tf.while_loop(lambda i, h: i < 3, body, (tf.constant(0), x))
        h = tf.cond(tf.reduce_sum(h) > 0, lambda: h * 2.0, lambda: h + 1.0)
        return tf.function(lambda v: tf.matmul(v, self.w))(h)  # traced at this static shape


def test_loops_conds_and_nested_functions():
    model = gf.Sequential([_Looping(name="looping")])
    model.build((None, 3))
    c = flops.count_flops(model, batch_size=2)
    matmul = 2 * 2 * 3 * 3
    body = matmul + 1 + 1  # the loop body (MatMul, i + 1, the loop counter), ONCE
    condition = 1          # i < 3, once
    cond = 6 - 1 + 1 + 6 + 6  # Sum, Greater, and BOTH branches (Mul, AddV2)
    assert c["forward"] == body + condition + cond + matmul
    notes = " ".join(c["notes"])
    assert "while loop" in notes and "every branch" in notes
    # The profiler alone sees the while loop, the cond and the call as ops without FLOPs.
    graph = tf.function(lambda x: model(x)).get_concrete_function(
        tf.TensorSpec((2, 3), tf.float32)).graph
    builder = tf.compat.v1.profiler.ProfileOptionBuilder
    alone = tf.compat.v1.profiler.profile(
        graph, options=builder(builder.float_operation()).with_empty_output().build())
    assert alone.total_float_ops == 6 - 1 + 1  # only the Sum and the Greater


def test_a_shared_layer_gets_the_flops_of_both_calls():
    shared = layers.Dense(3, name="shared")

    class Twice(gf.Model):
        def __init__(self):
            super().__init__(name="twice")
            self.shared = shared
            self.other = layers.Dense(2, name="shared_1")  # named like the second call's scope

        def call(self, x, training=False):
            return self.other(self.shared(self.shared(x)))

    model = Twice()
    model.build((None, 3))
    c = flops.count_flops(model, batch_size=2)
    assert c["per_layer"]["shared"]["forward"] == 2 * _dense_forward(2, 3, 3)
    assert c["per_layer"]["shared_1"]["forward"] == _dense_forward(2, 3, 2)
    assert c["per_layer"]["shared"]["backward"] == (2 * (2 * 2 * 3 * 3 + (2 * 3 - 3))
                                                    + 2 * 2 * 3 * 3)  # dW twice, dx once


def test_several_outputs_with_their_own_losses():
    model = gf.GraphModel(
        inputs={"pixels": (6,)},
        nodes=[gf.Node(layers.Dense(4, name="trunk"), "pixels"),
               gf.Node(layers.Dense(3, name="digit"), "trunk"),
               gf.Node(layers.Dense(1, name="is_even"), "trunk")],
        outputs=["digit", "is_even"],
    )
    model.build({"pixels": (None, 6)})
    model.compile(optimizer="sgd",
                  loss={"digit": "sparse_categorical_crossentropy", "is_even": "mse"})
    c = flops.count_flops(model, batch_size=2)
    assert c["forward"] == sum(_dense_forward(2, *s) for s in ((6, 4), (4, 3), (4, 1)))
    assert c["update"] == 2 * model.count_params()
    assert c["loss"] > 0


def test_errors_are_clear():
    with pytest.raises(ValueError, match="not built"):
        gf.Sequential([layers.Dense(2)]).flops()
    model = _mlp()
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match=r"batch_size must be a positive integer\. "
                                             r"Received: batch_size="):
            model.flops(batch_size=bad)
    with pytest.raises(TypeError, match="graphfit Model"):
        flops.count_flops(layers.Dense(2))
    ragged = gf.Sequential([layers.Dense(2)])
    ragged.build((None, None, 3))
    with pytest.raises(ValueError, match="static shapes"):
        ragged.flops()


def test_counting_at_an_example_batch_equals_counting_at_its_rows():
    """`inputs=` counts at an example's shapes, its labels one per output row: for a plain
    model that is `batch_size` = its rows; shapes must be known."""
    import graphfit as gf
    from graphfit import inspect as gf_inspect
    from graphfit import layers

    model = gf.Sequential([layers.Dense(8, activation="relu"), layers.Dense(3)])
    model.compile(loss="sparse_categorical_crossentropy", optimizer="sgd")
    model.build((None, 4))
    example = np.zeros((5, 4), "float32")
    counts = model.flops(inputs=example)
    assert counts["training_step"] == model.flops(batch_size=5)["training_step"]
    assert counts["batch_size"] == 5 and "at the shapes [5, 4]" in counts["method"]
    with pytest.raises(ValueError, match=r"must have known shapes, but one has shape "
                                         r"\(None, 4\)"):
        model.flops(inputs=tf.TensorSpec([None, 4]))
    # The step report's default labels are class ids for a sparse categorical loss (a
    # fresh model each: a step traced again for other shapes relaxes them to None).
    report = gf_inspect.step_graph(model, "train", x=example, keep_shapes=True)
    assert report.signature == "x: float32[5, 4], y: int64[5], sample_weight: None"
    assert report.flops["training_step"] == counts["training_step"]
    other = gf.Sequential([layers.Dense(3)])
    other.compile(loss="sparse_categorical_crossentropy", optimizer="sgd")
    other.build((None, 4))
    report = gf_inspect.step_graph(other, "train", 9, flops=False)
    assert report.signature == "x: float32[9, 4], y: int64[9], sample_weight: None"


# Hand counts of the other convolution layers' forward pass at batch 2, with TensorFlow's
# formulas: a convolution 2 * output elements * window * input channels per group (grouped:
# channels / groups; Conv1D runs as a Conv2D of height 1); a transposed convolution (the
# input gradient of a convolution: Conv2DBackpropInput, Conv3DBackpropInputV2) 2 * output
# elements * window * input channels / stride product, which for 'same' padding with a window
# a multiple of the stride is the exact count of its scatter, 2 * input elements * window *
# filters; a depthwise convolution 2 * output elements * window; a separable one the
# depthwise part plus a 1x1 convolution; then the bias add, one per output element.
CONVOLUTION_FORWARD = [
    # Conv1D groups=2: out (6, 4); 2 * (2*6*4) * 3 * (4/2) + bias 48
    (lambda: layers.Conv1D(4, 3, groups=2), (8, 4), 2 * 48 * 3 * 2 + 48),
    # Conv1D causal: the padded input keeps 5 steps; 2 * (2*5*2) * 3 * 3 + 20
    (lambda: layers.Conv1D(2, 3, padding="causal"), (5, 3), 2 * 20 * 3 * 3 + 20),
    # Conv3D: out (3, 3, 3, 2) = 108 per 2 examples; 2 * 108 * 8 * 2 + 108
    (lambda: layers.Conv3D(2, 2), (4, 4, 4, 2), 2 * 108 * 8 * 2 + 108),
    # Conv1DTranspose same, stride 2, window 4: 2 * input (2*5*3) * 4 * 2 filters + out 40
    (lambda: layers.Conv1DTranspose(2, 4, strides=2, padding="same"), (5, 3),
     2 * 30 * 4 * 2 + 40),
    # Conv2DTranspose same, stride 2, window 4x4: 2 * input (2*3*3*3) * 16 * 2 + out 144
    (lambda: layers.Conv2DTranspose(2, 4, strides=2, padding="same"), (3, 3, 3),
     2 * 54 * 16 * 2 + 144),
    # Conv3DTranspose valid, stride 2 = window 2: 2 * input (2*27*2) * 8 * 2 + out 864
    (lambda: layers.Conv3DTranspose(2, 2, strides=2), (3, 3, 3, 2), 2 * 108 * 8 * 2 + 864),
    # DepthwiseConv1D: out (6, 3) = 36; 2 * 36 * 3 + 36
    (lambda: layers.DepthwiseConv1D(3), (8, 3), 2 * 36 * 3 + 36),
    # DepthwiseConv2D x2: out (4, 4, 6) = 192; 2 * 192 * 9 + 192
    (lambda: layers.DepthwiseConv2D(3, depth_multiplier=2), (6, 6, 3), 2 * 192 * 9 + 192),
    # SeparableConv1D: depthwise 2 * 36 * 3, pointwise 2 * (2*6*4) * 3, bias 48
    (lambda: layers.SeparableConv1D(4, 3), (8, 3), 2 * 36 * 3 + 2 * 48 * 3 + 48),
    # SeparableConv2D x2: depthwise 2 * 192 * 9, pointwise 2 * (2*4*4*4) * 6, bias 128
    (lambda: layers.SeparableConv2D(4, 3, depth_multiplier=2), (6, 6, 3),
     2 * 192 * 9 + 2 * 128 * 6 + 128),
]


@pytest.mark.parametrize("make, input_shape, expected", CONVOLUTION_FORWARD,
                         ids=["conv1d_groups", "conv1d_causal", "conv3d", "conv1d_transpose",
                              "conv2d_transpose", "conv3d_transpose", "depthwise1d",
                              "depthwise2d", "separable1d", "separable2d"])
def test_other_convolutions_forward_matches_the_hand_count(make, input_shape, expected):
    model = gf.Sequential([make()], input_shape=input_shape)
    counts = flops.count_flops(model, batch_size=2)
    assert counts["forward"] == expected
    assert counts["uncounted_ops"]["forward"] == {}


def test_3d_and_depthwise_convolution_gradients_are_counted():
    """TensorFlow has no FLOP statistic for these gradient ops; graphfit counts them with
    TensorFlow's formula for the 2-D ones: 2 * image elements * window * output channels /
    stride product (the image: the layer's input, or its gradient)."""
    model = gf.Sequential([layers.Dense(3, name="pre"), layers.DepthwiseConv2D(3, name="dw"),
                           layers.Flatten(), layers.Dense(1)], input_shape=(6, 6, 3))
    model.compile(optimizer="sgd", loss="mse")
    counts = flops.count_flops(model, batch_size=2)
    # input gradient 2 * (2*6*6*3) * 9 * 1, kernel gradient the same, bias Sum 96 - 3
    assert counts["per_layer"]["dw"]["backward"] == 2 * 216 * 9 * 2 + 93
    volume = gf.Sequential([layers.Dense(2, name="pre"), layers.Conv3D(2, 2, name="c3"),
                            layers.Conv3DTranspose(2, 2, strides=2, name="up")],
                           input_shape=(4, 4, 4, 2))
    volume.compile(optimizer="sgd", loss="mse")
    counts = flops.count_flops(volume, batch_size=2)
    # Conv3D: input and kernel gradients 2 * (2*4*4*4*2) * 8 * 2 each, bias Sum 108 - 2
    assert counts["per_layer"]["c3"]["backward"] == 2 * (2 * 256 * 8 * 2) + 106
    # Conv3DTranspose: its input gradient is a Conv3D of the (2, 6, 6, 6, 2) output gradient,
    # 2 * 108 * 8 * 2; its kernel gradient 2 * 864 * 8 * 2 / 8; bias Sum 864 - 2
    assert counts["per_layer"]["up"]["backward"] == 2 * 108 * 8 * 2 + 2 * 864 * 2 + 862
    assert "Conv3DBackpropInputV2" not in counts["uncounted_ops"]["training_step"]
    assert "DepthwiseConv2dNativeBackpropFilter" not in counts["uncounted_ops"]["training_step"]
# ---------------------------------------------------------------- pooling, shape, noise, RNN
# Hand counts at batch B = 2 (TensorFlow's rules, and graphfit's for Max, Einsum and
# ResizeBilinear: graphfit.inspect.op_statistics). Pooling: window area per output element;
# 3-D pooling runs as 2-D over (height, width) then over depth, each pass counted.
B = 2


def _lstm_step(b, n_in, u):  # x@W, h@U, their sum, the bias, c = f*c + i*g, h = o*tanh(c)
    return 2 * b * n_in * 4 * u + 2 * b * u * 4 * u + 2 * b * 4 * u + 4 * b * u


def _gru_step(b, n_in, u):  # x@W + b0, h@U + b1 (reset_after), z, r, r*h_inner, the update
    return 2 * b * n_in * 3 * u + 2 * b * u * 3 * u + 2 * b * 3 * u + 2 * b * u + 2 * b * u \
        + 4 * b * u


_ATTENTION_SCORES = 2 * B * 4 * 2 * 3 * 4  # einsum over batch, query 4, heads 2, key_dim 3, key 4
_SHAPE_LAYER_FLOPS = [
    # (layer, example shape, forward, forward_train, uncounted in the training step)
    (lambda: layers.MaxPooling1D(2), (6, 3), B * 3 * 3 * 2, None, {}),
    (lambda: layers.AveragePooling1D(3, strides=1, padding="same"), (6, 3),
     B * 6 * 3 * 3, None, {}),
    (lambda: layers.MaxPooling3D(2), (4, 4, 4, 2),
     (B * 4) * 2 * 2 * 2 * 4 + B * 2 * 4 * 2 * 2, None, {}),
    (lambda: layers.AveragePooling3D((2, 1, 2)), (4, 4, 4, 2),
     (B * 4) * 4 * 2 * 2 * 2 + B * 2 * 8 * 2 * 2, None, {}),
    (lambda: layers.GlobalMaxPooling2D(), (4, 5, 3), B * 4 * 5 * 3 - B * 3, None, {}),  # Max
    (lambda: layers.GlobalAveragePooling1D(), (6, 3), B * 6 * 3, None, {}),  # Mean: in size
    (lambda: layers.ZeroPadding3D(), (2, 2, 2, 1), 0, None, {}),  # Pad: no arithmetic
    (lambda: layers.Cropping2D(1), (4, 4, 2), 0, None, {}),
    (lambda: layers.UpSampling1D(3), (4, 2), 1, None, {}),  # tf.repeat's shape product
    (lambda: layers.UpSampling2D(interpolation="bilinear"), (4, 4, 2),
     9 * B * 8 * 8 * 2 + 2, None, {}),  # + the two new sizes
    (lambda: layers.Rescaling(2.0, 1.0), (5,), 2 * B * 5, None, {}),
    # Training: the draw (uniform: scale and shift per mask entry), the keep test, 1 - rate,
    # and the scaled product per input element.
    (lambda: layers.SpatialDropout2D(0.5), (4, 4, 2), 0, B * 4 * 4 * 2 + 3 * B * 2 + 1,
     {"StatelessRandomUniformV2": 1}),
    (lambda: layers.GaussianNoise(0.1), (5,), 0, 3 * B * 5, {"StatelessRandomNormalV2": 1}),
    (lambda: layers.GaussianDropout(0.1), (5,), 0, 3 * B * 5, {"StatelessRandomNormalV2": 1}),
    (lambda: layers.LSTM(3), (4, 2), 4 * _lstm_step(B, 2, 3), None,
     {"Sigmoid": 12, "Tanh": 8}),
    (lambda: layers.GRU(3), (4, 2), 4 * _gru_step(B, 2, 3), None, {"Sigmoid": 8, "Tanh": 4}),
    # Projections q, k, v (5 -> 2x3) and output (2x3 -> 5) with biases, scores and weighting
    # (Einsum), the scores scaled by 1/sqrt(key_dim) and their softmax (1 + 5 per score).
    (lambda: layers.MultiHeadAttention(2, 3), (4, 5),
     3 * (2 * B * 4 * 5 * 6 + B * 4 * 6) + 2 * B * 4 * 6 * 5 + B * 4 * 5
     + 2 * _ATTENTION_SCORES + B * 2 * 4 * 4 * (1 + 5), None, {}),
]


@pytest.mark.parametrize("make, shape, forward, forward_train, uncounted", _SHAPE_LAYER_FLOPS)
def test_pooling_shape_noise_and_recurrent_layers_match_the_hand_count(
        make, shape, forward, forward_train, uncounted):
    layer = make()
    model = gf.Sequential([layer])
    model.build((None, *shape))
    counts = flops.count_flops(model, batch_size=B)
    assert counts["forward"] == forward, type(layer).__name__
    assert counts["forward_train"] == (forward if forward_train is None else forward_train)
    assert counts["per_layer"][layer.name]["forward"] == forward
    met = counts["uncounted_ops"]["forward" if forward_train is None else "training_step"]
    for op_type, number in uncounted.items():
        assert met.get(op_type) == number, (type(layer).__name__, met)
    for own in ("Max", "Einsum", "ResizeBilinear"):  # graphfit's rules count these
        assert own not in counts["uncounted_ops"]["training_step"]
