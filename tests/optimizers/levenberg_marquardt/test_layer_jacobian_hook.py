"""The per-example Jacobian layer hook (`example_jacobian`, docs/guides/architecture.md): the
closed form of `layerwise_jacobian` with `layers.Formula`'s hook against the whole-batch
reverse-mode Jacobian (`GradientTape.jacobian`) and central finite differences, and an LM
fit through `model.fit` that takes the same steps with the hook as with pfor."""

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers
from graphfit.optimizers.levenberg_marquardt import dense_forms
from graphfit.optimizers.levenberg_marquardt import jacobian as lm_jacobian
from graphfit.optimizers.levenberg_marquardt.layerwise_jacobian import (
    hook_layers,
    layerwise_jacobian,
)

RNG = np.random.default_rng(11)


def _rows_for(model):
    def rows_for(data):
        flat = tf.reshape(model(data) * 1.5, [-1])  # a loss-like transform after the model
        return flat, tf.stop_gradient(flat)

    return rows_for


def _closed_and_reference(model, x):
    model(x)
    variables = model.trainable_variables
    rows_for = _rows_for(model)

    @tf.function
    def both():
        closed = layerwise_jacobian(rows_for, x, variables, 1, dense_forms.dense_layers(model),
                                    hook_layers(model))
        with tf.GradientTape() as tape:
            rows, _ = rows_for(x)
        parts = tape.jacobian(rows, variables,
                              unconnected_gradients=tf.UnconnectedGradients.ZERO)
        reference = tf.concat([tf.reshape(p, [tf.shape(rows)[0], -1]) for p in parts], 1)
        assert closed is not None, "the hook was not used"
        return closed[0], reference

    return [t.numpy() for t in both()]


def _finite_differences(model, x, h=1e-6):
    """Central differences of the rows, float64, one column per trained scalar."""
    rows_for = _rows_for(model)
    columns = []
    for v in model.trainable_variables:
        start = np.array(v.numpy())
        for index in np.ndindex(start.shape):
            values = []
            for sign in (1, -1):
                moved = start.copy()
                moved[index] += sign * h
                v.assign(moved)
                values.append(rows_for(x)[0].numpy())
            v.assign(start)
            columns.append((values[0] - values[1]) / (2 * h))
    return np.stack(columns, 1)


FORMULAS = {
    "misra1a": (lambda: layers.Formula("b1*(1-exp(-b2*x))", params={"b1": 500.0, "b2": 1e-4},
                                       dtype="float64"),
                lambda: RNG.uniform(50, 800, size=(14, 1))),
    "bounded_and_fixed": (
        lambda: layers.Formula("a*exp(-k*x1)*cos(w*x2) + c",
                               params={"a": {"value": 2.0, "min": 0.0, "max": 5.0},
                                       "k": {"value": 0.3, "min": 0.0}, "w": 1.5,
                                       "c": {"value": 0.1, "vary": False}},
                               dtype="float64"),
        lambda: RNG.uniform(0, 2, size=(9, 2))),
    "global_fit": (
        lambda: layers.Formula("a*exp(-k*x) + c", params={"a": [1.0, 2.0, 0.5], "k": 0.7,
                                                          "c": [0.0, 0.2, -0.1]},
                               dtype="float64"),
        lambda: np.concatenate([RNG.uniform(0, 3, size=(10, 1)),
                                RNG.integers(0, 3, size=(10, 1))], 1)),
    "float32": (lambda: layers.Formula("b1*(1-exp(-b2*x))", params={"b1": 5.0, "b2": 0.5}),
                lambda: RNG.uniform(0, 3, size=(8,)).astype(np.float32)),
}


@pytest.mark.parametrize("case", sorted(FORMULAS))
def test_the_hook_gives_the_reverse_mode_and_finite_difference_jacobian(case):
    make_layer, make_x = FORMULAS[case]
    model = gf.Sequential([make_layer()])
    x = make_x()
    closed, reference = _closed_and_reference(model, x)
    assert closed.shape == reference.shape
    if case == "float32":
        np.testing.assert_allclose(closed, reference, rtol=1e-6, atol=1e-6)
        return
    np.testing.assert_allclose(closed, reference, rtol=1e-12, atol=1e-12)
    scale = np.max(np.abs(reference), axis=0)
    np.testing.assert_allclose(closed / scale, _finite_differences(model, x) / scale,
                               atol=1e-6)


def test_a_dense_feeding_a_formula_combines_both_closed_forms():
    """Dense's closed form and the Formula's hook in one model: both kinds of record."""
    model = gf.Sequential([layers.Dense(3, activation="tanh", dtype="float64"),
                           layers.Formula("a*x1 + b*x2**2 + sin(c*x3)",
                                          params={"a": 1.0, "b": 0.5, "c": 2.0},
                                          dtype="float64")], input_shape=(2,))
    closed, reference = _closed_and_reference(model, RNG.normal(size=(7, 2)))
    np.testing.assert_allclose(closed, reference, rtol=1e-12, atol=1e-12)


def test_a_formula_fit_takes_the_same_steps_with_the_hook_as_with_pfor(monkeypatch):
    """Misra1a-like, float64, through `model.fit`: the hook changes the ops, not the
    steps; and the traced step is smaller."""
    x = np.linspace(77.6, 790.0, 14)[:, None]
    y = 240.0 * (1 - np.exp(-5.5e-4 * x)) + RNG.normal(scale=0.1, size=x.shape)

    def fitted():
        model = gf.Sequential([layers.Formula("b1*(1-exp(-b2*x))",
                                              params={"b1": 500.0, "b2": 1e-4},
                                              dtype="float64")], input_shape=(1,),
                              dtype="float64")
        model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
        history = model.fit(x, y, batch_size=14, epochs=4, verbose=0, shuffle=False)
        graph = model.compile_state.steps.train_step_graph().as_graph_def()
        nodes = len(graph.node) + sum(len(f.node_def) for f in graph.library.function)
        return history.history["loss"], model.layers[0].values(), nodes

    hook_loss, hook_values, hook_nodes = fitted()
    monkeypatch.setattr(lm_jacobian, "layerwise_jacobian", lambda *args: None)
    pfor_loss, pfor_values, pfor_nodes = fitted()
    np.testing.assert_allclose(hook_loss, pfor_loss, rtol=1e-9)
    for name in hook_values:
        np.testing.assert_allclose(hook_values[name], pfor_values[name], rtol=1e-9)
    # 1048 against 1173 nodes (1181 against 1585 before the residual rows were reshaped with
    # their static size: pfor vectorized the dynamic shape ops too).
    assert hook_nodes < pfor_nodes - 100, (hook_nodes, pfor_nodes)


class _Decay(gf.Layer):
    """y = a exp(-k x) with a hook malformed as `mode` says (docs' Decay when "ok")."""

    keeps_example_axis = True

    def __init__(self, mode="ok", **kwargs):
        super().__init__(**kwargs)
        self.mode = mode

    def build(self, input_shape):
        self.a = self.add_weight("a", (), initializer="ones")
        self.k = self.add_weight("k", (), initializer="ones")

    def call(self, x, training=False):
        return self.compute_value(self.a) * tf.exp(-self.compute_value(self.k) * x)

    def example_jacobian(self, inputs, variables):
        e = tf.exp(-self.compute_value(self.k) * inputs)
        d = {self.a.ref(): e, self.k.ref(): -self.compute_value(self.a) * inputs * e}
        if self.mode == "wrongsign":
            d[self.k.ref()] = -d[self.k.ref()]
        parts = [d[v.ref()] if self.mode == "noaxis" else d[v.ref()][:, :, None]
                 for v in variables]
        return parts[:1] if self.mode == "short" else parts


@pytest.mark.parametrize("mode, match", [
    ("noaxis", r"_Decay 'bad'.*For \S*a\S* \(shape \[\]\) it must have shape "
               r"\(batch, 1, 1\); it returned a tensor of shape \(None, 1\)"),
    ("short", r"_Decay 'bad'.*asked for 2 variable\(s\) .* and returned 1 tensor\(s\)"),
])
def test_a_malformed_hook_stops_the_trace_with_a_value_error_naming_the_layer(mode, match):
    x = np.linspace(0, 3, 12)[:, None]
    model = gf.Sequential([_Decay(mode, name="bad")], input_shape=(1,), dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    with pytest.raises(ValueError, match=match) as error:
        model.fit(x, 2.5 * np.exp(-0.7 * x), batch_size=12, epochs=1, verbose=0)
    assert "(batch, outputs per example, variable size)" in str(error.value)


def test_check_example_jacobian_finds_a_hook_with_wrong_values():
    x = np.linspace(0, 3, 6)[:, None]
    good = _Decay("ok", dtype="float64")
    assert gf.testing.check_example_jacobian(good, x) < 1e-12
    formula = layers.Formula("a*exp(-k*x1)*cos(w*x2)", params={"a": 2.0, "k": 0.3, "w": 1.5},
                             dtype="float64")
    assert gf.testing.check_example_jacobian(formula, RNG.uniform(0, 2, (5, 2))) < 1e-12
    wrong = (r"_Decay 'wrong': example_jacobian differs from GradientTape.jacobian for "
             r"\S*k\S*: worst at \[example 2, output 0, entry 0\]: the hook gives 0.361433, "
             r"autodiff -0.361433")
    with pytest.raises(AssertionError, match=wrong):
        gf.testing.check_example_jacobian(_Decay("wrongsign", name="wrong", dtype="float64"), x)
    with pytest.raises(ValueError, match="returned 1 tensor"):
        gf.testing.check_example_jacobian(_Decay("short", dtype="float64"), x)
