"""Regularizers, added losses and constraints: the same cases through Keras 3 and graphfit.

Ports the goldens of keras/src/regularizers/regularizers_test.py and
keras/src/constraints/constraints_test.py onto graphfit's layers and optimizers (the
regularizer and constraint objects are Keras's own; what is tested is that graphfit applies
them where Keras does), and compares regularized training with Keras's on the same initial
weights. Differences by design (docs/guides/keras_parity.md, "Regularizers, added losses and
constraints"): graphfit's logs show the separate terms (`regularization_loss`,
`activity_regularization_loss`, `added_loss`) next to Keras's total `loss`; "l1_l2" is accepted
as well as Keras 3's "l1l2".
"""

from __future__ import annotations

import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import callbacks, layers, optimizers

from ..framework.training.script_results import script_results

RNG = np.random.default_rng(0)
X = RNG.normal(size=(32, 4)).astype("float32")
Y = (X @ np.array([[1.0], [-2.0], [0.5], [3.0]]) + 0.3).astype("float32")


def _example_array():
    # constraints_test.get_example_array
    np.random.seed(3537)
    example_array = np.random.random((100, 100)) * 100.0 - 50.0
    example_array[0, 0] = 0.0
    return example_array.astype("float32")


# ------------------------------------------------------------------- regularizers_test goldens

@pytest.mark.parametrize("regularizer, expected", [
    (keras.regularizers.L1(0.1), lambda v: 0.1 * np.sum(np.abs(v))),
    (keras.regularizers.L2(0.1), lambda v: 0.1 * np.sum(np.square(v))),
    (keras.regularizers.L1L2(l1=0.1, l2=0.2),
     lambda v: 0.1 * np.sum(np.abs(v)) + 0.2 * np.sum(np.square(v))),
])
def test_weight_penalty_is_keras_golden(regularizer, expected):
    value = np.random.default_rng(1).random((4, 4)).astype(np.float32)
    dense = layers.Dense(4, use_bias=False, kernel_regularizer=regularizer)
    dense.build(tf.TensorShape((None, 4)))
    dense.kernel.assign(value)
    [penalty] = dense.losses
    np.testing.assert_allclose(penalty.numpy(), expected(value), rtol=1e-6)


def test_l1_of_zero_and_negative_weights_as_keras():
    dense = layers.Dense(4, use_bias=False, kernel_regularizer=keras.regularizers.L1(0.1))
    dense.build(tf.TensorShape((None, 4)))
    dense.kernel.assign(np.zeros((4, 4)))
    assert float(dense.losses[0]) == 0.0
    dense.kernel.assign(-np.ones((4, 4)))
    negative = float(dense.losses[0])
    dense.kernel.assign(np.ones((4, 4)))
    assert float(dense.losses[0]) == pytest.approx(negative) == pytest.approx(1.6)


@pytest.mark.parametrize("name, cls", [("l1", keras.regularizers.L1),
                                       ("l2", keras.regularizers.L2),
                                       ("l1l2", keras.regularizers.L1L2),
                                       ("l1_l2", keras.regularizers.L1L2),  # Keras 2's name
                                       ("L2", keras.regularizers.L2)])
def test_regularizer_names(name, cls):
    dense = layers.Dense(2, kernel_regularizer=name, bias_regularizer=name)
    assert isinstance(dense.kernel_regularizer, cls) and isinstance(dense.bias_regularizer, cls)


def test_a_bad_regularizer_name_says_what_is_accepted():
    with pytest.raises(ValueError) as error:  # keras: regularizers.get("typo") raises
        layers.Dense(2, kernel_regularizer="l2x")
    message = str(error.value)
    assert "kernel_regularizer must be a Keras regularizer" in message and "Did you mean" in message
    assert message.endswith("Received: kernel_regularizer='l2x'")
    with pytest.raises(ValueError, match="Received: kernel_constraint='non_negative'"):
        layers.Dense(2, kernel_constraint="non_negative")
    with pytest.raises(ValueError, match="activity_regularizer"):
        layers.Dense(2, activity_regularizer=3)


def test_keras_docstring_example_kernel_and_activity():
    """keras.regularizers.Regularizer's example: 0.25 (kernel) + 5.0 (activity / batch)."""
    kwargs = dict(kernel_initializer="ones", kernel_regularizer=keras.regularizers.L1(0.01),
                  activity_regularizer=keras.regularizers.L2(0.01))
    keras_dense = keras.layers.Dense(5, **kwargs)
    ours = layers.Dense(5, **kwargs)
    x = np.ones((5, 5), "float32") * 2.0
    keras_dense(x)
    ours(x)
    expected = float(keras.ops.sum(keras_dense.losses))
    assert expected == pytest.approx(5.25)
    assert float(tf.add_n(ours.losses)) == pytest.approx(expected)


def test_config_round_trip_of_regularizers_and_constraints():
    dense = layers.Dense(3, kernel_regularizer=keras.regularizers.L1L2(l1=0.1, l2=0.2),
                         bias_regularizer="l2", activity_regularizer={"type": "L1", "l1": 0.3},
                         kernel_constraint=keras.constraints.MaxNorm(3.0, axis=1),
                         bias_constraint="non_neg")
    config = dense.get_config()
    again = layers.Dense.from_config(config)
    assert again.get_config() == config
    assert again.kernel_regularizer.get_config() == {"l1": pytest.approx(0.1),
                                                      "l2": pytest.approx(0.2)}
    assert again.activity_regularizer.get_config() == {"l1": pytest.approx(0.3)}
    assert again.kernel_constraint.get_config() == {"max_value": 3.0, "axis": 1}
    assert isinstance(again.bias_constraint, keras.constraints.NonNeg)
    # Keras reads graphfit's serialized forms (they are Keras's own).
    assert isinstance(keras.regularizers.get(config["kernel_regularizer"]),
                      keras.regularizers.L1L2)


# --------------------------------------------------------------------- constraints_test goldens

def _projected_by_a_step(constraint, value):
    """`value` as a kernel with `constraint`, after one SGD step that changes nothing (lr 0):
    the after-update hook projects it, as Keras applies constraints after each update."""
    dense = layers.Dense(value.shape[1], use_bias=False, kernel_constraint=constraint)
    dense.build(tf.TensorShape((None, value.shape[0])))
    dense.kernel.assign(value)
    optimizers.SGD(0.0).apply_gradients([(tf.zeros_like(dense.kernel), dense.kernel)])
    return dense.kernel.numpy()


def test_max_norm_golden():
    x = np.array([[0, 0, 0], [1.0, 0, 0], [3, 0, 0], [3, 3, 3]], "float32").T
    target = np.array([[0, 0, 0], [1.0, 0, 0], [2.0, 0, 0],
                       [2.0 / np.sqrt(3), 2.0 / np.sqrt(3), 2.0 / np.sqrt(3)]]).T
    np.testing.assert_allclose(_projected_by_a_step(keras.constraints.MaxNorm(2.0), x), target,
                               rtol=1e-6, atol=1e-6)


def test_non_neg_unit_norm_min_max_norm_goldens():
    example = _example_array()
    assert (_projected_by_a_step("non_neg", example).min(axis=1) >= 0.0).all()
    unit = _projected_by_a_step(keras.constraints.UnitNorm(), example)
    np.testing.assert_allclose(np.sqrt(np.sum(np.square(unit), axis=0)), 1.0, rtol=1e-5)
    bounded = _projected_by_a_step(keras.constraints.MinMaxNorm(0.2, 0.5), example)
    norms = np.sqrt(np.sum(np.square(bounded), axis=0))
    assert np.all(norms >= 0.2 - 1e-6) and np.all(norms <= 0.5 + 1e-6)
    constraint = keras.constraints.MinMaxNorm(0.2, 0.5)
    np.testing.assert_allclose(bounded, keras.ops.convert_to_numpy(constraint(example)),
                               rtol=1e-6)


def test_a_callable_constraint_and_add_weight_options_of_a_user_layer():
    class Scale(gf.Layer):
        def build(self, input_shape):
            self.scale = self.add_weight("scale", (input_shape[-1],), initializer="ones",
                                         regularizer=keras.regularizers.L2(0.5),
                                         constraint=lambda w: tf.clip_by_value(w, 0.0, 1.5))

        def call(self, x, training=False):
            return x * self.scale

    layer = Scale()
    layer(tf.ones((1, 2)))
    assert float(layer.losses[0]) == pytest.approx(0.5 * 2)
    optimizers.SGD(1.0).apply_gradients([(tf.constant([-2.0, 2.0]), layer.scale)])
    np.testing.assert_allclose(layer.scale.numpy(), [1.5, 0.0])  # 3 and -1, clipped


# ------------------------------------------------------------------------- add_loss and losses

class _KerasPenalty(keras.layers.Layer):
    def call(self, x):
        self.add_loss(0.1 * keras.ops.mean(keras.ops.square(x)))
        return x


class _Penalty(gf.Layer):
    def call(self, x, training=False):
        self.add_loss(0.1 * tf.reduce_mean(tf.square(x)))
        return x


def test_add_loss_in_call_lists_in_losses_and_clears_at_the_next_call():
    layer = _Penalty()
    model = gf.Sequential([layers.Dense(2, kernel_initializer="ones"), layer], input_shape=(3,))
    model(tf.ones((4, 3)))
    assert float(layer.losses[0]) == pytest.approx(0.1 * 9.0)
    assert len(model.losses) == 1
    model(tf.zeros((4, 3)))
    assert [float(v) for v in model.losses] == [0.0]  # the last call's only
    with pytest.raises(ValueError, match="add_loss takes a scalar tensor"):
        layer.add_loss("much")


def test_compiled_without_a_loss_fit_minimises_the_added_losses_as_keras():
    # Keras: compile(optimizer) alone, fit(x): the loss is what the layers add (a VAE's terms).
    def dense():
        return dict(kernel_initializer=keras.initializers.Constant(0.3))

    model = gf.Sequential([layers.Dense(2, **dense()), _Penalty()], input_shape=(4,))
    model.compile(optimizer=optimizers.SGD(0.1))
    history = model.fit(X, epochs=3, batch_size=8, verbose=0, shuffle=False).history
    twin = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, **dense()),
                             _KerasPenalty()])
    twin.compile(optimizer=keras.optimizers.SGD(0.1), run_eagerly=True)  # see _pair
    expected = twin.fit(X, epochs=3, batch_size=8, verbose=0, shuffle=False).history["loss"]
    np.testing.assert_allclose(history["loss"], expected, rtol=1e-5)
    np.testing.assert_allclose(model.get_weights()[0], twin.get_weights()[0], rtol=1e-5)
    assert model.evaluate(X, verbose=0) == pytest.approx(twin.evaluate(X, verbose=0),
                                                          rel=1e-5)


def test_compiled_without_a_loss_and_nothing_added_says_what_to_do():
    model = gf.Sequential([layers.Dense(1)], input_shape=(4,))
    model.compile(optimizer="sgd")
    with pytest.raises(ValueError, match=r"fit\(\) has no loss to compute.*loss='mse'"):
        model.fit(X, epochs=1, verbose=0)
    lm = gf.Sequential([layers.Dense(1, kernel_regularizer="l2")], input_shape=(4,),
                       dtype="float64")
    lm.compile(optimizer=optimizers.LevenbergMarquardt())
    with pytest.raises(ValueError, match="compiled with loss=None"):
        lm.fit(X.astype("float64"), epochs=1, verbose=0)


def test_a_shared_layer_is_penalized_once_and_a_frozen_one_not_at_all():
    class Twice(gf.Layer):
        def __init__(self):
            super().__init__()
            self.dense = layers.Dense(2, kernel_regularizer=keras.regularizers.L2(1.0),
                                      use_bias=False, kernel_initializer="ones")

        def call(self, x, training=False):
            return self.dense(self.dense(x))  # one layer, two calls per pass

    twice = Twice()
    model = gf.Sequential([twice], input_shape=(2,))
    model.compile(optimizer=optimizers.SGD(0.0), loss="mse")
    history = model.fit(np.zeros((4, 2)), np.zeros((4, 2)), epochs=1, verbose=0)
    assert history.history["loss"][0] == pytest.approx(4.0)  # 1.0 * ‖ones(2, 2)‖², once
    assert history.history["regularization_loss"][0] == pytest.approx(4.0)
    twice.trainable = False
    assert model.losses == []


def _pair(regularized: bool = True):
    """A Keras model and a graphfit twin with Keras's initial weights. The Keras references
    in this file run eagerly: a few batches run faster than Keras traces them, with the
    same numbers."""
    kwargs = dict(kernel_regularizer=keras.regularizers.L2(0.01),
                  bias_regularizer=keras.regularizers.L1(0.02),
                  activity_regularizer=keras.regularizers.L2(0.001)) if regularized else {}
    keras.utils.set_random_seed(1)
    reference = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, "tanh", **kwargs),
                                  _KerasPenalty(), keras.layers.Dense(1)])
    ours = gf.Sequential([layers.Dense(8, "tanh", **kwargs), _Penalty(), layers.Dense(1)],
                         input_shape=(4,))
    ours.set_weights(reference.get_weights())
    return reference, ours


@pytest.mark.parametrize("make_optimizer", [
    lambda lib: lib.SGD(0.05, momentum=0.9),
    lambda lib: lib.Adam(0.01)], ids=["sgd", "adam"])
def test_regularized_training_follows_keras(make_optimizer):
    reference, ours = _pair()
    reference.compile(optimizer=make_optimizer(keras.optimizers), loss="mse", run_eagerly=True)
    ours.compile(optimizer=make_optimizer(optimizers), loss="mse")
    data = dict(x=X, y=Y, batch_size=8, epochs=3, shuffle=False, verbose=0,
                validation_data=(X[:8], Y[:8]))
    expected = reference.fit(**data).history
    history = ours.fit(**data).history
    # Keras's loss and val_loss are the totals: compiled loss plus every added loss.
    np.testing.assert_allclose(history["loss"], expected["loss"], rtol=2e-5)
    np.testing.assert_allclose(history["val_loss"], expected["val_loss"], rtol=2e-5)
    for got, want in zip(ours.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    # graphfit also reports the terms apart (Keras 3.15 shows the total only).
    assert {"regularization_loss", "activity_regularization_loss", "added_loss"} <= set(history)
    assert "val_regularization_loss" not in history  # evaluate() returns Keras's values
    assert all(r > 0 for r in history["regularization_loss"])
    # model.losses outside a step: Keras's list (weights evaluated now, last call's others).
    reference(X[:2])
    ours(X[:2])
    assert float(tf.add_n(ours.losses)) == pytest.approx(
        float(keras.ops.sum(reference.losses)), rel=1e-5)


def test_evaluate_counts_the_penalties_as_keras():
    reference, ours = _pair()
    reference.compile(optimizer="sgd", loss="mse", run_eagerly=True)
    ours.compile(optimizer="sgd", loss="mse")
    expected = reference.evaluate(X, Y, batch_size=8, verbose=0)
    assert ours.evaluate(X, Y, batch_size=8, verbose=0) == pytest.approx(expected, rel=1e-5)


# ------------------------------------------------------------------------- Levenberg–Marquardt

def test_levenberg_marquardt_reaches_the_ridge_solution():
    """minimise mean((Xw + b - y)²) + λ‖w‖², bias unpenalized: the closed form is the solution
    of [XᵀX/N + λI, Xᵀ1/N; 1ᵀX/N, 1] [w; b] = [Xᵀy/N; mean y]."""
    lam, n = 0.3, len(X)
    x, y = X.astype("float64"), Y.astype("float64") + RNG.normal(size=Y.shape) * 0.1
    model = gf.Sequential([layers.Dense(1, kernel_regularizer=keras.regularizers.L2(lam))],
                          input_shape=(4,), dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    history = model.fit(x, y, batch_size=None, epochs=8, verbose=0)
    a = np.hstack([x, np.ones((n, 1))])
    normal = a.T @ a / n + np.diag([lam] * 4 + [0.0])
    solution = np.linalg.solve(normal, a.T @ y[:, 0] / n)
    kernel, bias = model.get_weights()
    np.testing.assert_allclose(np.append(kernel[:, 0], bias), solution, rtol=1e-7, atol=1e-9)
    objective = np.mean((a @ solution - y[:, 0]) ** 2) + lam * np.sum(solution[:4] ** 2)
    assert history.history["loss"][-1] == pytest.approx(objective, rel=1e-6)
    # The penalty is logged where the step ends, as the loss is (one batch per epoch), not
    # at the weights it started from.
    first = gf.Sequential([layers.Dense(1, kernel_regularizer=keras.regularizers.L2(lam))],
                          input_shape=(4,), dtype="float64")
    first.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    logged = first.fit(x, y, batch_size=None, epochs=1, verbose=0).history
    assert logged["regularization_loss"][0] == pytest.approx(
        lam * float(np.sum(first.get_weights()[0] ** 2)), rel=1e-7)  # Keras: l2 in float32


@pytest.mark.parametrize("kwargs, match", [
    (dict(kernel_regularizer="l1"), "not a sum of squares"),
    (dict(activity_regularizer="l2"), "activity_regularization_loss"),
])
def test_levenberg_marquardt_refuses_what_it_cannot_write_as_rows(kwargs, match):
    model = gf.Sequential([layers.Dense(1, **kwargs)], input_shape=(4,), dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    before = model.get_weights()
    with pytest.raises(ValueError, match=match):
        model.fit(X, Y, batch_size=None, epochs=1, verbose=0)
    assert all(np.array_equal(a, b) for a, b in zip(before, model.get_weights()))


def test_levenberg_marquardt_refuses_the_cg_solver_with_penalties():
    model = gf.Sequential([layers.Dense(1, kernel_regularizer="l2")], input_shape=(4,),
                          dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(solver="cg"), loss="mse")
    with pytest.raises(ValueError, match="solver='direct'"):
        model.fit(X, Y, batch_size=None, epochs=1, verbose=0)


class _KernelAfterEachStep(callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.kernels = []

    def on_train_batch_end(self, batch, logs=None):
        self.kernels.append(self.model.get_weights()[0].copy())


def test_constraints_hold_after_each_levenberg_marquardt_step():
    # The unconstrained solution has negative weights (-2): NonNeg must hold them at 0.
    model = gf.Sequential([layers.Dense(1, kernel_constraint="non_neg")], input_shape=(4,),
                          dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    record = _KernelAfterEachStep()
    model.fit(X.astype("float64"), Y.astype("float64"), batch_size=16, epochs=3, verbose=0,
              callbacks=[record])
    assert len(record.kernels) == 6
    assert all((kernel >= 0).all() for kernel in record.kernels)
    assert record.kernels[-1][1, 0] == 0.0 and record.kernels[-1][3, 0] > 1.0


def test_constraints_hold_after_each_first_order_step():
    model = gf.Sequential([layers.Dense(1, kernel_constraint=keras.constraints.MaxNorm(1.0))],
                          input_shape=(4,))
    model.compile(optimizer=optimizers.Adam(0.1), loss="mse", steps_per_execution=2)
    record = _KernelAfterEachStep()
    model.fit(X, Y, batch_size=8, epochs=2, verbose=0, callbacks=[record])
    assert record.kernels and all(np.linalg.norm(k[:, 0]) <= 1.0 + 1e-6 for k in record.kernels)


def test_a_wrapped_keras_layers_constraint_is_applied_as_keras_applies_it():
    # The constraint lives on the Keras variable; graphfit's SGD must project the tf.Variable
    # under it after each step, as keras.optimizers.SGD does: same weights after 2 epochs.
    def dense():
        return keras.layers.Dense(1, kernel_constraint=keras.constraints.NonNeg(),
                                  kernel_initializer=keras.initializers.Constant(0.5))

    wrapped = dense()
    model = gf.Sequential([layers.KerasLayer(wrapped)], input_shape=(4,))
    model.compile(optimizer=optimizers.SGD(0.05), loss="mse")
    model.fit(X, Y, batch_size=8, epochs=2, verbose=0, shuffle=False)
    twin = keras.Sequential([keras.Input((4,)), dense()])
    twin.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse", run_eagerly=True)
    twin.fit(X, Y, batch_size=8, epochs=2, verbose=0, shuffle=False)
    kernel = wrapped.kernel.numpy()
    assert kernel[1, 0] == 0.0  # the unconstrained fit drives it to -2
    np.testing.assert_allclose(kernel, twin.layers[0].kernel.numpy(), rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------------- under MirroredStrategy

TWO_CPU_SCRIPT = pathlib.Path(__file__).with_name("regularization_mirrored_script.py")


@pytest.fixture(scope="module")
def mirrored(two_cpu_results) -> dict:
    return script_results(TWO_CPU_SCRIPT, two_cpu_results)


@pytest.mark.parametrize("optimizer", ["sgd", "lm"])
def test_penalties_and_constraints_under_mirrored_strategy(mirrored, optimizer):
    result = mirrored[optimizer]
    assert result["weights"] < 1e-5 and result["loss"] < 1e-5  # as on one device
    assert result["regularization_loss"] > 0
    assert result["smallest_kernel_entry"] >= 0.0  # NonNeg after every step
    assert result["second_kernel_entry"] == 0.0  # its unconstrained value is negative


# --------------------------------------------------------------------------- the parity table

def test_the_parity_table_names_every_keras_regularizer_and_constraint():
    page = pathlib.Path(__file__).resolve().parents[2] / "docs" / "guides" / "keras_parity.md"
    section = page.read_text().split("## Regularizers, added losses and constraints")[1]
    section = section.split("\n## ")[0]
    for module in (keras.regularizers, keras.constraints):
        names = [name for name in dir(module) if isinstance(getattr(module, name), type)]
        assert names
        missing = [name for name in names if not any(
            form in section for form in (f"`{name}`", f"`\"{name}\"`", f"`keras.{name}`",
                                         f".{name}`"))]
        assert not missing, f"docs/guides/keras_parity.md does not say how graphfit takes {missing}"
