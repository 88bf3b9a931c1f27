"""ZeroPadding, Cropping and UpSampling over 1, 2 and 3 spatial axes, and Rescaling: against
Keras 3's layers on the same inputs, the goldens of Keras's own tests (keras/src/layers/
reshaping/{zero_padding,cropping,up_sampling}*_test.py, preprocessing/rescaling_test.py;
channels-last cases), configs that match Keras's, models and recipes, and the errors."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers
from graphfit.recipes import RecipeError, recipe_from_text

_RNG = np.random.default_rng(0)
_INPUTS = {1: _RNG.normal(size=(2, 7, 3)).astype("float32"),
           2: _RNG.normal(size=(2, 7, 9, 3)).astype("float32"),
           3: _RNG.normal(size=(2, 5, 6, 7, 2)).astype("float32")}

_CASES = [
    ("ZeroPadding", 1, {}), ("ZeroPadding", 1, {"padding": (1, 3)}),
    ("ZeroPadding", 2, {"padding": ((1, 2), (3, 4))}), ("ZeroPadding", 2, {"padding": (2, 2)}),
    ("ZeroPadding", 2, {"padding": 2}), ("ZeroPadding", 3, {}),
    ("ZeroPadding", 3, {"padding": ((1, 2), (3, 4), (0, 2))}),
    ("Cropping", 1, {}), ("Cropping", 1, {"cropping": (0, 4)}), ("Cropping", 2, {}),
    ("Cropping", 2, {"cropping": ((1, 2), (3, 4))}), ("Cropping", 2, {"cropping": (2, 2)}),
    ("Cropping", 3, {}), ("Cropping", 3, {"cropping": ((0, 2), (1, 0), (3, 3))}),
    ("UpSampling", 1, {}), ("UpSampling", 1, {"size": 3}), ("UpSampling", 2, {}),
    ("UpSampling", 2, {"size": (3, 1)}), ("UpSampling", 3, {"size": (2, 1, 3)}),
]


@pytest.mark.parametrize("kind, rank, arguments", _CASES)
def test_matches_keras_outputs_and_config(kind, rank, arguments):
    name = f"{kind}{rank}D"
    ours, theirs = getattr(layers, name)(**arguments), getattr(keras.layers, name)(**arguments)
    x = _INPUTS[rank]
    np.testing.assert_array_equal(ours(x), theirs(x))
    keras_config = theirs.get_config()
    for key, value in ours.get_config().items():
        if key not in ("name", "data_format"):
            assert value == keras_config[key], (name, key)


# Keras's cropping2d_test: cropping and the rows/cols kept of (2, 7, 9, 3) inputs.
@pytest.mark.parametrize("cropping, ranges", [
    (((1, 2), (3, 4)), ((1, 5), (3, 5))), (((2, 2), (2, 2)), ((2, 5), (2, 7))),
    ((2, 2), ((2, 5), (2, 7))), (2, ((2, 5), (2, 7))), (((0, 2), (0, 4)), ((0, 5), (0, 5))),
    (((1, 0), (3, 0)), ((1, 7), (3, 9))), (((1, 0), (3, 4)), ((1, 7), (3, 5))),
    (((1, 2), (3, 0)), ((1, 5), (3, 9))),
])
def test_keras_cropping2d_goldens(cropping, ranges):
    x = _INPUTS[2]
    (r0, r1), (c0, c1) = ranges
    np.testing.assert_array_equal(layers.Cropping2D(cropping)(x), x[:, r0:r1, c0:c1, :])


def test_keras_zero_padding_and_up_sampling_goldens():
    # zero_padding2d_test: ((1, 2), (3, 4)) puts zeros in rows 0, -1, -2 and columns 0..2, -4..
    x = np.ones((2, 2, 3, 1), "float32")
    out = layers.ZeroPadding2D(((1, 2), (3, 4)))(x).numpy()
    assert out.shape == (2, 5, 10, 1)
    assert out[:, [0, -1, -2]].sum() == 0 and out[:, :, [0, 1, 2, -1, -2, -3, -4]].sum() == 0
    np.testing.assert_array_equal(out[:, 1:3, 3:6], x)
    # up_sampling1d_test: size 2 repeats each step.
    steps = np.array([[[1.0], [2.0]]], "float32")
    assert layers.UpSampling1D(2)(steps).numpy().ravel().tolist() == [1, 1, 2, 2]
    # up_sampling3d_test: every entry becomes a size[0] x size[1] x size[2] block.
    volume = np.arange(8, dtype="float32").reshape((1, 2, 2, 2, 1))
    out = layers.UpSampling3D((2, 3, 1))(volume).numpy()
    assert out.shape == (1, 4, 6, 2, 1)
    np.testing.assert_array_equal(out[0, ::2, ::3, :, 0], volume[0, :, :, :, 0])


@pytest.mark.parametrize("interpolation", ["bilinear", "bicubic", "area", "lanczos3"])
def test_up_sampling2d_interpolations_match_keras(interpolation):
    x = np.random.default_rng(1).random((2, 11, 12, 2)).astype("float32")  # Keras's shapes
    for size in ((2, 2), (3, 2)):
        ours = layers.UpSampling2D(size, interpolation=interpolation)
        theirs = keras.layers.UpSampling2D(size, interpolation=interpolation)
        np.testing.assert_allclose(ours(x), theirs(x), atol=1e-5)
        assert not ours.supports_jit  # XLA lacks or mis-computes these resizes on CPU


def test_rescaling_matches_keras_with_integer_inputs_and_per_channel_scales():
    pixels = np.arange(24, dtype="uint8").reshape((2, 2, 2, 3))
    for arguments in ({"scale": 1 / 255}, {"scale": 1 / 127.5, "offset": -1},
                      {"scale": [1.0, 2.0, 3.0], "offset": [0.5, 0.0, -0.5]}):
        ours, theirs = layers.Rescaling(**arguments), keras.layers.Rescaling(**arguments)
        out = ours(pixels)
        assert out.dtype == tf.float32
        np.testing.assert_allclose(out, theirs(pixels), rtol=1e-6)
    # rescaling_test: scale 2, offset 0.5 on ones.
    np.testing.assert_allclose(layers.Rescaling(2.0, 0.5)(np.ones((2, 3))), 2.5)
    config = layers.Rescaling([1.0, 2.0], offset=0.5).get_config()
    assert layers.Rescaling.from_config(config).scale == [1.0, 2.0]


def test_a_model_of_shape_layers_infers_shapes_and_compiles_with_xla():
    model = gf.Sequential([layers.Rescaling(0.5), layers.ZeroPadding3D((0, 1, 1)),
                           layers.Cropping3D(((1, 0), (0, 0), (2, 2))), layers.UpSampling3D(2),
                           layers.GlobalAveragePooling3D()])
    model.build((None, 5, 6, 7, 2))
    assert model.output_spec.shape.as_list() == [None, 2]
    x = _INPUTS[3]
    np.testing.assert_allclose(tf.function(model, jit_compile=True)(x), model(x), rtol=1e-6)


@pytest.mark.parametrize("name, arguments, message", [
    # Keras's zero_padding2d_test invalid paddings.
    ("ZeroPadding2D", {"padding": (1,)}, "ZeroPadding2D: padding must be a non-negative"),
    ("ZeroPadding2D", {"padding": (1, 2, 3)}, "tuple of 2 pairs"),
    ("ZeroPadding2D", {"padding": "1"}, "Received: padding='1'"),
    ("ZeroPadding2D", {"padding": ((1, 2), (3, 4, 5))}, "ZeroPadding2D: padding must be"),
    ("ZeroPadding2D", {"padding": ((1, 2), (3, -4))}, "ZeroPadding2D: padding must be"),
    ("ZeroPadding2D", {"padding": ((1, 2), "3")}, "ZeroPadding2D: padding must be"),
    ("Cropping1D", {"cropping": (1, 2, 3)}, "Cropping1D: cropping must be a non-negative "
                                            r"integer or a pair \(before, after\)"),
    ("Cropping3D", {"cropping": -1}, "Cropping3D: cropping must be"),
    ("UpSampling2D", {"interpolation": "linear"}, "UpSampling2D: interpolation must be one of"),
    ("UpSampling3D", {"interpolation": "bilinear"}, r"interpolation must be one of \('nearest',\)"),
    ("UpSampling1D", {"size": 0}, "size must be a positive integer"),
    ("ZeroPadding3D", {"data_format": "channels_first"}, r"tf.transpose\(x, \(0, 2, 3, 4, 1\)\)"),
    ("Rescaling", {"scale": "1/255"}, "Rescaling: scale must be a number or a list of numbers"),
    ("Rescaling", {"scale": 1.0, "offset": [1, None]}, "Rescaling: offset must be"),
])
def test_bad_arguments_are_clear_errors(name, arguments, message):
    with pytest.raises(ValueError, match=message):
        getattr(layers, name)(**arguments)


def test_cropping_everything_and_wrong_ranks_name_the_layer():
    with pytest.raises(ValueError, match="Cropping1D 'crop': cropping=.*leaves nothing of axis 1"):
        layers.Cropping1D((3, 4), name="crop")(_INPUTS[1])
    with pytest.raises(ValueError, match=r"'pad' \(ZeroPadding1D\) expects inputs of rank 3"):
        layers.ZeroPadding1D(name="pad")(_INPUTS[2])


def test_recipes_take_the_layers_by_type_with_keras_arguments():
    text = """data: {source: digits, as_images: true}
model:
  layers:
    - {type: Rescaling, scale: 0.0625}
    - {type: ZeroPadding2D, padding: [[1, 0], [0, 1]]}
    - {type: UpSampling2D, size: 2, interpolation: bilinear}
    - {type: MaxPooling2D}
    - {type: Cropping2D, cropping: 1}
    - {type: SpatialDropout2D, rate: 0.1, seed: 1}
    - {type: GlobalMaxPooling2D}
    - {type: Dense, units: 10, activation: softmax}
loss: sparse_categorical_crossentropy
"""
    assert recipe_from_text(text, "shapes.yaml") is not None
    with pytest.raises(RecipeError, match="model.layers.1.padding|ZeroPadding2D: padding must"):
        recipe_from_text(text.replace("[[1, 0], [0, 1]]", "[[1, 0], [0, -1]]"), "bad.yaml")
