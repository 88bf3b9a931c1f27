"""AutoGraph converts the user's code inside compiled steps, and skips graphfit's own.

Each user function below branches or loops in Python on a tensor, which only runs inside a
`tf.function` when AutoGraph converts it; graphfit's entry points are marked with
`tf.autograph.experimental.do_not_convert` (`graphfit.core.autograph_scope`), and each place
where graphfit calls user code converts it.
"""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.autograph.impl import api, conversion

import graphfit as gf
from graphfit import layers, optimizers
from graphfit.training.losses import FunctionLoss


class SignedScale(gf.Layer):
    """x * w where the batch sum is positive, x * -w elsewhere: a tensor-valued Python `if`."""

    def build(self, input_shape):
        self.w = self.add_weight("w", shape=(input_shape[-1],), initializer="ones")

    def call(self, x, training=False):
        if tf.reduce_sum(x) > 0:
            return x * self.w
        return -x * self.w


class RepeatedDouble(gf.Model):
    """A user model whose call loops over a tensor: doubles x `times` times."""

    def __init__(self):
        super().__init__()
        self.dense = layers.Dense(1, kernel_initializer="ones", use_bias=False)

    def call(self, x, training=False):
        times = tf.cast(tf.reduce_max(x), tf.int32)
        for _ in tf.range(times):
            x = x * 2.0
        return self.dense(x)


def test_graphfit_entry_points_are_marked_not_to_convert_and_user_code_is_not():
    # AutoGraph's recursion stops at functions marked with the public do_not_convert.
    for entry in (gf.Layer.__call__, gf.Model.train_step, optimizers.Optimizer.minimize,
                  optimizers.Optimizer.apply_gradients, optimizers.LevenbergMarquardt.minimize):
        assert api.is_autograph_artifact(entry), entry
    assert not api.is_autograph_artifact(SignedScale.call)
    assert not conversion.is_allowlisted(SignedScale.call)


def test_a_user_layer_branches_on_a_tensor_inside_the_compiled_steps():
    model = gf.Sequential([SignedScale()], input_shape=(2,))
    model.compile(optimizer=optimizers.SGD(0.0), loss="mse")
    positive, negative = np.ones((4, 2), np.float32), -np.ones((4, 2), np.float32)
    np.testing.assert_allclose(model.predict(positive, verbose=0), positive)
    np.testing.assert_allclose(model.predict(negative, verbose=0), positive)
    model.fit(negative, positive, epochs=1, verbose=0)  # traced train step, loss 0
    assert model.evaluate(negative, positive, verbose=0) == 0.0


def test_a_user_model_loops_over_a_tensor_inside_the_compiled_steps():
    model = RepeatedDouble()
    model.compile(optimizer=optimizers.SGD(0.0), loss="mse")
    x = np.array([[3.0]], np.float32)  # doubled 3 times
    np.testing.assert_allclose(model.predict(x, verbose=0), [[24.0]])
    history = model.fit(x, np.array([[24.0]], np.float32), epochs=1, verbose=0)
    assert history.history["loss"] == [0.0]


def test_a_user_activation_function_branches_on_a_tensor():
    def clipped_identity(x):
        if tf.reduce_max(x) > 1.0:
            return tf.minimum(x, 1.0)
        return x

    model = gf.Sequential([layers.Dense(1, activation=clipped_identity, use_bias=False,
                                        kernel_initializer="ones")], input_shape=(1,))
    model.compile(optimizer=optimizers.SGD(0.0), loss="mse")
    np.testing.assert_allclose(model.predict(np.array([[0.5], [3.0]], np.float32), verbose=0),
                               [[0.5], [1.0]])


def test_a_user_loss_function_branches_on_a_tensor():
    def hinge_or_square(y_true, y_pred):
        error = y_pred - y_true
        if tf.reduce_max(tf.abs(error)) > 1.0:
            return tf.reduce_mean(tf.abs(error), axis=-1)
        return tf.reduce_mean(tf.square(error), axis=-1)

    loss = FunctionLoss(hinge_or_square)
    small, large = tf.constant([[0.5]]), tf.constant([[3.0]])
    assert float(tf.function(lambda: loss(tf.zeros((1, 1)), small))()) == 0.25
    assert float(tf.function(lambda: loss(tf.zeros((1, 1)), large))()) == 3.0


def test_user_optimizer_rule_transform_and_constraint_branch_on_tensors():
    class WarmStartSGD(optimizers.Optimizer):
        """Plain SGD that skips its first step: `step` is a tensor."""

        slot_names = ()

        def update_rule(self, gradient, value, slots, learning_rate, step):
            if step > 1:
                return value - learning_rate * gradient, {}
            return value, {}

        def apply_gradients(self, grads_and_vars):
            pairs = []
            for gradient, variable in grads_and_vars:  # zeroes non-finite gradients
                if not tf.reduce_all(tf.math.is_finite(gradient)):
                    gradient = tf.zeros_like(gradient)
                pairs.append((gradient, variable))
            return super().apply_gradients(pairs)

    def drop_large(grads):
        out = []
        for g in grads:
            if tf.reduce_max(tf.abs(g)) > 1e6:
                g = tf.zeros_like(g)
            out.append(g)
        return out

    def nonnegative(value):
        if tf.reduce_min(value) < 0:
            return tf.maximum(value, 0.0)
        return value

    w = tf.Variable([1.0, 2.0], constraint=nonnegative)
    optimizer = WarmStartSGD(0.75, gradient_transforms=[drop_large])

    @tf.function
    def step():
        return optimizer.minimize(lambda: (tf.reduce_sum(w * w), None), [w])

    step()
    assert w.numpy().tolist() == [1.0, 2.0]  # the first step is skipped
    step()
    assert w.numpy().tolist() == [0.0, 0.0]  # w - 0.75 * 2w = -w/2, clipped by the constraint


def test_lm_residual_loss_branches_on_a_tensor():
    def residuals(y_true, y_pred):
        r = y_pred - y_true
        if tf.reduce_max(tf.abs(r)) > 100.0:  # never true here; still a tensor `if`
            r = r / 100.0
        return r

    x = np.linspace(-1, 1, 20, dtype=np.float64)[:, None]
    model = gf.Sequential([layers.Dense(1)], input_shape=(1,), dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(),
                  loss=optimizers.ResidualLoss(residuals))
    model.fit(x, 2 * x - 1, batch_size=None, epochs=20, verbose=0)
    kernel, bias = model.get_weights()
    assert kernel.ravel().tolist() == pytest.approx([2.0], abs=1e-9)
    assert bias.tolist() == pytest.approx([-1.0], abs=1e-9)
