"""compile, fit, evaluate, predict and the *_on_batch methods against Keras 3.

Each case runs through `keras` and through graphfit from the same initial weights and compares
the numbers; where Keras's own unit tests (`keras/src/trainers/trainer_test.py`) hold goldens,
they are checked too. Where graphfit differs by design, the test says so, and
`docs/guides/keras_parity.md` ("compile, fit, evaluate and predict arguments") lists it.
"""

from __future__ import annotations

import contextlib
import inspect
import pathlib
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import callbacks as gf_callbacks
from graphfit import layers, optimizers

PARITY_DOC = pathlib.Path(__file__).parents[2] / "docs" / "guides" / "keras_parity.md"


# ------------------------------------------------------------------------------ twins
def _keras_ones(units=3, inputs=4):
    """trainer_test.py's ExampleModel: a Dense without bias, kernel of ones."""
    return keras.Sequential([keras.Input((inputs,)),
                             keras.layers.Dense(units, use_bias=False, kernel_initializer="ones")])


def _gf_ones(units=3, inputs=4):
    return gf.Sequential([layers.Dense(units, use_bias=False, kernel_initializer="ones")],
                         input_shape=(inputs,))


def _classifier_twins(inputs=4, classes=3):
    """A Keras and a graphfit softmax-regression model with the same random weights."""
    k = keras.Sequential([keras.Input((inputs,)), keras.layers.Dense(classes)])
    g = gf.Sequential([layers.Dense(classes)], input_shape=(inputs,))
    g.set_weights(k.get_weights())
    return k, g


def _fast(model) -> dict:
    """compile's execution settings for a comparison: Keras's reference runs eagerly (a few
    small batches: faster than tracing them; the same numbers), graphfit without XLA (Keras's
    own default on a CPU; each XLA compile costs about a second). graphfit's default XLA path
    has its own tests (tests/framework/training/test_fused_loops.py,
    tests/keras_parity/test_custom_fit_guide.py)."""
    return {"run_eagerly": True} if isinstance(model, keras.Model) else {"jit_compile": False}


def _compile_both(k, g, **kwargs):
    k.compile(optimizer=keras.optimizers.SGD(0.1), **_fast(k), **kwargs)
    g.compile(optimizer=optimizers.SGD(0.1), **_fast(g), **kwargs)


def _classes(n=40, inputs=4, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, inputs)).astype("float32")
    return x, rng.integers(0, classes, size=n)


class _CountBatches(gf_callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.batches, self.epochs = 0, 0

    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1

    def on_epoch_end(self, epoch, logs=None):
        self.epochs += 1


class _KerasCountBatches(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.batches, self.epochs = 0, 0

    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1

    def on_epoch_end(self, epoch, logs=None):
        self.epochs += 1


# ---------------------------------------------------------------------- *_on_batch
def test_on_batch_methods_give_keras_numbers_and_goldens():
    # trainer_test.py::test_on_batch_methods, run through both.
    x, y = np.ones((100, 4)), np.zeros((100, 3))
    sw = np.arange(100).astype("float32") / 50.0
    results = {}
    for name, model in (("keras", _keras_ones()), ("graphfit", _gf_ones())):
        sgd = keras.optimizers.SGD() if name == "keras" else optimizers.SGD()
        model.compile(optimizer=sgd, loss=keras.losses.MeanSquaredError(),
                      metrics=[keras.metrics.MeanSquaredError()], **_fast(model))
        first = model.train_on_batch(x, y)
        assert isinstance(first, list) and len(first) == 2
        as_dict = model.train_on_batch(x, y, return_dict=True)
        assert isinstance(as_dict, dict) and len(as_dict) == 2
        results[name] = [first[0], as_dict["loss"], model.test_on_batch(x, y)[0],
                         model.test_on_batch(x, y, return_dict=True)["loss"],
                         *model.predict_on_batch(x)[0],
                         model.train_on_batch(x, y, sw)[0], model.test_on_batch(x, y, sw)[0],
                         *model.predict_on_batch(x)[0],
                         model.train_on_batch(x, y, class_weight={1: 0.3, 0: 0.2})[0]]
    goldens = [16.0, 15.158, 14.360, 14.360, 3.789511, 3.789511, 3.789511, 14.217, 13.476,
               3.689468, 3.689468, 3.689468, 2.722]
    np.testing.assert_allclose(results["graphfit"], results["keras"], rtol=1e-5)
    np.testing.assert_allclose(results["graphfit"], goldens, atol=2e-3)
    assert isinstance(_gf_ones().predict_on_batch(x), np.ndarray)


def test_on_batch_methods_without_training_and_without_metrics():
    # trainer_test.py::test_on_batch_methods_without_training; a loss alone is a float.
    x, y = np.ones((100, 4)), np.zeros((100, 3))
    model = _gf_ones()
    model.compile(loss="mse", metrics=["mse"], **_fast(model))
    np.testing.assert_allclose(model.predict_on_batch(x)[0], [4.0, 4.0, 4.0])
    assert model.test_on_batch(x, y) == pytest.approx([16.0, 16.0])
    assert model.test_on_batch(x, y, return_dict=True)["loss"] == pytest.approx(16.0)
    model.compile(optimizer="sgd", loss="mse", **_fast(model))
    assert isinstance(model.train_on_batch(x, y), float)
    assert not model.history  # no callback, no History: fit's record is left alone


def test_on_batch_methods_refuse_datasets_with_advice():
    model = _gf_ones()
    model.compile(optimizer="sgd", loss="mse")
    dataset = tf.data.Dataset.from_tensor_slices((np.ones((4, 4)), np.zeros((4, 3)))).batch(2)
    with pytest.raises(ValueError, match=r"one batch of arrays.*fit\(\)"):
        model.train_on_batch(dataset)
    with pytest.raises(ValueError, match=r"evaluate\(\)"):
        model.test_on_batch(dataset)


# ---------------------------------------------------------------------- loss_weights
class _TwoOutputs(gf.Model):
    """trainer_test.py's StructModel: two bias-free Dense of ones, a dict in and out."""

    def __init__(self):
        super().__init__()
        self.dense_1 = layers.Dense(3, use_bias=False, kernel_initializer="ones")
        self.dense_2 = layers.Dense(3, use_bias=False, kernel_initializer="ones")

    def call(self, x, training=False):
        return {"y_one": self.dense_1(x["x_one"]), "y_two": self.dense_2(x["x_two"])}


def test_a_scalar_loss_weight_scales_a_single_output_loss_as_keras():
    # trainer_test.py::test_loss_weights, single output (graphfit ignored it before).
    x, y = np.ones((40, 4)), np.zeros((40, 3))
    histories = []
    for model, sgd in ((_keras_ones(), keras.optimizers.SGD()), (_gf_ones(), optimizers.SGD())):
        model.compile(optimizer=sgd, loss="mse", metrics=["mse"], loss_weights=0.2,
                      **_fast(model))
        histories.append(model.fit(x, y, batch_size=20, epochs=3, verbose=0).history["loss"])
    np.testing.assert_allclose(histories[1], histories[0], rtol=1e-5)
    np.testing.assert_allclose(histories[1], [3.182979, 3.115617, 3.049681], atol=1e-3)


def _keras_two_outputs():
    inputs = {name: keras.Input((4,), name=name) for name in ("x_one", "x_two")}
    dense = {name: keras.layers.Dense(3, use_bias=False, kernel_initializer="ones")
             for name in ("y_one", "y_two")}
    return keras.Model(inputs, {"y_one": dense["y_one"](inputs["x_one"]),
                                "y_two": dense["y_two"](inputs["x_two"])})


@pytest.mark.parametrize("form", ["dict", "list"])
def test_loss_weights_for_several_outputs_match_keras_and_its_goldens(form):
    # trainer_test.py::test_loss_weights, dict and list cases (the list gives the outputs
    # in order).
    loss = {"y_one": "mse", "y_two": "mse"} if form == "dict" else ["mse", "mse"]
    weights = {"y_one": 0.1, "y_two": 0.2} if form == "dict" else [0.1, 0.2]
    x = {"x_one": np.ones((40, 4)), "x_two": np.ones((40, 4))}
    y = {"y_one": np.zeros((40, 3)), "y_two": np.zeros((40, 3))}
    histories = []
    for model, sgd in ((_keras_two_outputs(), keras.optimizers.SGD()),
                       (_TwoOutputs(), optimizers.SGD())):
        model.compile(optimizer=sgd, loss=loss, loss_weights=weights, **_fast(model))
        histories.append(model.fit(x, y, batch_size=20, epochs=3, verbose=0).history)
    np.testing.assert_allclose(histories[1]["loss"], [4.778718, 4.694403, 4.611693],
                               atol=1e-3)
    # The total is weighted; the per-output losses are logged unweighted, as Keras logs them.
    for key in ("loss", "y_one_loss", "y_two_loss"):
        np.testing.assert_allclose(histories[1][key], histories[0][key], rtol=1e-5)


def test_evaluate_lists_loss_metrics_then_output_losses_as_keras():
    # Keras's order (its _flatten_metrics_in_order; trainer_test.py::
    # test_evaluate_return_list_respect_metrics_order): the loss, a single output's metrics in
    # compile order, the per-output losses, then the other keys sorted (here the metrics,
    # named with their output).
    x = {"x_one": np.ones((8, 4)), "x_two": np.full((8, 4), 2.0)}
    y = {"y_one": np.zeros((8, 3)), "y_two": np.ones((8, 3))}
    metrics = {"y_one": ["mae"], "y_two": ["mse", "mae"]}
    results = []
    for model in (_keras_two_outputs(), _TwoOutputs()):
        model.compile(loss={"y_one": "mse", "y_two": "mae"}, metrics=metrics, **_fast(model))
        results.append(model.evaluate(x, y, verbose=0))
        results.append(model.test_on_batch(x, y))
    assert len(results[2]) == len(results[0]) == 6
    np.testing.assert_allclose(results[2], results[0], rtol=1e-6)
    np.testing.assert_allclose(results[3], results[1], rtol=1e-6)


def test_bad_loss_weights_are_refused_with_the_fix():
    model = _TwoOutputs()
    model.compile(optimizer="sgd", loss="mse", loss_weights=0.5)
    x = {"x_one": np.ones((4, 4)), "x_two": np.ones((4, 4))}
    y = {"y_one": np.zeros((4, 3)), "y_two": np.zeros((4, 3))}
    with pytest.raises(ValueError, match="one weight per output"):
        model.fit(x, y, verbose=0)  # Keras refuses one number for several outputs too
    with pytest.raises(ValueError, match="loss_weights must be a number"):
        _gf_ones().compile(loss="mse", loss_weights="heavy")


def test_an_output_without_a_loss_needs_no_labels():
    # trainer_test.py::test_partial_loss_partial_label: loss None for two of three outputs.
    class ThreeOutputs(gf.Model):
        def __init__(self):
            super().__init__()
            self.dense = layers.Dense(3, kernel_initializer="ones")

        def call(self, x, training=False):
            out = self.dense(x)
            return {"a": out, "b": out, "c": out}

    x, y = np.ones((32, 2)), np.ones((32, 3))
    partial, full = ThreeOutputs(), ThreeOutputs()
    partial.compile(loss={"a": "mse", "b": None, "c": None}, **_fast(partial))
    full.compile(loss={"a": "mse", "b": "mse", "c": "mse"}, **_fast(full))
    partial_loss = partial.evaluate(x, {"a": y}, verbose=0, return_dict=True)["loss"]
    full_loss = full.evaluate(x, {"a": y, "b": y, "c": y}, verbose=0, return_dict=True)["loss"]
    assert partial_loss * 3 == pytest.approx(full_loss)
    inputs = keras.Input((2,))
    out = keras.layers.Dense(3, kernel_initializer="ones")(inputs)
    twin = keras.Model(inputs, [out, out, out])
    twin.compile(loss=["mse", None, None], **_fast(twin))
    assert partial_loss == pytest.approx(twin.evaluate(x, y, verbose=0, return_dict=True)["loss"])
    with pytest.raises(ValueError, match="no output a loss"):
        partial.compile(loss={"a": None, "b": None, "c": None})


# ---------------------------------------------------------------------- class_weight
@pytest.mark.parametrize("labels", ["sparse", "one_hot", "column"])
def test_class_weight_trains_as_keras(labels):
    x, ids = _classes()
    class_weight = {0: 1.0, 1: 3.0, 2: 0.5}
    y = {"sparse": ids, "one_hot": np.eye(3)[ids], "column": ids[:, None]}[labels]
    loss = (keras.losses.CategoricalCrossentropy(from_logits=True) if labels == "one_hot"
            else keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    k, g = _classifier_twins()
    _compile_both(k, g, loss=loss)
    runs = [m.fit(x, y, batch_size=8, epochs=2, shuffle=False, class_weight=class_weight,
                  verbose=0).history["loss"] for m in (k, g)]
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-5)
    for a, b in zip(k.get_weights(), g.get_weights()):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_class_weight_on_a_dataset_and_in_weighted_metrics_as_keras():
    x, y = _classes()
    class_weight = {0: 2.0, 2: 0.25}  # class 1: weight 1
    k, g = _classifier_twins()
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    k.compile(optimizer=keras.optimizers.SGD(0.1), loss=loss,
              weighted_metrics=["sparse_categorical_accuracy"], **_fast(k))
    g.compile(optimizer=optimizers.SGD(0.1), loss=loss,
              weighted_metrics=["sparse_categorical_accuracy"], **_fast(g))
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
    runs = [m.fit(data, epochs=2, class_weight=class_weight, shuffle=False, verbose=0).history
            for m in (k, g)]
    for key in ("loss", "sparse_categorical_accuracy"):
        np.testing.assert_allclose(runs[1][key], runs[0][key], rtol=1e-5)


def test_class_weight_with_sample_weight_multiplies_them_where_keras_3_refuses():
    # Differs by design: Keras 3 refuses the two together; graphfit multiplies them (as
    # tf.keras 2 did), which is Keras trained with sample_weight * class_weight[class].
    x, y = _classes()
    sample_weight = np.linspace(0.5, 1.5, len(x)).astype("float32")
    class_weight = {0: 1.0, 1: 3.0, 2: 0.5}
    k, g = _classifier_twins()
    _compile_both(k, g, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    with pytest.raises(ValueError, match="class_weight"):
        k.fit(x, y, sample_weight=sample_weight, class_weight=class_weight, verbose=0)
    product = sample_weight * np.array([class_weight[c] for c in y], "float32")
    expected = k.fit(x, y, sample_weight=product, batch_size=8, shuffle=False, verbose=0)
    got = g.fit(x, y, sample_weight=sample_weight, class_weight=class_weight, batch_size=8,
                shuffle=False, verbose=0)
    np.testing.assert_allclose(got.history["loss"], expected.history["loss"], rtol=1e-5)


def test_class_weight_refusals_say_what_to_do():
    model = _TwoOutputs()
    model.compile(optimizer="sgd", loss="mse")
    x = {"x_one": np.ones((4, 4)), "x_two": np.ones((4, 4))}
    y = {"y_one": np.zeros((4, 3)), "y_two": np.zeros((4, 3))}
    with pytest.raises(ValueError, match="single output.*sample_weight"):
        model.fit(x, y, class_weight={0: 2.0}, verbose=0)  # Keras: "single output" too
    # Differs: Keras also takes one sample_weight array per output; graphfit refuses it.
    with pytest.raises(ValueError, match="one array per output.*loss_weights"):
        model.fit(x, y, sample_weight={"y_one": np.ones(4), "y_two": np.ones(4)}, verbose=0)
    single = _gf_ones()
    single.compile(optimizer="sgd", loss="mse")
    with pytest.raises(ValueError, match="class_weight must be a dict"):
        single.fit(np.ones((4, 4)), np.zeros((4, 3)), class_weight="balanced", verbose=0)
    with pytest.raises(ValueError, match="class ids"):
        single.fit(np.ones((4, 4)), np.zeros((4, 3)), class_weight={"cat": 2.0}, verbose=0)
    with pytest.raises(ValueError, match="one class per sample"):
        single.train_on_batch(np.ones((4, 4)), np.zeros((4, 3, 2)), class_weight={0: 2.0})


# ---------------------------------------------------------------------- validation
def test_validation_split_holds_out_the_last_samples_as_keras():
    x, y = _classes(n=50)
    sample_weight = np.linspace(0.5, 2.0, 50).astype("float32")
    k, g = _classifier_twins()
    _compile_both(k, g, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    runs = [m.fit(x, y, sample_weight=sample_weight, validation_split=0.3, batch_size=8,
                  epochs=2, shuffle=False, verbose=0).history for m in (k, g)]
    for key in ("loss", "val_loss"):
        np.testing.assert_allclose(runs[1][key], runs[0][key], rtol=1e-5)
    # floor(50 * 0.7) = 35 samples train; the last 15 (and their weights) validate.
    held_out = g.evaluate(x[35:], y[35:], sample_weight=sample_weight[35:], verbose=0)
    assert runs[1]["val_loss"][-1] == pytest.approx(held_out, rel=1e-5)


def test_class_weight_weighs_training_only_not_the_validation_split_as_keras():
    x, y = _classes(n=40)
    k, g = _classifier_twins()
    _compile_both(k, g, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    runs = [m.fit(x, y, class_weight={0: 4.0, 1: 0.5}, validation_split=0.25, batch_size=10,
                  shuffle=False, verbose=0).history for m in (k, g)]
    for key in ("loss", "val_loss"):
        np.testing.assert_allclose(runs[1][key], runs[0][key], rtol=1e-5)
    assert runs[1]["val_loss"][0] == pytest.approx(g.evaluate(x[30:], y[30:], verbose=0),
                                                   rel=1e-5)


def test_validation_split_is_refused_for_datasets_and_bad_fractions():
    model = _gf_ones()
    model.compile(optimizer="sgd", loss="mse")
    dataset = tf.data.Dataset.from_tensor_slices((np.ones((8, 4)), np.zeros((8, 3)))).batch(4)
    with pytest.raises(ValueError, match="validation_split is only supported.*validation_data"):
        model.fit(dataset, validation_split=0.5, verbose=0)  # Keras refuses it too
    with pytest.raises(ValueError, match=r"validation_split must be a float in \[0, 1\)"):
        model.fit(np.ones((8, 4)), np.zeros((8, 3)), validation_split=1.5, verbose=0)
    with pytest.raises(ValueError, match="too few"):
        model.fit(np.ones((2, 4)), np.zeros((2, 3)), validation_split=0.6, verbose=0)


def test_validation_freq_list_batch_size_and_initial_epoch_as_keras():
    x, y = _classes(n=30)
    k, g = _classifier_twins()
    _compile_both(k, g, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    runs = [m.fit(x[:20], y[:20], validation_data=(x[20:], y[20:]), validation_freq=[1, 3],
                  validation_batch_size=3, batch_size=5, epochs=4, initial_epoch=1,
                  shuffle=False, verbose=0) for m in (k, g)]
    assert runs[1].epoch == runs[0].epoch == [1, 2, 3]
    for key in ("loss", "val_loss"):
        assert len(runs[1].history[key]) == len(runs[0].history[key])
        np.testing.assert_allclose(runs[1].history[key], runs[0].history[key], rtol=1e-5)
    with pytest.raises(ValueError, match="validation_freq must be a positive integer or a list"):
        g.fit(x, y, validation_freq=[0, 2], verbose=0)


@pytest.mark.parametrize("repeat", [False, True], ids=["finite", "repeated"])
def test_validation_steps_on_a_dataset_evaluate_its_first_batches_each_time_as_keras(repeat):
    # Keras resets its evaluation iterator at every validation: the first batches each time.
    x, y = _classes(n=40)
    val = tf.data.Dataset.from_tensor_slices((x[:24], y[:24])).batch(6)
    val = val.repeat() if repeat else val
    k, g = _classifier_twins()
    _compile_both(k, g, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    runs = [m.fit(x, y, validation_data=val, validation_steps=2, batch_size=10, epochs=3,
                  shuffle=False, verbose=0).history["val_loss"] for m in (k, g)]
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-5)
    first_two = g.evaluate(x[:12], y[:12], verbose=0)
    assert runs[1][-1] == pytest.approx(first_two, rel=1e-5)


# ---------------------------------------------------------------------- steps and shuffle
@pytest.mark.parametrize("steps_per_epoch, counts", [
    (10, [10, 10, 10, 10]),  # match_one_epoch
    (5, [5, 5, 5, 5]),  # match_multi_epoch
    (9, [9, 1, 9, 1]),  # not_match_too_low: an epoch ends where the pass ends
    (11, [10, 10, 10, 10]),  # not_match_but_high_enough: no cycling within an epoch
])
def test_steps_per_epoch_on_arrays_counts_batches_as_keras(steps_per_epoch, counts):
    # trainer_test.py::test_steps_per_epoch: 10 batches of 8, 4 epochs.
    x, y = np.ones((80, 4)), np.ones((80, 1))
    seen = {}
    for name, model, counter in (("keras", _keras_ones(1), _KerasCountBatches()),
                                 ("graphfit", _gf_ones(1), _CountBatches())):
        model.compile(optimizer="sgd", loss="mse", steps_per_execution=1, **_fast(model))
        with pytest.warns(UserWarning) if 10 % steps_per_epoch else _no_warning():
            model.fit(x, y, batch_size=8, epochs=4, steps_per_epoch=steps_per_epoch,
                      callbacks=[counter], verbose=0)
        seen[name] = (counter.batches, counter.epochs, model.get_weights()[0])
    assert seen["graphfit"][:2] == seen["keras"][:2] == (sum(counts), 4)
    np.testing.assert_allclose(seen["graphfit"][2], seen["keras"][2], rtol=1e-5)


def _no_warning():
    return contextlib.nullcontext()


def test_steps_per_epoch_on_a_finite_dataset_as_keras():
    # 5 batches, 2 per epoch: Keras runs 2, 2, 1 (its input ran out), then a new pass.
    x = np.arange(10, dtype="float32")[:, None] / 10 * np.ones((1, 4), "float32")
    dataset = tf.data.Dataset.from_tensor_slices((x, np.ones((10, 1), "float32"))).batch(2)
    counts = {}
    for name, model, counter in (("keras", _keras_ones(1), _KerasCountBatches()),
                                 ("graphfit", _gf_ones(1), _CountBatches())):
        model.compile(optimizer="sgd", loss="mse", steps_per_execution=1, **_fast(model))
        with pytest.warns(UserWarning, match="ran out of data"):
            model.fit(dataset, epochs=4, steps_per_epoch=2, callbacks=[counter], shuffle=False,
                      verbose=0)
        counts[name] = (counter.batches, model.get_weights()[0])
    assert counts["graphfit"][0] == counts["keras"][0] == 7
    np.testing.assert_allclose(counts["graphfit"][1], counts["keras"][1], rtol=1e-5)


def test_shuffle_batch_keeps_the_batches_and_bad_values_are_refused():
    x, y = _classes(n=24)
    k, g = _classifier_twins()
    _compile_both(k, g, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    for model in (k, g):
        model.fit(x, y, batch_size=8, epochs=2, shuffle="batch", verbose=0)
    # Reordering inside a batch leaves each batch's mean loss: the same update as Keras's.
    for a, b in zip(k.get_weights(), g.get_weights()):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="shuffle must be True, False or 'batch'"):
        g.fit(x, y, shuffle="yes", verbose=0)


def test_python_generators_are_refused_with_the_dataset_to_use_instead():
    # Keras reads generators and PyDatasets batch by batch in Python; graphfit does not.
    model = _gf_ones()
    model.compile(optimizer="sgd", loss="mse")
    batches = ((np.ones((2, 4)), np.zeros((2, 3))) for _ in range(3))
    with pytest.raises(ValueError, match=r"generator.*tf.data.Dataset.from_generator"):
        model.fit(batches, verbose=0)


# ---------------------------------------------------------------------- the table
_METHODS = ("compile", "fit", "evaluate", "predict", "train_on_batch", "test_on_batch",
            "predict_on_batch")
_ROW = re.compile(r"^\| `(\w+)\((\w+)\)` \| \*\*(works|differs)\*\* \|", re.M)


def _table_rows() -> dict:
    text = PARITY_DOC.read_text()
    section = text.split("## compile, fit, evaluate and predict arguments", 1)[1].split("\n## ")[0]
    return {(m, a): status for m, a, status in _ROW.findall(section)}


def _keras_arguments(method: str) -> dict:
    parameters = inspect.signature(getattr(keras.Model, method)).parameters
    return {name: p for name, p in parameters.items()
            if name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}


def test_the_parity_table_lists_every_keras_argument_and_says_the_truth():
    rows = _table_rows()
    keras_arguments = {(m, a) for m in _METHODS for a in _keras_arguments(m)}
    assert set(rows) == keras_arguments, (
        f"docs/guides/keras_parity.md is stale: rows for {sorted(keras_arguments - set(rows))} are "
        f"missing, rows for {sorted(set(rows) - keras_arguments)} name no Keras argument")
    for (method, argument), status in rows.items():
        ours = inspect.signature(getattr(gf.Model, method)).parameters
        keras_default = _keras_arguments(method)[argument].default
        assert argument in ours, f"{method}({argument}) is marked {status} but not accepted"
        if status == "works":  # same default as Keras, or the row must say it differs
            assert ours[argument].default == keras_default, (method, argument)
    # Keras's order of the arguments it shares, so positional calls mean the same; compile
    # keeps Keras 2's order (metrics third), which the table's compile(metrics) row says.
    for method in _METHODS[1:]:
        ours = list(inspect.signature(getattr(gf.Model, method)).parameters)
        shared = [a for a in _keras_arguments(method) if a in ours]
        assert [a for a in ours if a in shared] == shared, method


def test_auto_scale_loss_false_leaves_the_optimizer_unwrapped_as_keras():
    for auto_scale_loss in (True, False):
        model = gf.Sequential([layers.Dense(2)], input_shape=(3,))
        model.compile(optimizer="sgd", loss="mse", dtype_policy="mixed_float16",
                      auto_scale_loss=auto_scale_loss)
        keras.config.set_dtype_policy("mixed_float16")  # Keras wraps under the global policy
        try:
            twin = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
            twin.compile(optimizer="sgd", loss="mse", auto_scale_loss=auto_scale_loss)
        finally:
            keras.config.set_dtype_policy("float32")
        assert isinstance(model.optimizer, optimizers.LossScaleOptimizer) == auto_scale_loss
        assert isinstance(twin.optimizer, keras.optimizers.LossScaleOptimizer) == auto_scale_loss
    with pytest.raises(ValueError, match="auto_scale_loss must be True or False"):
        model.compile(loss="mse", auto_scale_loss="yes")


def test_initial_epoch_at_or_past_epochs_trains_nothing_as_keras():
    x, y = np.ones((8, 2), "float32"), np.ones((8, 1), "float32")
    theirs = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    ours = gf.Sequential([layers.Dense(1)], input_shape=(2,))
    ours.set_weights(theirs.get_weights())
    before = ours.get_weights()
    for model in (theirs, ours):
        model.compile(optimizer="sgd", loss="mse", **_fast(model))
    expected = theirs.fit(x, y, epochs=2, initial_epoch=2, verbose=0).history
    history = ours.fit(x, y, epochs=2, initial_epoch=3, verbose=0, test_data=(x, y)).history
    assert expected == {} and history == {}
    assert all(np.array_equal(a, b) for a, b in zip(before, ours.get_weights()))
    with pytest.raises(ValueError, match="initial_epoch must be an integer >= 0"):
        ours.fit(x, y, epochs=2, initial_epoch=-1, verbose=0)


def test_metrics_for_an_output_the_model_does_not_have_are_refused():
    # Keras: "dictionary key mismatch"; before, graphfit dropped the misspelt output's metrics.
    inputs = gf.Input((2,))
    model = gf.Model(inputs, {"a": layers.Dense(1, name="a")(inputs),
                              "b": layers.Dense(1, name="b")(inputs)})
    model.compile(optimizer="sgd", loss="mse", metrics={"a": ["mae"], "bb": ["mae"]})
    x, y = np.ones((4, 2), "float32"), np.ones((4, 1), "float32")
    with pytest.raises(ValueError, match=r"outputs \['bb'\] the model does not have"):
        model.fit(x, {"a": y, "b": y}, epochs=1, verbose=0)


def test_labels_for_an_output_the_model_does_not_have_are_refused_and_none_means_none():
    inputs = gf.Input((2,))
    model = gf.Model(inputs, {"a": layers.Dense(1, name="a")(inputs),
                              "b": layers.Dense(1, name="b")(inputs)})
    model.compile(optimizer="sgd", loss={"a": "mse", "b": None}, jit_compile=False)
    x, y = np.ones((4, 2), "float32"), np.ones((4, 1), "float32")
    with pytest.raises(ValueError, match=r"has labels for \['typo'\], which the model does not"):
        model.fit(x, {"a": y, "typo": y}, epochs=1, verbose=0)
    # Keras's list form with None for the output without a loss.
    history = model.fit(x, [y, None], epochs=1, verbose=0).history
    assert np.isfinite(history["loss"][0])
