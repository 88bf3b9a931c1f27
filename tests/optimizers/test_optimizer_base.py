"""The Optimizer base class: minimize, missing and sparse gradients, learning rates, get()."""

import doctest
import importlib
import re
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from graphfit import optimizers
from graphfit.core.registry import OPTIMIZERS

# ------------------------------------------------------------------------------- minimize

def test_minimize_returns_loss_and_aux_unchanged():
    w = tf.Variable([1.0, 2.0])
    aux = {"predictions": "anything"}
    loss, returned = optimizers.SGD(0.1).minimize(lambda: (tf.reduce_sum(w), aux), [w])
    assert returned is aux
    assert float(loss) == 3.0  # the loss before the update
    np.testing.assert_allclose(w.numpy(), [0.9, 1.9])


def test_minimize_watches_exactly_the_given_variables():
    # A non-trainable variable in the list is still trained (watched explicitly), and a
    # variable outside the list is left alone without a missing-gradient warning.
    listed = tf.Variable(1.0, trainable=False)
    other = tf.Variable(1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        optimizers.SGD(0.5).minimize(lambda: (listed * other, None), [listed])
    assert float(listed) == 0.5 and float(other) == 1.0


def test_minimize_requires_a_pair():
    w = tf.Variable(1.0)
    with pytest.raises(TypeError, match=r"loss_fn must return a pair \(loss, aux\)"):
        optimizers.SGD().minimize(lambda: w * w, [w])


def test_built_for_says_whether_build_would_create_anything():
    w, b = tf.Variable([1.0, 2.0]), tf.Variable(0.0)
    adam, plain = optimizers.Adam(0.1), optimizers.SGD(0.1)  # plain SGD keeps no slots
    for optimizer in (adam, plain):
        assert not optimizer.built_for([w])
        optimizer.build([w])
        assert optimizer.built_for([w]) and not optimizer.built_for([w, b])
        assert optimizer.built_for([])
    assert adam.get_slot(w, "momentum") is not None  # what built_for stands for: its slots
    # The base class cannot tell what a subclass's build creates: it says no.
    assert not optimizers.LevenbergMarquardt().built_for([w])


def test_missing_gradients_warn_once_per_trace_and_skip_the_variable():
    used, unused = tf.Variable(1.0, name="used"), tf.Variable(1.0, name="unused")
    optimizer = optimizers.Adam(0.1)
    optimizer.build([used, unused])  # built before tracing: one trace

    @tf.function
    def step():
        return optimizer.minimize(lambda: (used * used, None), [used, unused])

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            step()
    messages = [str(w.message) for w in caught if "Gradients do not exist" in str(w.message)]
    assert len(messages) == step.experimental_get_tracing_count() == 1
    assert "unused:0" in messages[0] and "'used:0'" not in messages[0]
    assert float(unused) == 1.0 and float(used) < 1.0
    assert int(optimizer.iterations) == 3


def test_no_gradient_at_all_is_an_error():
    w = tf.Variable(1.0, name="lonely")
    with pytest.raises(ValueError, match="No gradients provided for any variable.*lonely"):
        optimizers.SGD().apply_gradients([(None, w)])


def test_sparse_gradients_are_applied_as_dense():
    table, dense_copy = tf.Variable(np.ones((4, 2))), tf.Variable(np.ones((4, 2)))
    sparse_opt, dense_opt = optimizers.Adam(0.1), optimizers.Adam(0.1)
    for _ in range(2):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.gather(table, [0, 2]) ** 2)
        gradient = tape.gradient(loss, table)
        assert isinstance(gradient, tf.IndexedSlices)
        sparse_opt.apply_gradients([(gradient, table)])
        dense_opt.apply_gradients([(tf.convert_to_tensor(gradient), dense_copy)])
    np.testing.assert_array_equal(table.numpy(), dense_copy.numpy())
    assert table.numpy()[1].tolist() == [1.0, 1.0] and table.numpy()[0, 0] < 1.0


def test_variable_constraint_is_applied_after_the_update():
    w = tf.Variable([0.5, 0.5], constraint=lambda x: tf.clip_by_value(x, 0.0, 1.0))
    optimizers.SGD(1.0).apply_gradients([(tf.constant([1.0, -1.0]), w)])
    assert w.numpy().tolist() == [0.0, 1.0]


def test_build_accepts_keras_variables():
    w = keras.Variable([1.0, 2.0])
    optimizer = optimizers.SGD(0.1, momentum=0.5)
    optimizer.apply_gradients([(tf.constant([1.0, 1.0]), w)])
    np.testing.assert_allclose(np.asarray(w), [0.9, 1.9])
    assert optimizer.get_slot(w, "momentum").shape == (2,)


def test_get_slot_before_build_says_how_to_fix():
    with pytest.raises(ValueError, match=r"Call optimizer.build\(variables\)"):
        optimizers.Adam().get_slot(tf.Variable(1.0), "momentum")


# ------------------------------------------------------------------------ weight decay

def test_exclude_from_weight_decay_matches_keras():
    def train(optimizer):
        kernel, bias = tf.Variable([1.0, -1.0], name="kernel"), tf.Variable([1.0], name="bias")
        optimizer.exclude_from_weight_decay(var_names=["bias"])
        for _ in range(3):
            optimizer.apply_gradients(
                [(tf.constant([0.1, 0.1]), kernel), (tf.constant([0.1]), bias)]
            )
        return kernel.numpy(), bias.numpy()

    ours = train(optimizers.SGD(0.1, weight_decay=0.5))
    theirs = train(keras.optimizers.SGD(0.1, weight_decay=0.5))
    for got, want in zip(ours, theirs):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    assert ours[1].tolist() == pytest.approx([0.97])  # no decay: 1 - 3 * 0.1 * 0.1


# ------------------------------------------------------------------------ learning rate

@pytest.mark.parametrize("jit_compile", [False, True])
def test_setting_the_learning_rate_takes_effect_without_retracing(jit_compile):
    w = tf.Variable(0.0)
    optimizer = optimizers.SGD(0.1)
    optimizer.build([w])  # built before tracing, so tf.function traces exactly once

    @tf.function(jit_compile=jit_compile)
    def step():
        return optimizer.minimize(lambda: (w, None), [w])  # gradient 1: w -= lr

    step()
    step()
    optimizer.learning_rate = 0.5
    step()
    optimizer.learning_rate = tf.constant(0.25)
    step()
    assert float(w) == pytest.approx(-(0.1 + 0.1 + 0.5 + 0.25))
    assert step.experimental_get_tracing_count() == 1
    assert float(optimizer.learning_rate) == 0.25


def test_schedule_is_evaluated_at_iterations():
    schedule = keras.optimizers.schedules.ExponentialDecay(0.4, decay_steps=1, decay_rate=0.5)
    w = tf.Variable(0.0)
    optimizer = optimizers.SGD(schedule)
    rates = []
    for _ in range(3):
        rates.append(float(optimizer.learning_rate))
        optimizer.apply_gradients([(tf.constant(1.0), w)])
    assert rates == pytest.approx([0.4, 0.2, 0.1])
    assert float(w) == pytest.approx(-0.7)


def test_learning_rate_is_a_variable_that_assign_sets_as_in_keras():
    w = tf.Variable(0.0)
    optimizer = optimizers.SGD(0.1)
    optimizer.learning_rate.assign(0.5)  # Keras's idiom: its learning_rate is a variable
    optimizer.apply_gradients([(tf.constant(1.0), w)])
    assert float(optimizer.learning_rate) == 0.5 and float(w) == -0.5


def test_learning_rate_setter_rules():
    optimizer = optimizers.SGD(keras.optimizers.schedules.ExponentialDecay(0.4, 1, 0.5))
    with pytest.raises(TypeError, match="cannot be set to a number"):
        optimizer.learning_rate = 0.1
    constant = optimizers.SGD(0.1)
    constant.learning_rate = keras.optimizers.schedules.ExponentialDecay(0.3, 1, 0.5)
    assert float(constant.learning_rate) == pytest.approx(0.3)
    with pytest.raises(ValueError, match="Received: learning_rate=-1.0"):
        optimizers.SGD().learning_rate = -1.0


def test_float64_model_gets_the_exact_learning_rate():
    w = tf.Variable(0.0, dtype=tf.float64)
    optimizers.SGD(0.1).apply_gradients([(tf.constant(1.0, tf.float64), w)])
    assert float(w) == -0.1  # exact: no detour through float32 (which gives -0.10000000149)


@pytest.mark.parametrize("bad", [-0.1, "fast", None, float("inf"), True])
def test_bad_learning_rate(bad):
    with pytest.raises(ValueError) as error:
        optimizers.SGD(learning_rate=bad)
    assert f"Received: learning_rate={bad!r}" in str(error.value)


@pytest.mark.parametrize("kwargs, message", [
    ({"weight_decay": -0.1},
     "weight_decay must be None or a non-negative float. Received: weight_decay=-0.1"),
    ({"clipnorm": 0.0}, "clipnorm must be a positive float. Received: clipnorm=0.0"),
    ({"clipvalue": -1.0}, "clipvalue must be a positive float. Received: clipvalue=-1.0"),
    ({"clipnorm": "big"}, "clipnorm must be a positive float. Received: clipnorm='big'"),
    ({"weight_decay": "a lot"}, "Received: weight_decay='a lot'"),
    ({"global_clipnorm": "1"},
     "global_clipnorm must be a positive float. Received: global_clipnorm='1'"),
    ({"gradient_transforms": {"type": "ClipByNorm"}}, "gradient_transforms must be a list"),
])
def test_bad_base_arguments(kwargs, message):
    with pytest.raises(ValueError) as error:
        optimizers.Adam(**kwargs)
    assert message in str(error.value)


# ----------------------------------------------------------------------- config and get

def test_schedule_and_transforms_survive_a_config_round_trip():
    optimizer = optimizers.Adam(
        keras.optimizers.schedules.ExponentialDecay(0.1, 5, 0.5),
        gradient_transforms=[optimizers.ClipByNorm(2.0)],
    )
    config = optimizer.get_config()
    assert config["learning_rate"]["class_name"] == "ExponentialDecay"
    assert config["gradient_transforms"] == [{"type": "ClipByNorm", "clipnorm": 2.0}]
    clone = optimizers.Adam.from_config(config)
    assert clone.get_config() == config


def test_from_keras_config():
    config = keras.optimizers.Adam(learning_rate=0.5, amsgrad=True).get_config()
    optimizer = optimizers.Adam.from_config(config)
    assert optimizer.amsgrad and float(optimizer.learning_rate) == pytest.approx(0.5)
    config.update(use_ema=True, gradient_accumulation_steps=2)  # supported since issue 42
    optimizer = optimizers.Adam.from_config(config)
    assert optimizer.use_ema and optimizer.gradient_accumulation_steps == 2


def test_schedule_config_in_recipe_form():
    optimizer = optimizers.get({
        "type": "SGD",
        "learning_rate": {
            "type": "PiecewiseConstantDecay", "boundaries": [2], "values": [0.1, 0.01]
        },
    })
    assert float(optimizer.learning_rate) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="Did you mean 'ExponentialDecay'"):
        optimizers.get({"type": "SGD", "learning_rate": {"type": "ExponentialDecy"}})


def test_get():
    adam = optimizers.Adam()
    assert optimizers.get(adam) is adam
    for name, cls in [("sgd", optimizers.SGD), ("SGD", optimizers.SGD),
                      ("adam", optimizers.Adam), ("ADAM", optimizers.Adam)]:
        assert type(optimizers.get(name)) is cls
    assert type(optimizers.get(optimizers.SGD)) is optimizers.SGD
    built = optimizers.get({"type": "SGD", "learning_rate": 0.1, "momentum": 0.9, "nesterov": True})
    assert (built.momentum, built.nesterov, float(built.learning_rate)) == (0.9, True, 0.1)
    keras_form = optimizers.get({"class_name": "Adam", "config": {"beta_1": 0.8}})
    assert keras_form.beta_1 == 0.8
    assert OPTIMIZERS.get("SGD") is optimizers.SGD and OPTIMIZERS.get("Adam") is optimizers.Adam


def test_get_errors_list_the_valid_names():
    with pytest.raises(ValueError) as error:
        optimizers.get("adma")
    assert "Unknown optimizer 'adma'. Did you mean 'Adam'?" in str(error.value)
    # Every registered name, in the registry's order (new optimizers join the list).
    known = ", ".join(OPTIMIZERS.names())
    assert {"Adam", "LevenbergMarquardt", "LossScaleOptimizer", "SGD"} <= set(OPTIMIZERS.names())
    assert known in str(error.value)
    with pytest.raises(ValueError, match="needs a 'type' key"):
        optimizers.get({"learning_rate": 0.1})
    expected = rf"Could not interpret.*{re.escape(known)}.*Received: 42"
    with pytest.raises(ValueError, match=expected):
        optimizers.get(42)
    with pytest.raises(ValueError, match="Known optimizers: .*Adam.*SGD"):
        optimizers.get({"type": "RMSProp2"})


@pytest.mark.parametrize("module", ["", ".optimizer", ".sgd", ".adam", ".transforms", ".schedules"])
def test_docstring_examples_run(module):
    result = doctest.testmod(importlib.import_module("graphfit.optimizers" + module))
    assert result.attempted > 0 and result.failed == 0
