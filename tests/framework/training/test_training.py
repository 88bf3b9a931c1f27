"""fit / evaluate / predict end to end: the issue's example, tracing, grouping, data kinds."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers
from tests.framework.core.test_layer import Running


@pytest.fixture(scope="module")
def digits():
    x, y = gf.datasets.load_digits()
    order = np.random.default_rng(0).permutation(len(x))
    return x[order], y[order]


def _mlp(dtype=None):
    return gf.Sequential([layers.Dense(32, activation="relu"), layers.Dense(10)], dtype=dtype)


def _compile(model, jit_compile=False, **kwargs):
    """Without XLA unless asked: these tests are about the data and the loops' bookkeeping, and
    each XLA compile costs about a second (the fused XLA loops have tests/framework/training/
    test_fused_loops.py; the issue's example and the tracing counts below run the default)."""
    model.compile(optimizer=optimizers.SGD(0.05, momentum=0.9),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], jit_compile=jit_compile, **kwargs)
    return model


def test_the_issue_example_trains_and_reports_every_stage(digits):
    x, y = digits
    model = gf.Sequential([layers.Dense(64, activation="relu"), layers.BatchNormalization(),
                           Running(), layers.Dense(10)])
    model.compile(optimizer=optimizers.SGD(learning_rate=0.05, momentum=0.9, nesterov=True),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    history = model.fit(x[:1200], y[:1200], batch_size=32, epochs=5, verbose=0,
                        validation_data=(x[1200:1500], y[1200:1500]),
                        test_data=(x[1500:], y[1500:]))
    assert len(history.history["loss"]) == 5 and len(history.history["val_accuracy"]) == 5
    assert len(history.history["test_accuracy"]) == 1 and history.test_epoch == [4]
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert history.history["test_accuracy"][0] > 0.9
    assert len(model.trainable_variables) == 7 and len(model.non_trainable_variables) == 3
    assert len(model.update_ops) == 3
    loss, accuracy = model.evaluate(x[1500:], y[1500:], verbose=0)
    # evaluate right after fit sees the same weights as fit's own test stage.
    assert accuracy == pytest.approx(history.history["test_accuracy"][0], abs=1e-7)
    assert model.predict(x[:5], verbose=0).shape == (5, 10)


def test_steps_are_traced_once_across_epochs_fits_and_partial_batches(digits):
    x, y = digits
    model = _compile(_mlp(), jit_compile="auto")  # the default: XLA on a CPU too
    model.fit(x[:500], y[:500], batch_size=64, epochs=3, verbose=0,
              validation_data=(x[500:600], y[500:600]))
    model.fit(x[:300], y[:300], batch_size=50, epochs=2, verbose=0)
    model.evaluate(x[:77], y[:77], verbose=0)
    model.predict(x[:33], verbose=0)
    counts = model.compile_state.steps.tracing_counts()
    # With XLA, chunks of 8 training steps run as one program (train_arrays_fused); shorter
    # chunks and the last partial batches run the per-step loops: each traced once.
    assert counts == {"train_step": 1, "test_step": 1, "predict_step": 1, "train_arrays": 1,
                      "train_arrays_fused": 1, "val_arrays": 1, "test_arrays": 1,
                      "predict_arrays": 1}


@pytest.fixture(scope="module")
def grouped_reference(digits):
    """The initial and trained weights of the reference fit (every step in one call), shared
    by the settings compared with it."""
    x, y = digits
    reference = _compile(_mlp(), steps_per_execution=1000, jit_compile=False)
    reference.build((None, 64))
    initial = reference.get_weights()
    reference.fit(x[:400], y[:400], batch_size=32, epochs=2, verbose=0, shuffle=False)
    return initial, reference.get_weights()


@pytest.mark.parametrize("settings", [
    {"steps_per_execution": 1, "jit_compile": False},
    {"steps_per_execution": 5, "jit_compile": False},
    {"steps_per_execution": "auto", "jit_compile": True},
    {"run_eagerly": True},
])
def test_grouping_and_compilation_do_not_change_the_numbers(digits, grouped_reference,
                                                            settings):
    x, y = digits
    initial, trained = grouped_reference
    model = _compile(_mlp(), **settings)
    model.build((None, 64))
    model.set_weights(initial)
    model.fit(x[:400], y[:400], batch_size=32, epochs=2, verbose=0, shuffle=False)
    for a, b in zip(model.get_weights(), trained, strict=True):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_shuffling_is_reproducible_from_the_seed(digits):
    x, y = digits
    results = []
    for _ in range(2):
        gf.set_seed(7)
        model = _compile(_mlp())
        model.fit(x[:300], y[:300], batch_size=32, epochs=2, verbose=0)
        results.append(model.get_weights())
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_tensors_train_like_the_same_arrays_and_stay_unchanged(digits):
    """Tensors are read through NumPy views (no copy): the same steps as the arrays."""
    x, y = digits[0][:200], digits[1][:200]
    tensors = tf.constant(x), tf.constant(y)
    results = []
    for data in ((x, y), tensors):
        gf.set_seed(3)
        model = _compile(_mlp())
        model.fit(*data, batch_size=32, epochs=2, verbose=0)
        model.evaluate(*data, verbose=0)
        results.append(model.get_weights())
    for a, b in zip(*results, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(tensors[0].numpy(), x)


def test_a_dataset_trains_like_the_same_arrays(digits):
    x, y = digits
    first = _compile(_mlp())
    first.build((None, 64))
    initial = first.get_weights()
    first.fit(x[:256], y[:256], batch_size=32, epochs=2, verbose=0, shuffle=False)

    second = _compile(_mlp())
    second.build((None, 64))
    second.set_weights(initial)
    dataset = tf.data.Dataset.from_tensor_slices((x[:256], y[:256])).batch(32)
    history = second.fit(dataset, epochs=2, verbose=0)
    for a, b in zip(first.get_weights(), second.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)
    assert len(history.history["accuracy"]) == 2
    loss, _ = second.evaluate(dataset, verbose=0)
    assert loss == pytest.approx(second.evaluate(x[:256], y[:256], verbose=0)[0], rel=1e-5)
    np.testing.assert_allclose(second.predict(dataset.map(lambda a, b: a), verbose=0),
                               second.predict(x[:256], verbose=0), atol=1e-6)


def test_repeating_dataset_needs_and_uses_steps_per_epoch(digits):
    x, y = digits
    model = _compile(_mlp())
    dataset = tf.data.Dataset.from_tensor_slices((x[:64], y[:64])).batch(16).repeat()
    with pytest.raises(ValueError, match="steps_per_epoch"):
        model.fit(dataset, epochs=1, verbose=0)
    model.fit(dataset, epochs=2, steps_per_epoch=3, verbose=0)
    assert int(model.optimizer.iterations) == 6


def test_sample_weights_of_zero_remove_samples_from_the_loss(digits):
    x, y = digits
    model = _compile(_mlp())
    model.build((None, 64))
    weights = np.r_[np.ones(50), np.zeros(50)].astype("float32")
    # Keras's reduction divides the weighted sum by the batch size.
    weighted = model.evaluate(x[:100], y[:100], sample_weight=weights, batch_size=100,
                              verbose=0, return_dict=True)
    first_half = model.evaluate(x[:50], y[:50], batch_size=50, verbose=0, return_dict=True)
    assert weighted["loss"] == pytest.approx(first_half["loss"] / 2, rel=1e-5)
    assert weighted["accuracy"] == pytest.approx(first_half["accuracy"], rel=1e-6)


def test_float64_models_train_in_float64(digits):
    x, y = digits
    model = _compile(_mlp(dtype="float64"))
    model.fit(x[:200], y[:200], batch_size=50, epochs=1, verbose=0)
    assert {v.dtype for v in model.variables} == {tf.float64}
    assert model.predict(x[:3], verbose=0).dtype == np.float64
    assert {v.dtype for v in model.optimizer.variables[2:]} == {tf.float64}
    # The Keras loss object given to compile was rebuilt to compute in float64 too.
    assert model.compile_state.loss_set.losses[None].dtype == "float64"


def test_plain_functions_serve_as_loss_and_metric():
    def half_squared_error(y_true, y_pred):
        return 0.5 * tf.reduce_mean(tf.square(y_true - y_pred), axis=-1)

    def max_error(y_true, y_pred):
        return tf.reduce_max(tf.abs(y_true - y_pred), axis=-1)

    model = gf.Sequential([layers.Dense(1, kernel_initializer="zeros")], input_shape=(2,))
    model.compile(optimizer="sgd", loss=half_squared_error, metrics=[max_error])
    x = np.array([[1.0, 0.0], [0.0, 1.0]], "float32")
    y = np.array([[2.0], [-4.0]], "float32")
    logs = model.evaluate(x, y, verbose=0, return_dict=True)
    # Zero weights predict 0: loss = mean(0.5 * [4, 16]) = 5, max_error = mean([2, 4]) = 3.
    assert logs == {"loss": pytest.approx(5.0), "max_error": pytest.approx(3.0)}


def test_evaluate_and_predict_return_keras_shapes(digits):
    x, y = digits
    model = gf.Sequential([layers.Dense(10)])
    model.compile(optimizer="sgd",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    loss_only = model.evaluate(x[:40], y[:40], verbose=0)
    assert isinstance(loss_only, float)
    assert list(model.evaluate(x[:40], y[:40], verbose=0, return_dict=True)) == ["loss"]
    assert model.predict(x[:41], batch_size=8, verbose=0).shape == (41, 10)
    assert model.predict(x[:41], batch_size=None, verbose=0).shape == (41, 10)


def test_keras_metrics_such_as_auc_precision_and_recall_work():
    x, y = gf.datasets.load_breast_cancer()
    x = (x - x.mean(0)) / x.std(0)
    model = gf.Sequential([layers.Dense(8, activation="relu"), layers.Dense(1)])
    model.compile(optimizer=optimizers.Adam(0.01),
                  loss=keras.losses.BinaryCrossentropy(from_logits=True),
                  metrics=["accuracy", "auc", "precision", keras.metrics.Recall(name="recall")])
    history = model.fit(x[:400], y[:400], epochs=5, verbose=0, validation_data=(x[400:], y[400:]))
    final = {k: v[-1] for k, v in history.history.items()}
    assert final["val_auc"] > 0.95 and final["val_accuracy"] > 0.9
    # With logits, "accuracy" thresholds at 0 and "auc" reads logits: check against numpy.
    logits = model.predict(x[400:], verbose=0)[:, 0]
    np.testing.assert_allclose(final["val_accuracy"], np.mean((logits > 0) == y[400:]), rtol=1e-6)
    precision = np.sum((logits > 0) & (y[400:] == 1)) / np.sum(logits > 0)
    np.testing.assert_allclose(final["val_precision"], precision, rtol=1e-5)


def test_a_dataset_for_validation_goes_with_any_batch_size(digits):
    x, y = digits
    model = _compile(_mlp())
    val = tf.data.Dataset.from_tensor_slices((x[:64], y[:64])).batch(16)
    history = model.fit(x[:128], y[:128], batch_size=16, validation_data=val, verbose=0)
    assert history.history["val_loss"][0] == pytest.approx(
        model.evaluate(x[:64], y[:64], verbose=0)[0], rel=1e-5)


def test_fixed_steps_per_epoch_walk_through_a_finite_dataset(digits):
    x, y = digits
    seen = []

    class Spy(gf.Layer):
        def call(self, inputs, training=False):
            if training:
                tf.py_function(lambda v: seen.append(int(v)), [inputs[0, 0]], [])
            return inputs

    model = gf.Sequential([Spy(), layers.Dense(10)])
    model.compile(optimizer="sgd",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=False)
    ids = np.arange(10, dtype="float32")[:, None] * np.ones((1, 64), "float32")
    dataset = tf.data.Dataset.from_tensor_slices((ids, y[:10])).batch(2)  # 5 batches
    with pytest.warns(UserWarning, match="ran out of data"):
        model.fit(dataset, epochs=4, steps_per_epoch=2, verbose=0)
    # As Keras 3: the epochs carry on through the data; the third ends with it (one batch),
    # and the fourth starts a new pass.
    assert seen == [0, 2, 4, 6, 8, 0, 2]


def _epoch_rows(feed, epoch):
    import itertools

    chunks = list(feed.chunks(epoch, itertools.repeat(2)))
    assert [c.first_batch for c in chunks] == list(
        itertools.accumulate([0] + [c.num_batches for c in chunks[:-1]]))
    return [list(row) for c in chunks for row in c.index_batches]


def test_steps_per_epoch_on_arrays_ends_epochs_where_a_pass_ends_as_keras():
    from graphfit.training.feeds import ArrayFeed

    # 7 samples in batches of 3: passes of [3, 3, 1]; 2 batches per epoch: as Keras 3, an
    # epoch of 2 batches, then one of the pass's last batch, then a new (reshuffled) pass.
    feed = ArrayFeed(np.zeros((7, 1)), None, None, 3, shuffle=True, seed=5, steps=2)
    with pytest.warns(UserWarning, match="not a multiple of steps_per_epoch=2"):
        rows = [_epoch_rows(feed, epoch) for epoch in range(6)]
    assert [len(r) for r in rows] == [2, 1] * 3 and feed.steps == 2
    for epoch in range(0, 6, 2):  # every pass holds each sample once, in a new order
        assert sorted(sum(rows[epoch] + rows[epoch + 1], [])) == list(range(7))
    assert rows[0] != rows[2]
    assert _epoch_rows(feed, 4) == rows[4]  # an epoch's batches follow from its number
    # Without steps: one pass per epoch, as before (the permutation of [seed, epoch]).
    plain = ArrayFeed(np.zeros((7, 1)), None, None, 3, shuffle=True, seed=5)
    order = np.random.default_rng([5, 1]).permutation(7)
    assert _epoch_rows(plain, 1) == [list(order[:3]), list(order[3:6]), list(order[6:])]


def test_a_full_batch_fit_is_reproducible_without_a_seed():
    # One batch holds every sample whatever the order: it is not shuffled, so two fits from
    # the same start agree bit for bit (the order only changed the rounding of the sums).
    from graphfit.training.feeds import ArrayFeed

    feed = ArrayFeed(np.zeros((7, 1)), None, None, None, shuffle=True, seed=5)
    assert _epoch_rows(feed, 3) == [list(range(7))]
    x = np.linspace(0.5, 4, 25)[:, None]
    y = 2.0 * np.exp(-0.7 * x) + 0.01 * np.sin(9 * x)
    fitted = []
    for _ in range(2):
        curve = layers.Formula("a*exp(-b*x)", params={"a": 1.0, "b": 0.1}, dtype="float64")
        model = gf.Sequential([curve], dtype="float64")
        model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse", jit_compile=False)
        model.fit(x, y, batch_size=None, epochs=30, verbose=0)
        fitted.append(curve.values())
    assert fitted[0] == fitted[1]


def test_steps_on_arrays_limit_fit_evaluate_and_predict_as_in_keras(digits):
    x, y = digits
    model = _compile(_mlp())
    model.fit(x[:100], y[:100], batch_size=10, epochs=2, steps_per_epoch=3, verbose=0)
    assert int(model.optimizer.iterations) == 6  # as keras.Model.fit counts them
    first_two = model.evaluate(x[:20], y[:20], batch_size=10, verbose=0)
    assert model.evaluate(x[:100], y[:100], batch_size=10, steps=2, verbose=0) == \
        pytest.approx(first_two, rel=1e-6)
    assert model.predict(x[:100], batch_size=10, steps=2, verbose=0).shape == (20, 10)
    with pytest.warns(UserWarning, match=r"steps=9 asks for more batches than x holds \(3 "):
        assert model.predict(x[:30], batch_size=10, steps=9, verbose=0).shape == (30, 10)
    with pytest.warns(UserWarning, match="one pass, as Keras does"):  # each sample counted once
        assert model.evaluate(x[:30], y[:30], batch_size=10, steps=9, verbose=0) == \
            pytest.approx(model.evaluate(x[:30], y[:30], batch_size=10, verbose=0), rel=1e-6)
    for data in (x[:30], tf.data.Dataset.from_tensor_slices(x[:30]).batch(10)):
        with pytest.raises(ValueError, match="steps must be a positive integer"):
            model.predict(data, steps=0, verbose=0)


def test_validation_steps_evaluate_the_same_first_batches_every_epoch(digits):
    x, y = digits
    model = gf.Sequential([layers.Dense(10)])
    model.compile(optimizer=optimizers.SGD(0.0), jit_compile=False,  # weights stay put
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(x[:40], y[:40], batch_size=10, epochs=3, validation_steps=1,
                        validation_data=(x[40:80], y[40:80]), verbose=0)
    first_batch = model.evaluate(x[40:50], y[40:50], verbose=0)
    assert history.history["val_loss"] == pytest.approx([first_batch] * 3, rel=1e-6)


def test_predict_steps_on_graphs_predicts_the_first_batches():
    graphs, _ = gf.datasets.make_graph_classes(24, seed=0, features="one_hot_degree")
    model = gf.GraphModel(
        inputs=["node_features", "senders", "receivers", "graph_index", "node_counts"],
        nodes=[gf.Node(layers.GINConv(4, name="gin"), ["node_features", "senders", "receivers"]),
               gf.Node(layers.SegmentPooling("sum", name="readout"),
                       ["gin", "graph_index", "node_counts"])],
        outputs="readout")
    every = model.predict(graphs, batch_size=8, verbose=0)
    np.testing.assert_allclose(model.predict(graphs, batch_size=8, steps=2, verbose=0),
                               every[:16], rtol=1e-6)


def test_auto_grouping_runs_single_steps_for_batch_callbacks(digits):
    x, y = digits

    class StopAtTen(gf.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.batches = []

        def on_train_batch_end(self, batch, logs=None):
            self.batches.append(batch)
            if batch == 9:
                self.model.stop_training = True

    model = _compile(_mlp())
    stopper = StopAtTen()
    model.fit(x[:640], y[:640], batch_size=8, epochs=3, callbacks=[stopper], verbose=0)
    assert stopper.batches == list(range(10)) and int(model.optimizer.iterations) == 10


def test_metrics_ignore_sample_weights_and_weighted_metrics_apply_them_as_in_keras():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 3)).astype("float32")
    y = rng.normal(size=(64, 1)).astype("float32")
    weights = rng.uniform(0, 2, size=64).astype("float32")
    ours = gf.Sequential([layers.Dense(1)], input_shape=(3,))
    ours.compile(loss="mse", metrics=["mae"], weighted_metrics=["mae"])
    theirs = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    theirs.compile(loss="mse", metrics=["mae"], weighted_metrics=["mae"])
    theirs.set_weights(ours.get_weights())
    ours_logs = ours.evaluate(x, y, sample_weight=weights, verbose=0, return_dict=True)
    theirs_logs = theirs.evaluate(x, y, sample_weight=weights, verbose=0, return_dict=True)
    assert set(ours_logs) == set(theirs_logs) == {"loss", "mae", "weighted_mae"}
    for key in ours_logs:
        assert ours_logs[key] == pytest.approx(theirs_logs[key], rel=1e-5)
    assert ours_logs["mae"] != pytest.approx(ours_logs["weighted_mae"], rel=1e-3)


def test_float64_losses_and_metrics_are_accumulated_in_float64():
    x = np.linspace(0, 1, 50)[:, None]
    y = np.exp(x) + 1e-9
    model = gf.Sequential([layers.Dense(1, kernel_initializer="zeros")], dtype="float64")
    model.compile(optimizer="sgd", loss="mse", metrics=["mae"])
    logs = model.evaluate(x, y, batch_size=7, verbose=0, return_dict=True)
    assert logs["loss"] == pytest.approx(np.mean(y**2), rel=1e-13)
    assert logs["mae"] == pytest.approx(np.mean(np.abs(y)), rel=1e-13)


def test_predict_before_compile_leaves_the_model_uncompiled(digits):
    x, y = digits
    model = _mlp()
    assert model.predict(x[:3], verbose=0).shape == (3, 10)
    assert not model.compiled
    with pytest.raises(RuntimeError, match="must be compiled before fit"):
        model.fit(x[:3], y[:3], verbose=0)


def test_fitting_several_models_in_a_loop_warns_of_no_retracing(digits):
    import logging

    x, y = digits
    logged = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: logged.append(record.getMessage())
    tf.get_logger().addHandler(handler)
    try:
        for units in range(1, 8):  # each model traces its own loops: no retracing of one
            model = gf.Sequential([layers.Dense(units), layers.Dense(10)])
            model.compile(optimizer="sgd", jit_compile=False,
                          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            model.fit(x[:64], y[:64], batch_size=32, epochs=1, verbose=0)
            model.predict(x[:64], verbose=0)
    finally:
        tf.get_logger().removeHandler(handler)
    assert not [m for m in logged if "retracing" in m], logged
