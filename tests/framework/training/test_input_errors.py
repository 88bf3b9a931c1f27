"""Bad input gets a clear error before any training step runs, and changes nothing."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers

SPARSE_LOGITS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@pytest.fixture
def model():
    model = gf.Sequential([layers.Dense(8, activation="relu"), layers.Dense(3)], input_shape=(4,))
    model.compile(optimizer=optimizers.SGD(0.1), loss=SPARSE_LOGITS, metrics=["accuracy"])
    return model


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(30, 4)).astype("float32"), rng.integers(0, 3, size=30)


def _untouched(model, call):
    """Runs `call`, expecting a ValueError, and checks that no step ran and no weight moved."""
    before = model.get_weights()
    with pytest.raises(ValueError) as error:
        call()
    assert int(model.optimizer.iterations) == 0
    for a, b in zip(before, model.get_weights()):
        np.testing.assert_array_equal(a, b)
    return str(error.value)


def test_fit_before_compile_says_to_compile(data):
    with pytest.raises(RuntimeError, match="must be compiled before fit.*model.compile"):
        gf.Sequential([layers.Dense(1)]).fit(*data)


def test_wrong_feature_shape(model, data):
    x, y = data
    message = _untouched(model, lambda: model.fit(x[:, :3], y, verbose=0))
    assert "samples of shape (3,)" in message and "built for samples of shape (4,)" in message


def test_labels_outside_the_number_of_classes(model, data):
    x, y = data
    y = y.copy()
    y[7] = 3
    message = _untouched(model, lambda: model.fit(x, y, verbose=0))
    assert "label 3" in message and "outputs 3 classes" in message and "0..2" in message
    message = _untouched(model, lambda: model.fit(x, y - 4, verbose=0))
    assert "label -4" in message


def test_labels_in_validation_data_are_checked_too(model, data):
    x, y = data
    message = _untouched(model, lambda: model.fit(x, y, validation_data=(x, y * 0 + 5), verbose=0))
    assert message.startswith("validation_data[1] contains label 5")


def test_x_and_y_of_different_lengths(model, data):
    x, y = data
    message = _untouched(model, lambda: model.fit(x, y[:20], verbose=0))
    assert "x has 30, y has 20" in message


def test_nan_and_inf_are_refused_unless_allowed(model, data):
    x, y = data
    x = x.copy()
    x[5, 2] = np.nan
    x[9, 0] = np.inf
    message = _untouched(model, lambda: model.fit(x, y, verbose=0))
    assert "1 NaN and 1 infinite" in message and "(5, 2)" in message
    assert "check_finite=False" in message
    model.fit(np.nan_to_num(x, posinf=0.0), y, verbose=0, check_finite=False)


def test_unknown_loss_metric_and_optimizer_names_list_the_valid_ones():
    model = gf.Sequential([layers.Dense(1)])
    with pytest.raises(ValueError, match="Did you mean 'mean_squared_error'.*Valid loss names"):
        model.compile(loss="mean_squared_eror")
    with pytest.raises(ValueError, match="Did you mean 'accuracy'.*Valid metric names"):
        model.compile(loss="mse", metrics=["acuracy"])
    with pytest.raises(ValueError, match="(?i)adam"):
        model.compile(optimizer="adma", loss="mse")


def test_bad_fit_arguments(model, data):
    x, y = data
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        model.fit(x, y, batch_size=0, verbose=0)
    with pytest.raises(ValueError, match="epochs must be a non-negative integer"):
        model.fit(x, y, epochs=-1, verbose=0)
    weights = [w.numpy() for w in model.weights]
    assert model.fit(x, y, epochs=0, verbose=0).history == {}  # nothing trained, as Keras
    for before, after in zip(weights, model.weights):
        np.testing.assert_array_equal(before, after.numpy())
    with pytest.raises(ValueError, match="validation_data must be"):
        model.fit(x, y, validation_data=[x], verbose=0)
    with pytest.raises(ValueError, match="already yields the labels"):
        model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(4), y, verbose=0)
    with pytest.raises(ValueError, match="needs labels"):
        model.fit(x, verbose=0)
    with pytest.raises(ValueError, match="steps_per_execution must be"):
        model.compile(loss="mse", steps_per_execution=0)
    with pytest.raises(ValueError, match="jit_compile must be"):
        model.compile(loss="mse", jit_compile="yes")


def test_binary_and_regression_targets_are_checked():
    x = np.ones((10, 2), "float32")
    binary = gf.Sequential([layers.Dense(1)])
    binary.compile(loss=keras.losses.BinaryCrossentropy(from_logits=True))
    with pytest.raises(ValueError, match="targets in \\[0, 1\\]"):
        binary.fit(x, np.full(10, 2.0), verbose=0)
    regression = gf.Sequential([layers.Dense(2)])
    regression.compile(loss="mse")
    with pytest.raises(ValueError, match="targets of shape \\(None, 3\\).*predicts \\(None, 2\\)"):
        regression.fit(x, np.ones((10, 3)), verbose=0)
    regression.fit(x, np.ones((10, 2)), verbose=0)  # the right shape trains


def test_validation_features_are_named_in_the_error(model, data):
    x, y = data
    message = _untouched(model, lambda: model.fit(x, y, validation_data=(x[:, :3], y), verbose=0))
    assert message.startswith("validation_data[0] has samples of shape (3,)")


def test_dataset_labels_outside_the_classes_stop_training_with_a_clear_error(model, data):
    x, y = data
    bad = tf.data.Dataset.from_tensor_slices((x, y + 7)).batch(10)
    with pytest.raises(ValueError, match="labels of x contains a label outside 0..2, but the "
                                         "model outputs 3 classes"):
        model.fit(bad, verbose=0)
    assert int(model.optimizer.iterations) == 0  # the first bad batch never ran its step
    with pytest.raises(ValueError, match="contains a label outside 0..2"):
        model.evaluate(bad, verbose=0)


def test_empty_data_and_string_labels_are_refused(model, data):
    x, y = data
    with pytest.raises(ValueError, match="empty dataset"):
        model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(4).take(0), verbose=0)
    unknown_length = tf.data.Dataset.from_tensor_slices((x, y)).filter(lambda a, b: b > 5).batch(4)
    with pytest.raises(ValueError, match="yielded no batches"):
        model.fit(unknown_length, verbose=0)
    with pytest.raises(ValueError, match="must be numeric.*integer ids"):
        model.fit(x, np.array(["cat"] * 30), verbose=0)


def test_a_keras_optimizer_object_is_refused_with_the_graphfit_equivalent():
    model = gf.Sequential([layers.Dense(1)])
    with pytest.raises(ValueError, match="graphfit.optimizers.Adam"):
        model.compile(optimizer=keras.optimizers.Adam(), loss="mse")


@pytest.mark.parametrize("with_input", [True, False])
def test_an_unbatched_dataset_is_told_to_batch(with_input):
    x = np.ones((8, 4), np.float32)
    dataset = tf.data.Dataset.from_tensor_slices((x, x[:, :1]))  # single samples
    model = gf.Sequential(([gf.Input((4,))] if with_input else []) + [layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    with pytest.raises(ValueError, match=r"x is a tf.data.Dataset: if it yields single samples, "
                                         r"not batches, batch it first: dataset.batch\(32\)"):
        model.fit(dataset, verbose=0)
    model.fit(dataset.batch(4), verbose=0)  # the fix works
