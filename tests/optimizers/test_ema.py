"""use_ema: Keras's averages (bare apply_gradients and model.fit, with its end-of-fit
finalization), SwapEMAWeights equal to evaluating the averages set by hand and to Keras's
callback, checkpoints and model.save, LossScaleOptimizer, and the refusals."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import callbacks, layers, optimizers

RNG = np.random.RandomState(1)
X = RNG.normal(size=(32, 3)).astype("float32")
Y = (np.tanh(X @ RNG.normal(size=(3, 2))) + 0.1 * RNG.normal(size=(32, 2))).astype("float32")
XV, YV = X[:12] + 0.1, Y[:12]
GRADS = [[RNG.normal(size=(3, 2)).astype("float32"), RNG.normal(size=(2,)).astype("float32")]
         for _ in range(7)]
INIT = [RNG.normal(size=(3, 2)).astype("float32"), RNG.normal(size=(2,)).astype("float32")]


@pytest.mark.parametrize("name,kwargs", [
    ("SGD", dict(learning_rate=0.1, momentum=0.9, use_ema=True, ema_momentum=0.8)),
    ("Adam", dict(learning_rate=0.05, use_ema=True, ema_overwrite_frequency=3)),
    ("Adam", dict(learning_rate=0.05, use_ema=True, ema_overwrite_frequency=2,
                  gradient_accumulation_steps=2)),
])
def test_apply_gradients_matches_keras(name, kwargs):
    ours, theirs = [tf.Variable(v) for v in INIT], [keras.Variable(v) for v in INIT]
    ours_opt = getattr(optimizers, name)(**kwargs)
    keras_opt = getattr(keras.optimizers, name)(**kwargs)
    for g in GRADS:
        ours_opt.apply_gradients(zip([tf.constant(x) for x in g], ours))
        keras_opt.apply_gradients(zip([tf.constant(x) for x in g], theirs))
        for a, b in zip(ours, theirs):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        for a, b in zip(ours_opt.get_weights(), [v.numpy() for v in keras_opt.variables]):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    ours_opt.finalize_variable_values(ours)
    keras_opt.finalize_variable_values(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_first_step_average_is_the_variable_and_constraints_come_after():
    w = tf.Variable([1.0, -1.0], constraint=lambda v: tf.maximum(v, 0.0))
    opt = optimizers.SGD(1.0, use_ema=True)
    opt.apply_gradients([(tf.constant([0.5, 0.5]), w)])
    # Keras averages the updated value, then projects the variable.
    assert opt.moving_average.average_of(w).numpy().tolist() == [0.5, -1.5]
    assert w.numpy().tolist() == [0.5, 0.0]


def _models(seed=5):
    keras.utils.set_random_seed(seed)
    theirs = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="tanh"),
                               keras.layers.Dense(2)])
    ours = gf.Sequential([layers.Dense(4, activation="tanh"), layers.Dense(2)], input_shape=(3,))
    ours.set_weights(theirs.get_weights())
    return ours, theirs


class _AveragesAtEpochEnd(callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.seen = []

    def on_epoch_end(self, epoch, logs=None):
        self.seen.append([a.numpy().copy() for a in self.model.optimizer.moving_average.averages])


@pytest.fixture(scope="module")
def swapped_runs():
    """The same fit (Adam, use_ema, validation each epoch) through graphfit and Keras, both
    with SwapEMAWeights, and graphfit's once more without it."""
    kwargs = dict(learning_rate=0.03, use_ema=True, ema_momentum=0.7)
    ours, theirs = _models()
    ours.compile(optimizer=optimizers.Adam(**kwargs), loss="mse", jit_compile=True,
                 steps_per_execution=2)
    theirs.compile(optimizer=keras.optimizers.Adam(**kwargs), loss="mse", jit_compile=False)
    recorder = _AveragesAtEpochEnd()
    ours_history = ours.fit(X, Y, batch_size=8, epochs=3, shuffle=False, verbose=0,
                            validation_data=(XV, YV),
                            callbacks=[callbacks.SwapEMAWeights(), recorder])
    keras_history = theirs.fit(X, Y, batch_size=8, epochs=3, shuffle=False, verbose=0,
                               validation_data=(XV, YV),
                               callbacks=[keras.callbacks.SwapEMAWeights()])
    plain, _ = _models()
    plain.compile(optimizer=optimizers.Adam(**kwargs), loss="mse")
    plain.fit(X, Y, batch_size=8, epochs=3, shuffle=False, verbose=0)
    return dict(ours=ours, theirs=theirs, plain=plain, recorder=recorder,
                ours_history=ours_history.history, keras_history=keras_history.history)


def test_fit_finalizes_the_average_as_keras(swapped_runs):
    ours, theirs = swapped_runs["ours"], swapped_runs["theirs"]
    for a, b in zip(ours.get_weights(), theirs.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    averages = ours.optimizer.moving_average.averages
    for weight, average in zip(ours.get_weights(), averages):
        np.testing.assert_array_equal(weight, average.numpy())


def test_validation_under_swap_equals_the_averages_set_by_hand(swapped_runs):
    by_hand, _ = _models()
    by_hand.compile(loss="mse")
    for epoch, averages in enumerate(swapped_runs["recorder"].seen):
        by_hand.set_weights(averages)
        expected = by_hand.evaluate(XV, YV, verbose=0, return_dict=True)["loss"]
        assert swapped_runs["ours_history"]["val_loss"][epoch] == pytest.approx(expected,
                                                                                rel=1e-6)
    np.testing.assert_allclose(swapped_runs["ours_history"]["val_loss"],
                               swapped_runs["keras_history"]["val_loss"], rtol=1e-5)


def test_swapping_does_not_change_training(swapped_runs):
    for a, b in zip(swapped_runs["ours"].get_weights(), swapped_runs["plain"].get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_swap_on_epoch_shows_later_callbacks_the_average():
    ours, _ = _models()
    ours.compile(optimizer=optimizers.SGD(0.1, use_ema=True, ema_momentum=0.5), loss="mse")
    seen = []
    weights_at_end = callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: seen.append(
            (ours.get_weights(), [a.numpy() for a in ours.optimizer.moving_average.averages])))
    ours.fit(X, Y, batch_size=16, epochs=2, verbose=0, shuffle=False,
             callbacks=[callbacks.SwapEMAWeights(swap_on_epoch=True), weights_at_end])
    raw_first_epoch = seen[0][1]  # swapped: the averages hold the raw weights
    assert not all(np.array_equal(a, b) for a, b in zip(seen[0][0], raw_first_epoch))
    final = ours.get_weights()
    for a, b in zip(final, seen[-1][0]):  # fit ends with the average in the model
        np.testing.assert_array_equal(a, b)
    for a, b in zip(final, ours.optimizer.moving_average.averages):
        np.testing.assert_array_equal(a, b.numpy())


def test_checkpoint_keeps_the_averages_and_saved_model_holds_them(tmp_path):
    ours, _ = _models()
    ours.compile(optimizer=optimizers.Adam(0.05, use_ema=True), loss="mse")
    ours.fit(X, Y, batch_size=16, epochs=1, verbose=0)
    optimizer = ours.optimizer
    path = tf.train.Checkpoint(optimizer=optimizer).write(str(tmp_path / "ckpt"))
    restored = optimizers.Adam(0.05, use_ema=True)
    tf.train.Checkpoint(optimizer=restored).read(path)  # before build: deferred
    restored.build(ours.trainable_variables)
    for a, b in zip(restored.get_weights(), optimizer.get_weights()):
        np.testing.assert_array_equal(a, b)
    ours.save(str(tmp_path / "model.graphfit"))
    loaded = gf.saving.load_model(str(tmp_path / "model.graphfit"))
    for a, b in zip(loaded.get_weights(), optimizer.moving_average.averages):
        np.testing.assert_array_equal(a, b.numpy())  # Keras: the finalized weights


def test_under_loss_scale_optimizer():
    ours, theirs = _models()
    ours.compile(optimizer=optimizers.LossScaleOptimizer(
        optimizers.SGD(0.05, momentum=0.9, use_ema=True, ema_momentum=0.6),
        initial_scale=2.0**6), loss="mse", jit_compile=False)
    theirs.compile(optimizer=keras.optimizers.LossScaleOptimizer(
        keras.optimizers.SGD(0.05, momentum=0.9, use_ema=True, ema_momentum=0.6),
        initial_scale=2.0**6), loss="mse", jit_compile=False)
    for model in (ours, theirs):
        model.fit(X, Y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(ours.get_weights(), theirs.get_weights()):  # both finalized
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert ours.optimizer.moving_average is ours.optimizer.inner_optimizer.moving_average


def test_refusals():
    with pytest.raises(ValueError, match=r"`ema_momentum` must be in the range \[0, 1\]"):
        optimizers.SGD(use_ema=True, ema_momentum=1.5)
    with pytest.raises(ValueError, match="`ema_overwrite_frequency` must be an integer >= 1"):
        optimizers.SGD(use_ema=True, ema_overwrite_frequency=0)
    optimizers.SGD(ema_momentum=1.5)  # as Keras: checked only with use_ema
    with pytest.raises(ValueError, match="LevenbergMarquardt does not take use_ema"):
        optimizers.get({"type": "LevenbergMarquardt", "use_ema": True})
    for key, value in (("use_ema", True), ("gradient_accumulation_steps", 2),
                       ("loss_scale_factor", 2.0), ("ema_momentum", 0.9)):
        with pytest.raises(ValueError, match=f"LevenbergMarquardt does not take {key}: it is "
                                             "an argument of first-order optimizers"):
            optimizers.LevenbergMarquardt(**{key: value})  # not a bare TypeError
    with pytest.raises(TypeError, match="unexpected keyword argument 'dampin'"):
        optimizers.LevenbergMarquardt(dampin="identity")
    lm_model, _ = _models()
    lm_model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    with pytest.raises(ValueError, match="LevenbergMarquardt keeps no moving average"):
        callbacks.SwapEMAWeights().check_model(lm_model)
    model, _ = _models()
    model.compile(optimizer="sgd", loss="mse")
    with pytest.raises(ValueError, match="SwapEMAWeights must be used when `use_ema=True`"):
        model.evaluate(X, Y, verbose=0, callbacks=[callbacks.SwapEMAWeights()])


@pytest.mark.parametrize("backup_first", [False, True])
def test_swap_on_epoch_resumed_fit_equals_an_uninterrupted_one(tmp_path, backup_first):
    """A BackupAndRestore checkpoint written while the averages are swapped in (after
    SwapEMAWeights's on_epoch_end) records that they are, so the resumed fit swaps back at its
    first epoch, as the uninterrupted fit does, whichever order the two callbacks come in."""
    def fit(epochs, backup_dir=None):
        model, _ = _models()
        model.compile(optimizer=optimizers.Adam(0.05, use_ema=True, ema_momentum=0.5),
                      loss="mse")
        cbs = [callbacks.SwapEMAWeights(swap_on_epoch=True)]
        if backup_dir is not None:
            backup = callbacks.BackupAndRestore(str(backup_dir), delete_checkpoint=False)
            cbs = [backup, *cbs] if backup_first else [*cbs, backup]
        history = model.fit(X, Y, batch_size=8, epochs=epochs, shuffle=False, verbose=0,
                            validation_data=(XV, YV), callbacks=cbs)
        return model, history.history

    whole, whole_history = fit(3)
    fit(1, tmp_path)
    resumed, resumed_history = fit(3, tmp_path)
    np.testing.assert_allclose(resumed_history["loss"], whole_history["loss"][1:], rtol=1e-6)
    np.testing.assert_allclose(resumed_history["val_loss"], whole_history["val_loss"][1:],
                               rtol=1e-6)
    for a, b in zip(resumed.get_weights(), whole.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    for a, b in zip(resumed.optimizer.get_weights(), whole.optimizer.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
