"""Keras's losses through graphfit's compile / evaluate / fit give Keras's numbers.

Every public name of `keras.losses` and Keras's loss strings ("mse", "bce", "ce", ...) is run
by name through the same model in Keras and graphfit (same weights, same data), or listed in
`graphfit.training.loss_metric_parity` with the reason it differs; a name Keras adds fails the
walk until it is classified. Objects with arguments (from_logits, label_smoothing,
ignore_class, delta, reduction, ...) also run one `fit` epoch, and goldens of
keras/src/losses/losses_test.py run through an identity model.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers
from graphfit.core.naming import snake_case
from graphfit.training import loss_metric_parity as parity
from graphfit.training.losses import LossSet, ShapeChosenCrossentropy, resolve_loss
from tests.keras_parity import loss_metric_twins as twins

# Keras loss name (class, function or alias): the kind of labels it is run on.
NAMES = {
    "BinaryCrossentropy": "binary", "binary_crossentropy": "binary", "bce": "binary",
    "BCE": "binary", "BinaryFocalCrossentropy": "binary",
    "binary_focal_crossentropy": "binary", "Hinge": "binary", "hinge": "binary",
    "SquaredHinge": "binary", "squared_hinge": "binary",
    "CategoricalCrossentropy": "categorical", "categorical_crossentropy": "categorical",
    "CategoricalFocalCrossentropy": "categorical",
    "categorical_focal_crossentropy": "categorical", "CategoricalHinge": "categorical",
    "categorical_hinge": "categorical", "KLDivergence": "categorical",
    "kl_divergence": "categorical", "kld": "categorical", "KLD": "categorical",
    "SparseCategoricalCrossentropy": "sparse", "sparse_categorical_crossentropy": "sparse",
    "CategoricalGeneralizedCrossEntropy": "sparse",
    "categorical_generalized_cross_entropy": "sparse",
    "CosineSimilarity": "regression", "cosine_similarity": "regression",
    "Huber": "regression", "huber": "regression", "LogCosh": "regression",
    "log_cosh": "regression", "MeanAbsoluteError": "regression",
    "mean_absolute_error": "regression", "mae": "regression", "MAE": "regression",
    "MeanSquaredError": "regression", "mean_squared_error": "regression",
    "mse": "regression", "MSE": "regression",
    "MeanAbsolutePercentageError": "positive", "mean_absolute_percentage_error": "positive",
    "mape": "positive", "MAPE": "positive", "MeanSquaredLogarithmicError": "positive",
    "mean_squared_logarithmic_error": "positive", "msle": "positive", "MSLE": "positive",
    "Poisson": "positive", "poisson": "positive",
    "Dice": "multilabel", "dice": "multilabel", "Tversky": "multilabel",
    "tversky": "multilabel",
    # Keras's choice by shapes: checked on all three kinds of labels below.
    "crossentropy": "binary", "ce": "binary",
}
# Labels of their own shape (sequences, class ids for embeddings): their own tests below.
OWN_TESTS = {"CTC", "ctc", "Circle", "circle", "Loss"}

KINDS = ("binary", "categorical", "sparse", "regression", "positive", "multilabel")

def test_every_keras_loss_is_run_here_or_listed_as_different():
    names = parity.keras_loss_names()
    unclassified = [name for name in names if name not in NAMES and name not in OWN_TESTS
                    and parity.status("loss", name)[0] == "works"]
    assert not unclassified, (
        f"Keras losses neither compared here nor listed in loss_metric_parity.LOSS_NOTES: "
        f"{unclassified}")
    assert not [name for name in NAMES if name not in names]

def _kerass(name: str):
    """What Keras's compile makes of a loss name: its `losses.get`, or for the names only
    graphfit takes, the object or function of that name."""
    if parity.status("loss", name)[0] == "works":
        return name
    classes = {snake_case(n): getattr(keras.losses, n) for n in dir(keras.losses)
               if isinstance(getattr(keras.losses, n), type)}
    return classes[snake_case(name)]()  # the function's defaults are its class's


@pytest.mark.parametrize("kind", KINDS)
def test_every_loss_name_gives_kerass_numbers(kind):
    """Each name of this kind, through graphfit's resolution and Keras's, on the same
    predictions; each class through compile and evaluate of both models as well."""
    _, (x, y) = twins.data(kind)
    ours, theirs = twins.twins(kind)
    y_pred = theirs.predict(x, verbose=0)
    names = [name for name, k in NAMES.items() if k == kind]
    if kind in ("categorical", "sparse"):
        names += ["crossentropy", "ce"]
    wrong = {}
    for name in names:
        loss_set = LossSet(name)
        loss_set.build(None, tf.float32, tf.TensorSpec(y.shape, tf.as_dtype(y.dtype)),
                       tf.TensorSpec(y_pred.shape))
        keras_loss = keras.losses.get(_kerass(name)) if name not in ("crossentropy", "ce") \
            else type(loss_set.losses[None])()
        expected = keras_loss(y, y_pred) if isinstance(keras_loss, keras.losses.Loss) \
            else np.mean(keras_loss(y, y_pred))
        got = loss_set(tf.constant(y), tf.constant(y_pred))[0]
        if not np.isclose(float(got), float(expected), rtol=1e-5, atol=1e-6):
            wrong[name] = (float(got), float(expected))
        if name[:1].isupper():  # a class: through compile and evaluate too
            ours.compile(optimizer="sgd", loss=name, jit_compile=False)
            theirs.compile(optimizer="sgd", loss=_kerass(name), run_eagerly=True)
            ours_logs, theirs_logs = twins.evaluate_both(ours, theirs, x, y)
            if not np.isclose(ours_logs["loss"], theirs_logs["loss"], rtol=1e-5, atol=1e-6):
                wrong[f"{name} (evaluate)"] = (ours_logs["loss"], theirs_logs["loss"])
    assert not wrong, f"loss by name: (graphfit, Keras) differ for {wrong}"


def test_crossentropy_is_chosen_by_the_shapes_as_keras_does():
    expected = {"binary": keras.losses.BinaryCrossentropy,
                "categorical": keras.losses.CategoricalCrossentropy,
                "sparse": keras.losses.SparseCategoricalCrossentropy}
    for kind, cls in expected.items():
        (x, y), _ = twins.data(kind)
        model, _ = twins.twins(kind)
        model.compile(optimizer="sgd", loss="ce", jit_compile=False)
        model.evaluate(x, y, verbose=0)
        assert type(model.compile_state.loss_set.losses[None]) is cls, kind
    assert isinstance(resolve_loss("crossentropy", tf.float32), ShapeChosenCrossentropy)



# (kind of labels, loss object): arguments Keras's tests exercise; each runs a fit epoch.
OBJECTS = {
    "bce_logits_smoothing": ("logits", keras.losses.BinaryCrossentropy(
        from_logits=True, label_smoothing=0.1)),
    "cce_smoothing": ("categorical", keras.losses.CategoricalCrossentropy(label_smoothing=0.2)),
    "scce_logits": ("sparse_logits", keras.losses.SparseCategoricalCrossentropy(
        from_logits=True)),
    "binary_focal_balanced": ("binary", keras.losses.BinaryFocalCrossentropy(
        apply_class_balancing=True, alpha=0.3, gamma=3.0)),
    "categorical_focal": ("categorical", keras.losses.CategoricalFocalCrossentropy(
        alpha=0.5, gamma=1.5)),
    "huber_delta": ("regression", keras.losses.Huber(delta=0.3)),
    "mse_sum": ("regression", keras.losses.MeanSquaredError(reduction="sum")),
    "cosine_axis": ("regression", keras.losses.CosineSimilarity(axis=0)),
    "tversky": ("multilabel", keras.losses.Tversky(alpha=0.3, beta=0.7)),
}

@pytest.mark.parametrize("case", sorted(OBJECTS))
def test_loss_objects_with_arguments_give_kerass_fit_and_evaluate(case):
    kind, loss = OBJECTS[case]
    train, val = twins.data(kind, seed=1)
    ours, theirs = twins.twins(kind, seed=1)
    twins.compile_both(ours, theirs, loss=loss)
    twins.assert_same_logs(*twins.fit_both(ours, theirs, train, val))
    twins.assert_same_logs(*twins.evaluate_both(ours, theirs, *val))

def test_sample_weights_weight_the_loss_as_in_keras():
    train, val = twins.data("regression", seed=2)
    weights = np.random.default_rng(2).uniform(0, 3, size=len(train[0])).astype("float32")
    ours, theirs = twins.twins("regression", seed=2)
    twins.compile_both(ours, theirs, loss=keras.losses.Huber(delta=0.5))
    ours_logs, theirs_logs = twins.evaluate_both(ours, theirs, *train, sample_weight=weights)
    twins.assert_same_logs(ours_logs, theirs_logs)
    assert ours_logs["loss"] != pytest.approx(
        ours.evaluate(*train, verbose=0, return_dict=True)["loss"])
    twins.assert_same_logs(*twins.fit_both(ours, theirs, train, val, sample_weight=weights))

def test_ignore_class_lets_the_ignored_label_through_and_matches_keras():
    # losses_test.py SparseCategoricalCrossentropyTest.test_ignore_class: per-element losses
    # [[0.0, 1.480129]], through an identity model on (1, 2, 3) logits.
    logits = np.array([[[0.854, 0.698, 0.598], [0.088, 0.86, 0.018]]], dtype="float32")
    y_true = np.array([[-1, 2]])
    golden = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1)
    ours, theirs = twins.identity_twins(3, input_shape=(2, 3))
    twins.compile_both(ours, theirs, loss=keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, ignore_class=-1))
    ours_logs, theirs_logs = twins.evaluate_both(ours, theirs, logits, y_true)
    twins.assert_same_logs(ours_logs, theirs_logs)
    assert ours_logs["loss"] == pytest.approx(float(golden(y_true, logits)), rel=1e-6)
    unreduced = keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, ignore_class=-1, reduction=None)(y_true, logits)
    np.testing.assert_allclose(unreduced, [[0.0, 1.480129]], rtol=1e-5)

    # Training on class ids with ignored entries, from arrays and from a dataset.
    train, val = twins.data("sparse_logits", seed=7)
    y_train = train[1].copy()
    y_train[::5] = -1
    ours, theirs = twins.twins("sparse_logits", seed=7)
    twins.compile_both(ours, theirs, loss=keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, ignore_class=-1), metrics=["accuracy"])
    twins.assert_same_logs(*twins.fit_both(ours, theirs, (train[0], y_train), val))
    dataset = tf.data.Dataset.from_tensor_slices(
        (train[0], y_train)).batch(twins.BATCH)
    assert np.isfinite(ours.evaluate(dataset, verbose=0)[0])

def test_labels_out_of_range_are_still_refused_with_ignore_class():
    train, _ = twins.data("sparse_logits", seed=8)
    y = train[1].copy()
    y[0], y[1] = -1, 7
    model, _ = twins.twins("sparse_logits", seed=8)
    model.compile(optimizer="sgd", loss=keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, ignore_class=-1))
    with pytest.raises(ValueError, match="label 7.*0..3 \\(or -1, the loss's ignore_class\\)"):
        model.fit(train[0], y, verbose=0)

def test_ctc_on_label_sequences_matches_keras():
    rng = np.random.default_rng(9)
    x = rng.normal(size=(8, 6, 5)).astype("float32")
    y = rng.integers(1, 4, size=(8, 3)).astype("int64")
    ours = gf.Sequential([layers.Dense(4, activation="softmax")], input_shape=(6, 5))
    theirs = keras.Sequential([keras.Input((6, 5)), keras.layers.Dense(4, activation="softmax")])
    theirs.set_weights(ours.get_weights())
    for loss in ("ctc", keras.losses.CTC()):
        twins.compile_both(ours, theirs, loss=loss)
        twins.assert_same_logs(*twins.evaluate_both(ours, theirs, x, y), rtol=1e-4)
    twins.assert_same_logs(*twins.fit_both(ours, theirs, (x, y), (x, y), batch_size=4),
                           rtol=1e-4)

def test_circle_loss_on_embeddings_matches_keras():
    rng = np.random.default_rng(10)
    x = rng.normal(size=(16, 5)).astype("float32")
    y = rng.integers(0, 3, size=(16,)).astype("int64")
    ours = gf.Sequential([layers.Dense(4)], input_shape=(5,))
    theirs = keras.Sequential([keras.Input((5,)), keras.layers.Dense(4)])
    theirs.set_weights(ours.get_weights())
    for loss in ("circle", keras.losses.Circle(gamma=20.0, margin=0.3)):
        twins.compile_both(ours, theirs, loss=loss)
        twins.assert_same_logs(*twins.evaluate_both(ours, theirs, x, y, batch_size=8),
                               rtol=1e-4)
    twins.assert_same_logs(*twins.fit_both(ours, theirs, (x, y), (x, y), batch_size=8),
                           rtol=1e-4)

class ScaledError(keras.losses.Loss):
    """A user loss from Keras's base class."""

    def __init__(self, scale=2.0, **kwargs):
        super().__init__(**kwargs)
        self.scale = scale

    def call(self, y_true, y_pred):
        return self.scale * keras.ops.mean(keras.ops.abs(y_true - y_pred), axis=-1)

    def get_config(self):
        return {**super().get_config(), "scale": self.scale}

def test_a_loss_subclass_gives_kerass_numbers():
    train, val = twins.data("regression", seed=11)
    ours, theirs = twins.twins("regression", seed=11)
    twins.compile_both(ours, theirs, loss=ScaledError(scale=3.0))
    twins.assert_same_logs(*twins.fit_both(ours, theirs, train, val))

def test_the_docs_table_is_the_generated_one():
    import pathlib

    docs = pathlib.Path(__file__).resolve().parents[2] / "docs" / "guides" / "keras_parity.md"
    assert parity.section_of(docs) == parity.markdown(), (
        "docs/guides/keras_parity.md's 'Losses and metrics' section is stale: run "
        "python -m graphfit.training.loss_metric_parity --write")


# keras/src/losses/losses_test.py goldens: (loss, y_true, y_pred, sample_weight, golden).
_HUBER_TRUE = np.array([[1.0, 0.0, 1.0], [1.0, 0.0, 0.0]], dtype="float32")
_HUBER_PRED = np.array([[0.9, 0.2, 0.2], [0.8, 0.4, 0.6]], dtype="float32")
_HUBER_ERROR = np.abs(_HUBER_PRED - _HUBER_TRUE)
GOLDENS = {
    "mse_unweighted": ("mse", [[1, 9, 2], [-5, -2, 6]], [[4, 8, 12], [8, 1, 3]], None, 49.5),
    "mse_sample_weighted": ("mse", [[1, 9, 2], [-5, -2, 6]], [[4, 8, 12], [8, 1, 3]],
                            [1.2, 3.4], 767.8 / 6),
    "huber_unweighted": ("huber", _HUBER_TRUE, _HUBER_PRED, None,
                         float(np.sum(np.where(_HUBER_ERROR <= 1, 0.5 * _HUBER_ERROR ** 2,
                                               _HUBER_ERROR - 0.5)) / 6)),
    "bce_label_smoothing": (keras.losses.BinaryCrossentropy(from_logits=True,
                                                            label_smoothing=0.1),
                            [[1, 0, 1]], [[10.0, -10.0, -10.0]], None, (10.0 + 0.5) / 3.0),
}


@pytest.mark.parametrize("case", sorted(GOLDENS))
def test_kerass_loss_goldens_through_evaluate(case):
    loss, y_true, y_pred, sample_weight, golden = GOLDENS[case]
    y_true = np.asarray(y_true, dtype="float32")
    y_pred = np.asarray(y_pred, dtype="float32")
    ours, theirs = twins.identity_twins(y_pred.shape[1])
    twins.compile_both(ours, theirs, loss=loss)
    weights = None if sample_weight is None else np.asarray(sample_weight, dtype="float32")
    ours_logs, theirs_logs = twins.evaluate_both(ours, theirs, y_pred, y_true,
                                                 sample_weight=weights)
    twins.assert_same_logs(ours_logs, theirs_logs)
    assert ours_logs["loss"] == pytest.approx(golden, rel=1e-4)  # Keras's epsilon clipping


def test_a_loss_whose_keras_config_drops_arguments_keeps_them_in_a_float64_model():
    # Keras 3.15's Huber.get_config leaves `delta` out: rebuilt from it in float64, the loss
    # would silently become Huber(delta=1). graphfit keeps the object (and says so).
    y_true = np.array([[0.0], [0.0], [0.0]])
    y_pred = np.array([[0.5], [3.0], [-6.0]])
    expected = float(keras.losses.Huber(delta=2.0)(y_true, y_pred))
    with pytest.warns(UserWarning, match="could not be rebuilt in the model's float64"):
        loss = resolve_loss(keras.losses.Huber(delta=2.0), tf.float64)
    assert float(loss(y_true, y_pred)) == pytest.approx(expected, rel=1e-6)
    assert expected != pytest.approx(float(keras.losses.Huber()(y_true, y_pred)))
    # A config that holds every argument is rebuilt in float64, as before.
    rebuilt = resolve_loss(keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                           tf.float64)
    assert rebuilt.dtype == "float64" and rebuilt.get_config()["from_logits"] is True
