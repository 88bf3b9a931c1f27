"""Conv1D/2D/3D (groups too), Conv1D/2D/3DTranspose, DepthwiseConv1D/2D, SeparableConv1D/2D
against Keras 3.15 on the same weights: forward values and gradients over strides, padding
(valid / same / causal), dilation, groups, output_padding, depth_multiplier and
channels_first; output shapes ported from keras/src/layers/convolutional/*_test.py; hand
goldens; per-example gradients and Jacobians through a model; the errors for bad arguments.

The plain contract of every layer (config round trip, XLA, mixed precision, ...) runs in
tests/test_conformance.py from framework/testing/examples.py.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import autodiff, layers
from graphfit.testing import assert_gradients_match_keras, copy_weights_to_keras

RANDOM_BIAS = {"bias_initializer": "random_normal"}


def _inputs(shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def _pair(name, kwargs):
    ours = getattr(layers, name)(**kwargs, **RANDOM_BIAS)
    return ours, getattr(keras.layers, name)(**kwargs)


# (layer, arguments, input shape, output shape)
CASES = [
    ("Conv1D", dict(filters=3, kernel_size=3, strides=2, padding="same"), (2, 9, 4), (2, 5, 3)),
    ("Conv1D", dict(filters=3, kernel_size=3, dilation_rate=2), (2, 9, 4), (2, 5, 3)),
    ("Conv1D", dict(filters=2, kernel_size=3, padding="causal"), (2, 6, 3), (2, 6, 2)),
    ("Conv1D", dict(filters=6, kernel_size=2, padding="causal", dilation_rate=3, groups=3),
     (2, 8, 6), (2, 8, 6)),
    ("Conv1D", dict(filters=4, kernel_size=3, data_format="channels_first", activation="relu"),
     (2, 3, 7), (2, 4, 5)),
    ("Conv2D", dict(filters=6, kernel_size=(2, 3), strides=2, padding="same", groups=2),
     (2, 7, 6, 4), (2, 4, 3, 6)),
    ("Conv2D", dict(filters=2, kernel_size=3, dilation_rate=(2, 1)), (2, 7, 6, 3),
     (2, 3, 4, 2)),
    ("Conv2D", dict(filters=4, kernel_size=3, data_format="channels_first",
                    activation="softmax"), (2, 3, 6, 5), (2, 4, 4, 3)),
    ("Conv3D", dict(filters=2, kernel_size=3, strides=2, padding="same"), (2, 5, 4, 4, 2),
     (2, 3, 2, 2, 2)),
    ("Conv3D", dict(filters=4, kernel_size=2, groups=2), (2, 3, 3, 3, 4), (2, 2, 2, 2, 4)),
    ("Conv3D", dict(filters=2, kernel_size=2, data_format="channels_first"), (2, 3, 4, 3, 3),
     (2, 2, 3, 2, 2)),
    ("Conv1DTranspose", dict(filters=3, kernel_size=3, strides=3, padding="same",
                             output_padding=1), (2, 5, 4), (2, 14, 3)),
    ("Conv1DTranspose", dict(filters=2, kernel_size=3, dilation_rate=2), (2, 5, 4), (2, 9, 2)),
    ("Conv2DTranspose", dict(filters=3, kernel_size=3, strides=(2, 3), output_padding=(1, 0)),
     (2, 4, 3, 2), (2, 10, 9, 3)),
    ("Conv2DTranspose", dict(filters=2, kernel_size=2, strides=3), (2, 3, 3, 2), (2, 9, 9, 2)),
    ("Conv2DTranspose", dict(filters=2, kernel_size=4, strides=2, padding="same",
                             data_format="channels_first"), (2, 3, 4, 5), (2, 2, 8, 10)),
    ("Conv3DTranspose", dict(filters=2, kernel_size=3, strides=2, padding="same"),
     (2, 2, 3, 2, 3), (2, 4, 6, 4, 2)),
    ("DepthwiseConv1D", dict(kernel_size=3, strides=2, depth_multiplier=3), (2, 9, 2),
     (2, 4, 6)),
    ("DepthwiseConv1D", dict(kernel_size=3, dilation_rate=2, padding="same"), (2, 9, 3),
     (2, 9, 3)),
    ("DepthwiseConv2D", dict(kernel_size=3, strides=2, padding="same", depth_multiplier=2),
     (2, 7, 6, 3), (2, 4, 3, 6)),
    ("DepthwiseConv2D", dict(kernel_size=(3, 2), dilation_rate=2, data_format="channels_first"),
     (2, 3, 7, 6), (2, 3, 3, 4)),
    ("SeparableConv1D", dict(filters=4, kernel_size=3, strides=2, padding="same",
                             depth_multiplier=2), (2, 9, 3), (2, 5, 4)),
    ("SeparableConv2D", dict(filters=4, kernel_size=3, dilation_rate=2, padding="same"),
     (2, 7, 6, 3), (2, 7, 6, 4)),
    ("SeparableConv2D", dict(filters=5, kernel_size=2, strides=2, depth_multiplier=2,
                             data_format="channels_first"), (2, 3, 6, 5), (2, 5, 3, 2)),
]


def _case_id(case):
    name, kwargs, _, _ = case
    return name + "-" + "-".join(f"{k}={v}" for k, v in kwargs.items()
                                 if k not in ("filters", "kernel_size"))


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_forward_matches_keras_on_the_same_weights(case):
    name, kwargs, input_shape, output_shape = case
    x = _inputs(input_shape)
    ours, twin = _pair(name, kwargs)
    outputs = ours(x).numpy()
    copy_weights_to_keras(ours, twin, x)
    assert outputs.shape == output_shape
    assert tuple(twin.compute_output_shape(input_shape)) == output_shape
    if kwargs.get("data_format") == "channels_first" and kwargs.get("activation") != "softmax":
        np.testing.assert_allclose(outputs, _channels_last_twin(name, kwargs, ours, x),
                                   rtol=1e-5, atol=1e-5)
    if name != "Conv3D" or kwargs.get("data_format") != "channels_first":  # see below
        np.testing.assert_allclose(outputs, keras.ops.convert_to_numpy(twin(x)), rtol=1e-5,
                                   atol=1e-5)
    assert [tuple(v.shape) for v in ours.variables] == [tuple(w.shape) for w in twin.weights]
    assert [v.name.split("/")[-1].split(":")[0] for v in ours.variables] == [
        w.name for w in twin.weights]


def _channels_last_twin(name, kwargs, ours, x):
    """Keras's channels-last layer on the same weights, fed the inputs moved to
    channels-last, its outputs moved back."""
    twin = getattr(keras.layers, name)(**{**kwargs, "data_format": "channels_last"})
    moved = np.moveaxis(x, 1, -1)
    copy_weights_to_keras(ours, twin, moved)
    return np.moveaxis(keras.ops.convert_to_numpy(twin(moved)), -1, 1)


def test_conv3d_channels_first_matches_numpy_where_keras_on_tensorflow_cpu_differs():
    """Keras 3.15.1's Conv3D(data_format='channels_first') on TensorFlow's CPU (its XLA path
    for NCDHW) gives other numbers than a plain NumPy convolution here, where the last output
    axis is as long as `filters` (with zero bias they agree); graphfit's match NumPy."""
    x = _inputs((2, 3, 4, 3, 3))
    layer = layers.Conv3D(2, 2, data_format="channels_first", **RANDOM_BIAS)
    outputs = layer(x).numpy()
    kernel, bias = (v.numpy() for v in layer.variables)
    expected = np.zeros((2, 2, 3, 2, 2), "float32")
    for d, h, w in np.ndindex(3, 2, 2):
        patch = x[:, :, d:d + 2, h:h + 2, w:w + 2]
        expected[:, :, d, h, w] = np.einsum("bcijk,ijkcf->bf", patch, kernel) + bias
    np.testing.assert_allclose(outputs, expected, rtol=1e-5, atol=1e-5)


def test_grouped_conv3d_is_a_conv3d_with_a_block_diagonal_kernel():
    """TensorFlow's CPU Conv3D has no grouped kernel, so graphfit convolves each group on its
    own: the same numbers and gradients as the plain convolution whose kernel holds the
    groups' kernels on its diagonal blocks (and zeros elsewhere)."""
    x = tf.constant(_inputs((2, 3, 4, 3, 4)))
    grouped = layers.Conv3D(4, 2, groups=2, use_bias=False)
    grouped(x)
    full = layers.Conv3D(4, 2, use_bias=False)
    full(x)
    blocks = grouped.kernel.numpy()
    kernel = np.zeros(full.kernel.shape, "float32")
    kernel[..., :2, :2], kernel[..., 2:, 2:] = blocks[..., :2], blocks[..., 2:]
    full.kernel.assign(kernel)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        ours, reference = grouped(x), full(x)
        ours_sum, reference_sum = tf.reduce_sum(ours ** 2), tf.reduce_sum(reference ** 2)
    np.testing.assert_allclose(ours.numpy(), reference.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(tape.gradient(ours_sum, x).numpy(),
                               tape.gradient(reference_sum, x).numpy(), rtol=1e-4, atol=1e-4)
    full_gradient = tape.gradient(reference_sum, full.kernel).numpy()
    np.testing.assert_allclose(
        tape.gradient(ours_sum, grouped.kernel).numpy(),
        np.concatenate([full_gradient[..., :2, :2], full_gradient[..., 2:, 2:]], -1),
        rtol=1e-4, atol=1e-4)


GRADIENT_CASES = [CASES[i] for i in (3, 5, 8, 9, 11, 13, 15, 16, 17, 20, 22)]


@pytest.mark.parametrize("case", GRADIENT_CASES, ids=[_case_id(c) for c in GRADIENT_CASES])
def test_gradients_match_keras(case):
    name, kwargs, input_shape, _ = case
    ours, twin = _pair(name, kwargs)
    assert_gradients_match_keras(ours, twin, _inputs(input_shape), rtol=1e-4, atol=1e-4)


# Ported from keras/src/layers/convolutional/{conv,conv_transpose}_test.py (`*_basic`):
# (layer, arguments, input shape, output shape).
KERAS_SHAPES = [
    ("Conv1D", dict(filters=6, kernel_size=2, padding="same", dilation_rate=(2,), groups=2),
     (3, 4, 4), (3, 4, 6)),
    ("Conv1D", dict(filters=6, kernel_size=2, padding="causal", dilation_rate=(2,), groups=2),
     (3, 4, 4), (3, 4, 6)),
    ("Conv1D", dict(filters=6, kernel_size=2, strides=(2,), groups=2), (3, 5, 4), (3, 2, 6)),
    ("Conv2D", dict(filters=6, kernel_size=(2, 2), strides=(2, 1), groups=2), (3, 5, 5, 4),
     (3, 2, 4, 6)),
    ("Conv3D", dict(filters=6, kernel_size=2, padding="same", dilation_rate=(2, 2, 2),
                    groups=2), (3, 4, 4, 4, 4), (3, 4, 4, 4, 6)),
    ("Conv1DTranspose", dict(filters=6, kernel_size=2, strides=3, padding="same",
                             output_padding=2), (2, 8, 4), (2, 23, 6)),
    ("Conv2DTranspose", dict(filters=6, kernel_size=(2, 3), strides=(2, 1),
                             data_format="channels_first"), (2, 4, 8, 8), (2, 6, 16, 10)),
    ("Conv2DTranspose", dict(filters=2, kernel_size=(7, 7), strides=(16, 16)), (1, 14, 14, 2),
     (1, 224, 224, 2)),
    ("Conv3DTranspose", dict(filters=6, kernel_size=(2, 2, 3), strides=(2, 1, 2)),
     (2, 8, 8, 8, 4), (2, 16, 9, 17, 6)),
    # ... and from depthwise_conv_test.py and separable_conv_test.py
    ("DepthwiseConv1D", dict(depth_multiplier=5, kernel_size=2), (3, 5, 4), (3, 4, 20)),
    ("DepthwiseConv1D", dict(depth_multiplier=6, kernel_size=2, strides=(2,)), (3, 5, 4),
     (3, 2, 24)),
    ("DepthwiseConv1D", dict(depth_multiplier=6, kernel_size=2, padding="same",
                             data_format="channels_first", dilation_rate=(2,)), (3, 4, 10),
     (3, 24, 10)),
    ("SeparableConv1D", dict(depth_multiplier=6, filters=6, kernel_size=2, padding="same",
                             dilation_rate=(2,)), (3, 4, 4), (3, 4, 6)),
    ("SeparableConv1D", dict(depth_multiplier=6, filters=6, kernel_size=2, strides=(2,)),
     (3, 5, 4), (3, 2, 6)),
]


@pytest.mark.parametrize("name, kwargs, input_shape, output_shape", KERAS_SHAPES)
def test_output_shapes_ported_from_keras(name, kwargs, input_shape, output_shape):
    layer = getattr(layers, name)(**kwargs)
    assert tuple(layer(tf.zeros(input_shape)).shape) == output_shape


def test_hand_goldens_causal_conv1d_and_conv1d_transpose():
    steps = np.arange(5, dtype="float32").reshape(1, 5, 1)
    causal = layers.Conv1D(1, 3, padding="causal", kernel_initializer="ones", use_bias=False)
    # output t = x[t-2] + x[t-1] + x[t], zeros before the start
    np.testing.assert_array_equal(causal(steps).numpy().ravel(), [0, 1, 3, 6, 9])
    up = layers.Conv1DTranspose(1, 3, strides=2, kernel_initializer="ones", use_bias=False)
    # x[i] scattered onto outputs 2i .. 2i+2: length (3 - 1) * 2 + 3 = 7
    x = np.array([1, 2, 3], "float32").reshape(1, 3, 1)
    np.testing.assert_array_equal(up(x).numpy().ravel(), [1, 1, 3, 2, 5, 3, 3])
    # groups=2: the first output sees only the first input channel, the second the second
    grouped = layers.Conv1D(2, 1, groups=2, kernel_initializer="ones", use_bias=False)
    pair = np.array([[[1.0, 10.0]]], "float32")
    np.testing.assert_array_equal(grouped(pair).numpy().ravel(), [1, 10])


@pytest.fixture(scope="module")
def sequence_model():
    model = gf.Sequential([
        layers.Conv1D(4, 3, padding="causal", name="causal"),
        layers.SeparableConv1D(3, 2, name="separable"),
        layers.Conv1DTranspose(2, 2, strides=2, name="up"),
        layers.DepthwiseConv1D(2, name="depthwise"),
        layers.Flatten(), layers.Dense(1, name="head"),
    ], input_shape=(6, 2))
    return model, _inputs((3, 6, 2), seed=4), _inputs((3, 1), seed=5)


def test_per_example_gradients_sum_to_the_batch_gradient(sequence_model):
    model, x, y = sequence_model
    # TensorFlow's vectorizer has no rule for the depthwise ops: one example at a time
    with pytest.warns(UserWarning, match="could not be vectorized"):
        per_example = autodiff.per_example_gradients(model, x, y, loss="mse")
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x) - y))
    batch = tape.gradient(loss, model.trainable_variables)
    assert len(per_example) == len(batch) == 11
    for each, total in zip(per_example, batch):
        np.testing.assert_allclose(tf.reduce_sum(each, 0).numpy(), total.numpy(), rtol=1e-4,
                                   atol=1e-5)


def test_jacobian_wrt_inputs_matches_one_example_at_a_time(sequence_model):
    model, x, _ = sequence_model
    jacobian = autodiff.jacobian(model, x, of="up", wrt="inputs")
    assert tuple(jacobian.shape) == (3, 10, 2, 6, 2)
    one = tf.constant(x[1:2])
    with tf.GradientTape() as tape:
        tape.watch(one)
        up = model.get_layer("up")(model.get_layer("separable")(model.get_layer("causal")(one)))
    alone = tape.jacobian(up, one)[0, :, :, 0]
    np.testing.assert_allclose(jacobian[1].numpy(), alone.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: layers.Conv1D(5, 3, groups=2), r"Conv1D: filters must be divisible by groups"),
        (lambda: layers.Conv2D(2, 3, groups=0), "groups=0"),
        (lambda: layers.Conv3D(2, 3, padding="causal"), "'causal' is for Conv1D only"),
        (lambda: layers.Conv2DTranspose(2, 3, padding="causal"), "Conv2DTranspose takes"),
        (lambda: layers.Conv2DTranspose(2, 3, strides=2, output_padding=2),
         "output_padding must be less than strides"),
        (lambda: layers.Conv1DTranspose(2, 3, output_padding=-1), "output_padding=-1"),
        (lambda: layers.DepthwiseConv2D(3, strides=(1, 2)),
         "DepthwiseConv2D: strides must be equal"),
        (lambda: layers.SeparableConv1D(2, 3, strides=2, dilation_rate=2),
         "SeparableConv1D: strides > 1 is not supported together with dilation_rate > 1"),
        (lambda: layers.DepthwiseConv1D(3, depth_multiplier=0), "depth_multiplier=0"),
        (lambda: layers.Conv1D(2, 3, data_format="nwc"), "data_format='nwc'"),
        (lambda: layers.Conv3D(2, (3, 3)), r"kernel_size=\(3, 3\)"),
    ],
)
def test_bad_arguments_are_refused_naming_the_argument(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_bad_inputs_name_the_layer_and_the_fix():
    with pytest.raises(ValueError, match=r"'seq'.*\(Conv1D\).*rank 3.*Reshape\(\(20, 1\)\)"):
        layers.Conv1D(2, 3, name="seq")(tf.ones((4, 20)))
    with pytest.raises(ValueError, match=r"'vol'.*Reshape\(\(4, 5, 6, 1\)\)"):
        layers.Conv3D(2, 3, name="vol")(tf.ones((2, 4, 5, 6)))
    with pytest.raises(ValueError, match=r"Conv1D 'small': inputs of shape \(2, 4, 3\) are "
                                         r"too small for kernel_size=\(5,\)"):
        layers.Conv1D(2, 5, name="small")(tf.ones((2, 4, 3)))
    with pytest.raises(ValueError, match=r"SeparableConv2D 'sep'.*too small"):
        layers.SeparableConv2D(2, 3, dilation_rate=2, name="sep")(tf.ones((1, 4, 9, 2)))
    with pytest.raises(ValueError, match=r"Conv2D 'g'.*5 channels, which groups=2"):
        layers.Conv2D(4, 3, groups=2, name="g")(tf.ones((1, 6, 6, 5)))
    with pytest.raises(TypeError, match="no groups argument"):
        layers.Conv2DTranspose(4, 3, groups=2)


def test_conv3d_transpose_takes_data_format_before_output_padding_as_keras():
    layer = layers.Conv3DTranspose(2, 3, 2, "valid", None, 1)
    assert layer.data_format == "channels_last" and layer.output_padding == (1, 1, 1)
    assert keras.layers.Conv3DTranspose(2, 3, 2, "valid", None, 1).output_padding == (1, 1, 1)
