"""The closed-form per-example Jacobian of affine layers (`layerwise_jacobian`) against the
whole-batch reverse-mode Jacobian (`GradientTape.jacobian`), and the cases it must leave to
pfor: a variable read outside the affine layers that report it, eager execution."""

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers
from graphfit.core import Layer
from graphfit.optimizers.levenberg_marquardt import dense_forms
from graphfit.optimizers.levenberg_marquardt import jacobian as lm_jacobian
from graphfit.optimizers.levenberg_marquardt.layerwise_jacobian import (
    applies_to,
    layerwise_jacobian,
)

RNG = np.random.default_rng(3)


def _reference(rows_for, data, variables):
    """The Jacobian of all rows at once, reverse mode on the whole batch."""
    with tf.GradientTape() as tape:
        rows, _ = rows_for(data)
    parts = tape.jacobian(rows, variables, unconnected_gradients=tf.UnconnectedGradients.ZERO)
    return tf.concat([tf.reshape(p, [tf.shape(rows)[0], -1]) for p in parts], axis=1)


def _closed_and_reference(model, x, rows_per_example):
    model(x)  # builds a subclassed model
    variables = model.trainable_variables

    def rows_for(data):
        out = model(data) * 1.5  # a loss-like transform after the last layer
        flat = tf.reshape(out, [-1])
        return flat, tf.stop_gradient(flat)

    @tf.function
    def both():
        closed = layerwise_jacobian(rows_for, x, variables, rows_per_example,
                                    dense_forms.dense_layers(model))
        if closed is None:
            return None, _reference(rows_for, x, variables)
        return closed[0], _reference(rows_for, x, variables)

    return both()


class _Twice(gf.Model):
    keeps_example_axis = True  # its call keeps the examples first: the closed form applies

    def __init__(self, dtype=None):
        super().__init__(dtype=dtype)
        self.shared = layers.Dense(3, activation="tanh")
        self.out = layers.Dense(1)

    def call(self, x, training=False):
        return self.out(self.shared(self.shared(x)))


class _Tied(gf.Model):
    def __init__(self, dtype=None):
        super().__init__(dtype=dtype)
        self.encoder = layers.Dense(2, activation="tanh")
        self.decoder = _TiedOutput(self.encoder)

    def call(self, x, training=False):
        return self.decoder(self.encoder(x))


class _Residual(Layer):
    """`x + dense(x)`: a layer holding a Dense, with the input added back."""

    keeps_example_axis = True

    def __init__(self, units):
        super().__init__()
        self.inner = layers.Dense(units, activation="tanh")

    def call(self, inputs, training=False):
        return inputs + self.inner(inputs)


@pytest.mark.parametrize("case", ["one_row", "three_rows", "sequence", "shared", "nested"])
def test_the_closed_form_equals_the_reverse_mode_jacobian(case):
    gf.set_seed(1)
    if case == "sequence":  # Dense on (batch, time, features): summed over the time axis
        model = gf.Sequential([layers.Dense(4, activation="tanh"), layers.Flatten(),
                               layers.Dense(2)], input_shape=(3, 2), dtype="float64")
        x = tf.constant(RNG.normal(size=(6, 3, 2)))
        k = 2
    elif case == "shared":  # one Dense called twice: its two contributions add up
        model = _Twice(dtype="float64")
        x = tf.constant(RNG.normal(size=(5, 3)))
        k = 1
    elif case == "nested":
        model = gf.Sequential([_Residual(3), layers.Dense(2)], input_shape=(3,),
                              dtype="float64")
        x = tf.constant(RNG.normal(size=(5, 3)))
        k = 2
    else:
        k = 1 if case == "one_row" else 3
        model = gf.Sequential([layers.Dense(5, activation="tanh"), layers.Dense(k)],
                              input_shape=(2,), dtype="float64")
        x = tf.constant(RNG.normal(size=(7, 2)))
    closed, reference = _closed_and_reference(model, x, k)
    assert closed is not None
    np.testing.assert_allclose(closed, reference, rtol=1e-12, atol=1e-13)


def test_frozen_layers_add_no_columns():
    gf.set_seed(2)
    model = gf.Sequential([layers.Dense(4, activation="tanh", trainable=False),
                           layers.Dense(1)], input_shape=(2,), dtype="float64")
    x = tf.constant(RNG.normal(size=(6, 2)))
    closed, reference = _closed_and_reference(model, x, 1)
    assert closed.shape == (6, 5)
    np.testing.assert_allclose(closed, reference, rtol=1e-12, atol=1e-13)


class _TiedOutput(Layer):
    """Multiplies by the transpose of another Dense's kernel: a read no record reports."""

    def __init__(self, dense):
        super().__init__()
        self.dense = dense

    def call(self, inputs, training=False):
        return tf.matmul(inputs, self.dense.kernel, transpose_b=True)


class _Scale(Layer):
    """A trained variable outside any affine layer."""

    def build(self, input_shape):
        self.scale = self.add_weight("scale", (), initializer="ones")

    def call(self, inputs, training=False):
        return inputs * self.scale


def test_a_variable_read_outside_its_affine_layer_is_left_to_pfor():
    gf.set_seed(3)
    model = _Tied(dtype="float64")
    x = tf.constant(RNG.normal(size=(4, 3)))
    closed, _ = _closed_and_reference(model, x, 3)
    assert closed is None
    scaled = gf.Sequential([layers.Dense(2), _Scale()], input_shape=(3,), dtype="float64")
    closed, _ = _closed_and_reference(scaled, x, 2)
    assert closed is None


class _Gated(Layer):
    """Calls its Dense inside a tf.cond branch: the records are the branch's tensors."""

    def __init__(self):
        super().__init__()
        self.inner = layers.Dense(2, activation="tanh")

    def call(self, inputs, training=False):
        return tf.cond(tf.reduce_sum(inputs) > -1e300, lambda: self.inner(inputs),
                       lambda: inputs[:, :2])


def test_a_dense_called_inside_a_cond_branch_is_left_to_pfor():
    model = gf.Sequential([_Gated()], input_shape=(3,), dtype="float64")
    closed, _ = _closed_and_reference(model, tf.constant(RNG.normal(size=(4, 3))), 2)
    assert closed is None


def test_the_normal_equations_of_a_tied_model_stay_exact():
    """Where the closed form does not apply, per-example mode falls back to pfor."""
    gf.set_seed(4)
    model = _Tied(dtype="float64")
    x = tf.constant(RNG.normal(size=(5, 3)))
    model(x)
    variables = model.trainable_variables

    def rows_for(part):
        out = tf.reshape(model(part["x"]), [-1])
        return out, tf.stop_gradient(out)

    @tf.function
    def normal(mode):
        return lm_jacobian.normal_equations(rows_for, {"x": x}, tf.constant(5), 5, variables,
                                            mode, tf.float64, False, layerwise_rows=3)[0]

    np.testing.assert_allclose(normal("per_example"), normal("reverse"), rtol=1e-12,
                               atol=1e-13)


def test_eager_execution_is_left_to_pfor():
    model = gf.Sequential([layers.Dense(1)], input_shape=(2,), dtype="float64")

    def rows_for(data):
        out = tf.reshape(model(data), [-1])
        return out, out

    assert layerwise_jacobian(rows_for, tf.ones((3, 2), tf.float64),
                              model.trainable_variables, 1,
                              dense_forms.dense_layers(model)) is None


def test_an_lm_fit_takes_the_same_steps_with_and_without_the_closed_form(monkeypatch):
    """A float64 fit through `fit`: the closed form changes the ops, not the steps."""
    x = np.linspace(-1, 1, 60)[:, None]
    y = np.sinc(3 * x)

    def fitted():
        gf.set_seed(5)
        model = gf.Sequential([layers.Dense(6, activation="tanh"), layers.Dense(1)],
                              input_shape=(1,), dtype="float64")
        model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
        history = model.fit(x, y, batch_size=20, epochs=3, verbose=0, shuffle=False)
        return history.history["loss"], [v.numpy() for v in model.trainable_variables]

    closed_loss, closed_weights = fitted()
    monkeypatch.setattr(lm_jacobian, "layerwise_jacobian", lambda *args: None)
    pfor_loss, pfor_weights = fitted()
    np.testing.assert_allclose(closed_loss, pfor_loss, rtol=1e-9)
    for a, b in zip(closed_weights, pfor_weights):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


class _TimeMajor(Layer):
    """Runs its Dense on the time-major transpose of (batch, time, features): the Dense's
    first axis is then time, not the examples."""

    def __init__(self):
        super().__init__()
        self.inner = layers.Dense(3, activation="tanh")

    def call(self, inputs, training=False):
        return tf.transpose(self.inner(tf.transpose(inputs, [1, 0, 2])), [1, 0, 2])


class _PositiveDense(layers.Dense):
    """A Dense whose kernel is softplus of its variable: the product is not by the variable."""

    def compute_value(self, value):
        value = super().compute_value(value)
        return tf.nn.softplus(value) if value.shape.rank == 2 else value


def _lm_losses(model_fn, x, y, mode="auto"):
    gf.set_seed(6)
    model = model_fn()
    model.compile(optimizer=optimizers.LevenbergMarquardt(jacobian_mode=mode), loss="mse")
    return model.fit(x, y, batch_size=4, epochs=3, verbose=0, shuffle=False).history["loss"]


@pytest.mark.parametrize("case", ["time_major", "transformed_kernel"])
def test_models_the_closed_form_would_misread_train_as_with_the_exact_jacobian(case):
    """A custom layer that moves the examples off the first axis (batch 4 = time 4, so the
    shapes even agree), and a Dense subclass multiplying by a transform of its kernel."""
    if case == "time_major":
        x = RNG.normal(size=(8, 4, 5))  # 18 parameters, 12 rows per example: per_example
        y = RNG.normal(size=(8, 12))

        def model_fn():
            return gf.Sequential([_TimeMajor(), layers.Flatten()], input_shape=(4, 5),
                                 dtype="float64")
    else:
        x = RNG.normal(size=(8, 3))
        y = RNG.normal(size=(8, 2))

        def model_fn():
            return gf.Sequential([_PositiveDense(2)], input_shape=(3,), dtype="float64")

    model = model_fn()
    if case == "time_major":
        assert not applies_to(model)
    else:
        assert applies_to(model)
        closed, _ = _closed_and_reference(model, tf.constant(x), 2)
        assert closed is None  # the subclass reports nothing
    np.testing.assert_allclose(_lm_losses(model_fn, x, y), _lm_losses(model_fn, x, y, "reverse"),
                               rtol=1e-9)


def test_a_single_example_through_a_small_kernel_matches_matmul_and_its_gradients():
    # Inside LM's per-example Jacobian, one example and a kernel of at most 64 entries take
    # the broadcast product; values and gradients are Dense's matmul's.
    layer = layers.Dense(5, activation="tanh", dtype="float64")
    x = tf.constant(np.random.default_rng(1).normal(size=(1, 3)))
    layer(x)
    with tf.GradientTape(persistent=True) as tape, \
            dense_forms.single_example_forms([layer]):
        tape.watch(x)
        out = layer(x)
        ref = tf.tanh(tf.matmul(x, layer.kernel) + layer.bias)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=1e-15)
    for target in (layer.kernel, x):
        np.testing.assert_allclose(tape.gradient(out, target).numpy(),
                                   tape.gradient(ref, target).numpy(), rtol=1e-14)
