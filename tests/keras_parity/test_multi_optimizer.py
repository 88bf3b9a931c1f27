"""`MultiOptimizer` / `OptimizerMap` beside Keras 3.15.1's: the same model trained with
`keras.optimizers.MultiOptimizer` and graphfit's from the same weights ends with the same
weights; the goldens of keras/src/optimizers/multi_optimizer_test.py; Keras's refusals;
checkpoints, `.graphfit` files and recipes."""

from __future__ import annotations

import pathlib
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers
from graphfit.saving import checkpoints

from ..framework.training.script_results import script_results

KO = keras.optimizers
RNG = np.random.RandomState(3)
X = RNG.normal(size=(16, 3)).astype("float32")
Y = RNG.normal(size=(16, 1)).astype("float32")


def _variable(scope: str, value, name="kernel") -> tf.Variable:
    with tf.name_scope(scope):  # the path "scope/kernel", as Keras's backend.name_scope
        return tf.Variable(value, dtype=tf.float32, name=name)


def _keras_model():
    return keras.Sequential([keras.Input((3,)),
                             keras.layers.Dense(4, activation="tanh", name="dense_1"),
                             keras.layers.Dense(1, name="dense_2")])


def _graphfit_model(weights):
    model = gf.Sequential([layers.Dense(4, activation="tanh", name="dense_1"),
                           layers.Dense(1, name="dense_2")], input_shape=(3,))
    model.set_weights(weights)
    return model


def _pair(lib):
    """SGD with momentum by default, Adam for dense_1 (Keras's or graphfit's)."""
    return lib.MultiOptimizer(lib.OptimizerMap(
        lib.SGD(0.1, momentum=0.9), {".*dense_1/.*": lib.Adam(0.01)}))


@pytest.fixture(scope="module")
def keras_run():
    model = _keras_model()
    initial = model.get_weights()
    model.compile(optimizer=_pair(KO), loss="mse")
    model.fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    return initial, model


# ------------------------------------------------------------------ same numbers as Keras


@pytest.mark.parametrize("jit_compile, steps_per_execution", [(False, 1), (True, 3)])
def test_fit_gives_kerass_weights(keras_run, jit_compile, steps_per_execution):
    initial, reference = keras_run
    model = _graphfit_model(initial)
    model.compile(optimizer=_pair(optimizers), loss="mse", jit_compile=jit_compile,
                  steps_per_execution=steps_per_execution)
    model.fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0)
    for ours, theirs in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)
    assert not np.allclose(model.get_weights()[0], initial[0], atol=1e-3)
    assert int(model.optimizer.iterations) == int(reference.optimizer.iterations) == 8
    assert ([int(o.iterations) for o in model.optimizer.optimizers]
            == [int(o.iterations) for o in reference.optimizer.optimizers] == [8, 8])
    # Its own iterations, then each inner optimizer's variables (Keras also lists a
    # learning rate of its own, which graphfit's MultiOptimizer has not).
    names = [v.name.split(":")[0] for v in model.optimizer.variables]
    assert names[0] == "multi_optimizer/iterations"
    assert names[1:3] == ["adam/iterations", "adam/learning_rate"]


def test_under_a_loss_scale_optimizer_as_keras(keras_run):
    initial, _ = keras_run
    reference = _keras_model()
    reference.set_weights(initial)
    reference.compile(optimizer=KO.LossScaleOptimizer(_pair(KO), initial_scale=256.0),
                      loss="mse")
    reference.fit(X, Y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    model = _graphfit_model(initial)
    model.compile(optimizer=optimizers.LossScaleOptimizer(_pair(optimizers),
                                                          initial_scale=256.0), loss="mse")
    model.fit(X, Y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    for ours, theirs in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6)
    assert int(model.optimizer.iterations) == 4


# ------------------------------------------------------- Keras's multi_optimizer_test.py


def test_optimizer_map_matching():
    w_dense, w_conv = _variable("dense", [[1.0]]), _variable("conv", [[1.0]])
    w_other = tf.Variable([[1.0]], name="bias")
    adam, sgd, default = optimizers.Adam(1e-3), optimizers.SGD(1e-2), optimizers.RMSprop()
    opt_map = optimizers.OptimizerMap(default_optimizer=default)
    opt_map["^dense/.*"] = adam
    opt_map["^conv/.*"] = sgd
    assert opt_map(w_dense) is adam and opt_map(w_conv) is sgd and opt_map(w_other) is default
    conflict = optimizers.OptimizerMap(default_optimizer=default)
    conflict[".*kernel.*"] = adam
    conflict[".*dense.*"] = sgd
    with pytest.raises(ValueError, match="Multiple optimizers assigned to variable dense/kernel"):
        conflict(w_dense)


def test_optimizers_are_listed_map_first_then_default_and_routed():
    adam, sgd, default = optimizers.Adam(1e-3), optimizers.SGD(1e-2), optimizers.RMSprop(1e-4)
    opt_map = optimizers.OptimizerMap(default_optimizer=default)
    opt_map["^dense_1/.*"] = adam
    opt_map["^dense_2/.*"] = sgd
    multi = optimizers.MultiOptimizer(opt_map)
    w1, w2 = _variable("dense_1", [[1.0]]), _variable("dense_2", [[1.0]])
    w3 = _variable("other", [[1.0]])
    multi.build([w1, w2, w3])
    assert multi.optimizers == [adam, sgd, default]
    assert [multi.optimizer_of(w) for w in (w1, w2, w3)] == [adam, sgd, default]


def test_stateful_apply():
    w1, w2 = _variable("dense_1", [[2.0, 2.0]]), _variable("dense_2", [[3.0, 3.0]])
    w_fallback = _variable("other", [[4.0, 4.0]])
    opt_map = optimizers.OptimizerMap(default_optimizer=optimizers.SGD(0.0))
    opt_map["^dense_1/.*"] = optimizers.SGD(0.1)
    opt_map["^dense_2/.*"] = optimizers.SGD(1.0)
    multi = optimizers.MultiOptimizer(opt_map)
    multi.build([w1, w2, w_fallback])
    multi.apply([tf.constant([[1.0, 1.0]])] * 3, [w1, w2, w_fallback])
    np.testing.assert_allclose(w1.numpy(), [[1.9, 1.9]])
    np.testing.assert_allclose(w2.numpy(), [[2.0, 2.0]])
    np.testing.assert_allclose(w_fallback.numpy(), [[4.0, 4.0]])
    assert int(multi.iterations) == 1
    assert [int(o.iterations) for o in multi.optimizers] == [1, 1, 1]


def test_serialization_round_trip():
    opt_map = optimizers.OptimizerMap(default_optimizer=optimizers.RMSprop(1e-4))
    opt_map["^dense_1/.*"] = optimizers.Adam(1e-3)
    opt_map["^dense_2/.*"] = optimizers.SGD(1e-2)
    multi = optimizers.MultiOptimizer(opt_map, loss_scale_factor=2.0, name="multi")
    config = optimizers.serialize(multi)
    assert config["type"] == "MultiOptimizer"
    assert config["optimizer_map"]["optimizer_map"]["^dense_1/.*"]["type"] == "Adam"
    rebuilt = optimizers.deserialize(config)
    assert optimizers.serialize(rebuilt) == config
    assert [type(o).__name__ for o in rebuilt.optimizers] == ["Adam", "SGD", "RMSprop"]
    w1 = _variable("dense_1", [[1.0]])
    rebuilt.build([w1])
    assert type(rebuilt.optimizer_of(w1)).__name__ == "Adam"
    assert rebuilt.loss_scale_factor == 2.0 and rebuilt.name == "multi"
    # Keras's own serialized form ({class_name: OptimizerMap, config}) reads too.
    keras_config = KO.serialize(KO.MultiOptimizer(KO.OptimizerMap(
        KO.SGD(0.5), {"x/.*": KO.Adam(0.25)})))
    from_keras = optimizers.get(keras_config)
    assert [(type(o).__name__, float(o.learning_rate)) for o in from_keras.optimizers] == [
        ("Adam", 0.25), ("SGD", 0.5)]


def test_loss_scaling_and_gradient_unscaling():
    opt_map = optimizers.OptimizerMap(
        default_optimizer=optimizers.RMSprop(1e-4, loss_scale_factor=8.0))
    opt_map["^dense_1/.*"] = optimizers.Adam(1e-3, loss_scale_factor=3.0)
    multi = optimizers.MultiOptimizer(opt_map, loss_scale_factor=5.0)
    multi.build([_variable("dense_1", [[1.0]])])
    np.testing.assert_allclose(multi.scale_loss(tf.constant(2.0)), 10.0)
    assert [o.loss_scale_factor for o in multi.optimizers] == [5.0, 5.0]  # Keras overrides

    w = _variable("dense_1", [[2.0, 2.0]])
    sgd = optimizers.SGD(0.1, loss_scale_factor=2.0)
    opt_map = optimizers.OptimizerMap(default_optimizer=sgd)
    opt_map["^dense_1/.*"] = sgd
    multi = optimizers.MultiOptimizer(opt_map, loss_scale_factor=5.0)
    multi.apply([tf.constant([[10.0, 10.0]])], [w])
    np.testing.assert_allclose(w.numpy(), [[1.8, 1.8]])


def test_a_callable_map():
    adam, sgd = optimizers.Adam(1e-3), optimizers.SGD(1e-2)
    multi = optimizers.MultiOptimizer(
        lambda variable: adam if "dense_1" in variable.name else sgd)
    w1, w2 = _variable("dense_1", [[1.0]]), _variable("dense_2", [[1.0]])
    multi.build([w1, w2])
    assert multi.optimizers == [adam, sgd]
    multi.apply([tf.constant([[1.0]]), tf.constant([[1.0]])], [w1, w2])
    np.testing.assert_allclose(w2.numpy(), [[0.99]])
    with pytest.raises(ValueError, match="callable.*OptimizerMap"):
        multi.get_config()


def test_fit_golden_and_an_optimizer_without_variables_stays_at_zero():
    optimizer = optimizers.MultiOptimizer(optimizers.OptimizerMap(
        default_optimizer=optimizers.SGD(0.1),
        optimizer_map={".*dense_1/.*": optimizers.SGD(1e-3), ".*dense_2/.*": optimizers.SGD(1e-2)}))
    model = gf.Sequential([layers.Dense(2, kernel_initializer="ones", use_bias=False,
                                        name="dense_1"),
                           layers.Dense(1, kernel_initializer="ones", use_bias=False,
                                        name="dense_2")], input_shape=(1,))
    model.compile(loss="mse", optimizer=optimizer, run_eagerly=True)
    model.fit(np.ones((1, 1), "float32"), np.zeros((1, 1), "float32"), batch_size=1,
              epochs=1, verbose=0)
    np.testing.assert_allclose(model.layers[0].kernel.numpy(), [[0.996, 0.996]])
    np.testing.assert_allclose(model.layers[1].kernel.numpy(), [[0.96], [0.96]])
    assert int(optimizer.iterations) == 1
    assert [int(o.iterations) for o in optimizer.optimizers] == [1, 1, 0]


def test_nested_wrappers_are_refused_with_kerass_messages():
    sgd = optimizers.SGD(0.1)
    lso = optimizers.LossScaleOptimizer(optimizers.SGD(0.1))
    multi = optimizers.MultiOptimizer(optimizers.OptimizerMap(sgd))
    opt_map = optimizers.OptimizerMap(default_optimizer=sgd)
    with pytest.raises(ValueError, match="optimizer cannot be LossScaleOptimizer."):
        opt_map[".*"] = lso
    with pytest.raises(ValueError, match="optimizer cannot be MultiOptimizer."):
        opt_map[".*"] = multi
    # Found only at build (a callable map): Keras's build-time messages.
    w1, w2 = _variable("dense_1", [[1.0]]), _variable("dense_2", [[1.0]])
    routed = optimizers.MultiOptimizer(lambda v: lso if "dense_1" in v.name else multi)
    with pytest.raises(ValueError,
                       match="LossScaleOptimizer cannot be used inside an MultiOptimizer."):
        routed.build([w1])
    with pytest.raises(ValueError, match="MultiOptimizer cannot be used inside an MultiOptimizer."):
        routed.build([w2])
    with pytest.raises(ValueError, match="is not an Optimizer instance"):
        optimizers.MultiOptimizer(lambda v: "sgd").build([w1])


def test_bad_maps_raise_kerass_errors():
    sgd = optimizers.SGD(0.1)
    opt_map = optimizers.OptimizerMap(sgd)
    opt_map["a/.*"] = optimizers.Adam()
    with pytest.raises(ValueError, match="'a/.\\*' already exists in the OptimizerMap"):
        opt_map["a/.*"] = optimizers.SGD()
    with pytest.raises(ValueError, match="key must be a string"):
        opt_map[3] = optimizers.SGD()
    with pytest.raises(ValueError, match="optimizer must be a graphfit first-order Optimizer"):
        opt_map["b/.*"] = keras.optimizers.SGD()
    with pytest.raises(TypeError, match="default_optimizer must be a graphfit Optimizer"):
        optimizers.OptimizerMap(object())
    with pytest.raises(TypeError, match="optimizer_map must be a dictionary"):
        optimizers.OptimizerMap(sgd, [("a", sgd)])
    with pytest.raises(ValueError, match="optimizer_map must be an OptimizerMap"):
        optimizers.MultiOptimizer(sgd)
    with pytest.raises(AttributeError, match="cannot be accessed on a MultiOptimizer"):
        getattr(optimizers.MultiOptimizer(opt_map), "learning_rate")  # noqa: B009
    with pytest.raises(AttributeError, match="cannot be set on a MultiOptimizer"):
        optimizers.MultiOptimizer(opt_map).learning_rate = 0.1
    # Keras drops a LossScaleOptimizer's inner factor silently; graphfit refuses it, as for
    # every optimizer it wraps.
    with pytest.raises(ValueError, match="loss_scale_factor"):
        optimizers.LossScaleOptimizer(optimizers.MultiOptimizer(opt_map, loss_scale_factor=5.0))


def test_loss_scale_optimizer_golden():
    w1, w2 = _variable("dense_1", [[2.0, 2.0]]), _variable("dense_2", [[2.0, 2.0]])
    multi = optimizers.MultiOptimizer(optimizers.OptimizerMap(
        optimizers.SGD(0.1), {".*dense_1/.*": optimizers.SGD(0.1)}))
    lso = optimizers.LossScaleOptimizer(multi, initial_scale=10.0, dynamic_growth_steps=1000)
    lso.build([w1, w2])
    np.testing.assert_allclose(lso.scale_loss(tf.constant(2.0)), 20.0)
    lso.apply([tf.constant([[10.0, 10.0]])] * 2, [w1, w2])
    np.testing.assert_allclose(w1.numpy(), [[1.9, 1.9]])
    np.testing.assert_allclose(w2.numpy(), [[1.9, 1.9]])


# ------------------------------------------------------------- checkpoints, files, recipes


def _checkpointed_model(initial):
    model = _graphfit_model(initial)
    model.compile(optimizer=_pair(optimizers), loss="mse", jit_compile=True)
    return model


def test_resume_save_and_load(keras_run, tmp_path):
    initial, _ = keras_run

    def fit(model, folder, epochs, initial_epoch=0):
        model.fit(X, Y, batch_size=4, epochs=epochs, initial_epoch=initial_epoch, verbose=0,
                  callbacks=[gf.callbacks.ModelCheckpoint(str(folder), monitor="loss")])

    gf.set_seed(0)  # fit draws its shuffle seed: the same for both runs
    whole = _checkpointed_model(initial)
    fit(whole, tmp_path / "a", 4)
    gf.set_seed(0)
    half = _checkpointed_model(initial)
    fit(half, tmp_path / "b", 2)
    gf.set_seed(999)  # the checkpoint alone carries the run on
    resumed = _checkpointed_model([np.zeros_like(w) for w in initial])
    state = checkpoints.restore_latest(resumed, str(tmp_path / "b"))
    fit(resumed, tmp_path / "b", 4, initial_epoch=state["epoch"])
    for ours, theirs in zip([*resumed.variables, *resumed.optimizer.variables],
                            [*whole.variables, *whole.optimizer.variables]):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())

    path = str(tmp_path / "m.graphfit")
    whole.save(path)
    loaded = gf.models.load_model(path)
    assert type(loaded.optimizer).__name__ == "MultiOptimizer"
    for ours, theirs in zip(loaded.optimizer.variables, whole.optimizer.variables):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    for model in (whole, loaded):
        model.fit(X, Y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    for ours, theirs in zip(loaded.get_weights(), whole.get_weights()):
        np.testing.assert_array_equal(ours, theirs)
    shutil.rmtree(tmp_path / "a")


# ---------------------------------------------------- callbacks on each inner optimizer


def _two_sgd_model(names=("sgd", "sgd_1")):
    opt_1, opt_2 = optimizers.SGD(0.1, name=names[0]), optimizers.SGD(0.01, name=names[1])
    model = gf.Sequential([layers.Dense(2, kernel_initializer="ones", use_bias=False,
                                        name="dense_1"),
                           layers.Dense(1, kernel_initializer="ones", use_bias=False,
                                        name="dense_2")], input_shape=(1,))
    model.compile(loss="mse", optimizer=optimizers.MultiOptimizer(optimizers.OptimizerMap(
        default_optimizer=opt_2, optimizer_map={".*dense_1/.*": opt_1})))
    return model, opt_1, opt_2


def test_learning_rate_scheduler_and_reduce_lr_on_plateau_set_each_rate():
    model, opt_1, opt_2 = _two_sgd_model()
    scheduler = gf.callbacks.LearningRateScheduler(lambda epoch, lr: lr * 0.5)
    scheduler.set_model(model)
    scheduler.on_epoch_begin(epoch=1)
    np.testing.assert_allclose([float(opt_1.learning_rate), float(opt_2.learning_rate)],
                               [0.05, 0.005])

    model, opt_1, opt_2 = _two_sgd_model()
    reduce_lr = gf.callbacks.ReduceLROnPlateau(monitor="val_loss", factor=0.5, patience=1)
    reduce_lr.set_model(model)
    reduce_lr.on_train_begin()
    logs = {"val_loss": 1.0}
    reduce_lr.on_epoch_end(epoch=0, logs=logs)
    np.testing.assert_allclose([float(opt_1.learning_rate), float(opt_2.learning_rate)],
                               [0.1, 0.01])
    assert set(logs) == {"val_loss", "learning_rate_sgd", "learning_rate_sgd_1"}  # Keras's
    reduce_lr.on_epoch_end(epoch=1, logs={"val_loss": 1.0})
    np.testing.assert_allclose([float(opt_1.learning_rate), float(opt_2.learning_rate)],
                               [0.05, 0.005])

    model, opt_1, opt_2 = _two_sgd_model(("SGD", "SGD_1"))
    history = model.fit(np.ones((2, 1), "float32"), np.ones((2, 1), "float32"), epochs=2,
                        verbose=0, callbacks=[gf.callbacks.LearningRateScheduler([0.2, 0.3])])
    assert history.history["learning_rate_SGD"] == history.history["learning_rate_SGD_1"]
    np.testing.assert_allclose(history.history["learning_rate_SGD"], [0.2, 0.3])


def test_use_ema_on_one_inner_optimizer_finalizes_its_variables_only():
    model, _, _ = _two_sgd_model()
    ema = optimizers.SGD(0.1, use_ema=True, ema_momentum=0.5)
    model.compile(loss="mse", optimizer=optimizers.MultiOptimizer(optimizers.OptimizerMap(
        optimizers.SGD(0.1), {".*dense_1/.*": ema})))
    assert [type(c).__name__ for c in model.optimizer.fit_callbacks()] == [
        "FinalizeVariableValues"]
    model.fit(np.ones((2, 1), "float32"), np.zeros((2, 1), "float32"), epochs=2, verbose=0)
    kernel = model.layers[0].kernel
    np.testing.assert_array_equal(kernel.numpy(), ema.moving_average.average_of(kernel).numpy())


def test_swap_ema_weights_swaps_the_ema_optimizers_variables_only():
    model, _, _ = _two_sgd_model()
    ema = optimizers.SGD(0.1, use_ema=True, ema_momentum=0.9)
    model.compile(loss="mse", optimizer=optimizers.MultiOptimizer(optimizers.OptimizerMap(
        optimizers.SGD(0.1), {".*dense_1/.*": ema})))
    model.train_on_batch(np.ones((1, 1), "float32"), np.ones((1, 1), "float32"))
    dense_1, dense_2 = model.layers[0].kernel, model.layers[1].kernel
    dense_1.assign([[2.0, 2.0]])
    dense_2.assign([[3.0], [3.0]])
    ema.moving_average.average_of(dense_1).assign([[9.0, 9.0]])
    swap = gf.callbacks.SwapEMAWeights()
    swap.set_model(model)
    swap.on_test_begin()  # Keras's golden: dense_1 <-> its average; dense_2 untouched
    np.testing.assert_array_equal(dense_1.numpy(), [[9.0, 9.0]])
    np.testing.assert_array_equal(ema.moving_average.average_of(dense_1).numpy(), [[2.0, 2.0]])
    np.testing.assert_array_equal(dense_2.numpy(), [[3.0], [3.0]])
    swap.on_test_end()
    np.testing.assert_array_equal(dense_1.numpy(), [[2.0, 2.0]])
    np.testing.assert_array_equal(ema.moving_average.average_of(dense_1).numpy(), [[9.0, 9.0]])
    without = _two_sgd_model()[0]
    swap.set_model(without)
    with pytest.raises(ValueError, match="on at least one of a MultiOptimizer's"):
        swap.on_test_begin()


# ---------------------------------------------------------------------- under MirroredStrategy

TWO_CPU_SCRIPT = pathlib.Path(__file__).with_name("multi_optimizer_mirrored_script.py")


def test_under_mirrored_strategy_as_on_one_device(two_cpu_results):
    result = script_results(TWO_CPU_SCRIPT, two_cpu_results)
    assert result["weights"] < 1e-6 and result["loss"] < 1e-5, result
    assert result["iterations"] == [12, 12]


def test_tensorboard_logs_each_inner_optimizers_rate(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    model, _, _ = _two_sgd_model(("SGD", "SGD_1"))  # Keras's golden: the names as keys
    board = gf.callbacks.TensorBoard(str(tmp_path))
    board.set_model(model)
    board.on_epoch_end(0, {"loss": 1.0})
    board.on_train_end()
    events = EventAccumulator(str(tmp_path / "train"), size_guidance={"tensors": 0})
    events.Reload()
    rates = {tag: float(tf.make_ndarray(events.Tensors(tag)[0].tensor_proto))
             for tag in events.Tags()["tensors"] if tag.startswith("learning_rate")}
    assert rates.keys() == {"learning_rate_SGD", "learning_rate_SGD_1"}
    np.testing.assert_allclose([rates["learning_rate_SGD"], rates["learning_rate_SGD_1"]],
                               [0.1, 0.01])
