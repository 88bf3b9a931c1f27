"""Optimizer state as values (get_weights / set_weights in Keras's variables order), configs
with Keras's base arguments, optimizers.get / serialize / deserialize, callable learning
rates and loss_scale_factor, each against Keras; the base arguments on every registered
first-order optimizer."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers
from graphfit.core.registry import OPTIMIZERS

RNG = np.random.RandomState(2)
X = RNG.normal(size=(24, 3)).astype("float32")
Y = (X @ RNG.normal(size=(3, 2))).astype("float32")
GRADS = [[RNG.normal(size=(3, 2)).astype("float32"), RNG.normal(size=(2,)).astype("float32")]
         for _ in range(6)]
INIT = [RNG.normal(size=(3, 2)).astype("float32"), RNG.normal(size=(2,)).astype("float32")]
BASE = dict(use_ema=True, ema_momentum=0.9, gradient_accumulation_steps=2)


def _step(optimizer, variables, grads):
    optimizer.apply_gradients(zip([tf.constant(g) for g in grads], variables))


def test_variables_are_in_keras_order():
    ours, theirs = [tf.Variable(v, name=n) for v, n in zip(INIT, ("kernel", "bias"))], [
        keras.Variable(v, name=n) for v, n in zip(INIT, ("kernel", "bias"))]
    ours_opt, keras_opt = optimizers.Adam(0.1, **BASE), keras.optimizers.Adam(0.1, **BASE)
    ours_opt.build(ours)
    keras_opt.build(theirs)

    def kinds(variables):
        return [v.name.split(":")[0].split("/")[-1].split("_")[-1] for v in variables]

    assert kinds(ours_opt.variables)[1:] == kinds(keras_opt.variables)[1:] == [
        "rate", "average", "average", "accumulator", "accumulator",
        "momentum", "velocity", "momentum", "velocity"]
    assert kinds(ours_opt.variables)[0].startswith(kinds(keras_opt.variables)[0])


def test_set_weights_from_keras_then_training_goes_on_as_keras():
    theirs = [keras.Variable(v) for v in INIT]
    keras_opt = keras.optimizers.Adam(0.1, **BASE)
    for g in GRADS[:3]:
        _step(keras_opt, theirs, g)
    ours = [tf.Variable(v.numpy()) for v in theirs]
    ours_opt = optimizers.Adam(0.1, **BASE)
    ours_opt.build(ours)
    ours_opt.set_weights([v.numpy() for v in keras_opt.variables])
    assert int(ours_opt.iterations) == int(keras_opt.iterations) == 1
    for g in GRADS[3:]:
        _step(keras_opt, theirs, g)
        _step(ours_opt, ours, g)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    for a, b in zip(ours_opt.get_weights(), [v.numpy() for v in keras_opt.variables]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_set_weights_refuses_a_bad_count_or_shape_and_assigns_nothing():
    variables = [tf.Variable(v) for v in INIT]
    opt = optimizers.SGD(0.1, momentum=0.9)
    with pytest.raises(ValueError, match="call optimizer.build"):
        opt.set_weights([np.zeros(())] * 4)
    opt.build(variables)
    weights = opt.get_weights()
    with pytest.raises(ValueError, match="received 3 arrays for the 4 variables"):
        opt.set_weights(weights[:3])
    bad = [np.int64(5), 0.5, np.ones((2, 3)), np.ones((2,))]
    with pytest.raises(ValueError, match=r"has shape \(3, 2\); the array given for it has "
                                         r"shape \(2, 3\)"):
        opt.set_weights(bad)
    assert int(opt.iterations) == 0


def test_get_weights_through_loss_scale_optimizer():
    variables = [tf.Variable(v) for v in INIT]
    opt = optimizers.LossScaleOptimizer(optimizers.SGD(0.1, momentum=0.9, **BASE))
    _step(opt, variables, [g * 2.0**15 for g in GRADS[0]])
    weights = opt.get_weights()
    assert len(weights) == len(opt.inner_optimizer.variables) + 2
    assert weights[-2] == 2.0**15 and int(opt.iterations) == 0  # accumulated only
    twin = optimizers.LossScaleOptimizer(optimizers.SGD(0.1, momentum=0.9, **BASE))
    twin.build(variables)
    twin.set_weights(weights)
    for a, b in zip(twin.get_weights(), weights):
        np.testing.assert_array_equal(a, b)


def test_config_round_trip_and_keras_configs():
    opt = optimizers.Adam(0.01, use_ema=True, ema_momentum=0.9, ema_overwrite_frequency=5,
                          loss_scale_factor=8.0, gradient_accumulation_steps=3)
    config = opt.get_config()
    keras_config = keras.optimizers.Adam(0.01, use_ema=True, ema_momentum=0.9,
                                         ema_overwrite_frequency=5, loss_scale_factor=8.0,
                                         gradient_accumulation_steps=3).get_config()
    for key in optimizers.optimizer_state.BASE_ARGUMENTS:
        assert config[key] == keras_config[key], key
    assert optimizers.Adam.from_config(config).get_config() == config
    from_keras = optimizers.get({"class_name": "Adam", "config": keras_config})
    assert from_keras.gradient_accumulation_steps == 3 and from_keras.use_ema
    serialized = keras.optimizers.serialize(keras.optimizers.SGD(0.2, use_ema=True))
    assert optimizers.deserialize(serialized).get_config()["use_ema"] is True
    assert optimizers.deserialize(optimizers.serialize(opt)).get_config() == config


def test_get_accepts_name_config_instance_and_none():
    assert optimizers.get(None) is None and keras.optimizers.get(None) is None
    opt = optimizers.SGD()
    assert optimizers.get(opt) is opt
    assert isinstance(optimizers.get("adam"), optimizers.Adam)
    assert optimizers.get({"type": "Adam", "use_ema": True}).use_ema
    with pytest.raises(ValueError, match="deserialize\\(\\) takes an optimizer config"):
        optimizers.deserialize("adam")


def test_callable_learning_rate():
    rate = tf.Variable(0.1)
    ours = [tf.Variable(v) for v in INIT]
    theirs = [keras.Variable(v) for v in INIT]
    ours_opt = optimizers.Adam(lambda: rate * 1.0)
    keras_opt = keras.optimizers.Adam(lambda: rate * 1.0)

    @tf.function
    def step(g0, g1):
        ours_opt.apply_gradients(zip([g0, g1], ours))

    for i, g in enumerate(GRADS):
        rate.assign(0.1 / (i + 1))  # read at every execution: no retrace
        step(*[tf.constant(x) for x in g])
        _step(keras_opt, theirs, g)
    assert step.experimental_get_tracing_count() <= 2
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6, atol=1e-7)
    assert float(ours_opt.learning_rate) == pytest.approx(0.1 / 6)
    with pytest.raises(ValueError, match="Python callable as its learning_rate"):
        ours_opt.get_config()
    with pytest.raises(TypeError, match="cannot be set to a number"):
        ours_opt.learning_rate = 0.5


def test_loss_scale_factor_fit_matches_keras():
    keras.utils.set_random_seed(4)
    theirs = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    ours = gf.Sequential([layers.Dense(2)], input_shape=(3,))
    ours.set_weights(theirs.get_weights())
    ours.compile(optimizer=optimizers.SGD(0.05, loss_scale_factor=64.0), loss="mse")
    theirs.compile(optimizer=keras.optimizers.SGD(0.05, loss_scale_factor=64.0), loss="mse")
    ours_loss = ours.fit(X, Y, batch_size=8, shuffle=False, verbose=0).history["loss"]
    theirs_loss = theirs.fit(X, Y, batch_size=8, shuffle=False, verbose=0).history["loss"]
    np.testing.assert_allclose(ours_loss, theirs_loss, rtol=1e-6)  # the unscaled loss
    for a, b in zip(ours.get_weights(), theirs.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="loss would be scaled twice"):
        optimizers.LossScaleOptimizer(optimizers.SGD(loss_scale_factor=2.0))
    with pytest.raises(ValueError, match="loss_scale_factor must be a positive float"):
        optimizers.SGD(loss_scale_factor=-1.0)


def _first_order_names():
    names = []
    for name in OPTIMIZERS.names():
        cls = OPTIMIZERS.get(name)
        if isinstance(cls, type) and issubclass(cls, optimizers.Optimizer):
            names.append(name)
    return names


@pytest.mark.parametrize("name", _first_order_names())
def test_every_first_order_optimizer_takes_the_base_arguments(name):
    """From a config, whatever its constructor names: EMA, accumulation, state as values."""
    try:
        opt = optimizers.get({"type": name, "use_ema": True, "gradient_accumulation_steps": 2})
    except TypeError:
        pytest.skip(f"{name} needs constructor arguments")
    variables = [tf.Variable(v) for v in INIT]
    for g in GRADS[:4]:
        _step(opt, variables, g)
    assert int(opt.iterations) == 2
    assert len(opt.moving_average.averages) == 2
    twin = optimizers.get(optimizers.serialize(opt))
    twin.build([tf.Variable(v) for v in INIT])
    twin.set_weights(opt.get_weights())
    for a, b in zip(twin.get_weights(), opt.get_weights()):
        np.testing.assert_array_equal(a, b)
