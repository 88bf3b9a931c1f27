"""Formula: values against NumPy, gradients against finite differences, the whitelist and its
error messages (with the caret under the right column), config, fitting, and no eval."""

import ast
import builtins
import json

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers
from graphfit.core.registry import LAYERS
from graphfit.layers import formula_parser
from graphfit.testing import run_layer_test

X = np.array([0.5, 1.0, 1.7, 2.5, 3.2])  # positive, so log, sqrt and x**(-1/b3) are defined

# (expression, params, NumPy twin of the formula); together they use every function and pi.
FORMULAS = [
    ("b1*(1-exp(-b2*x))", {"b1": 500.0, "b2": 1e-4},
     lambda x, b1, b2: b1 * (1 - np.exp(-b2 * x))),
    ("(b1/b2)*exp(-0.5*((x-b3)/b2)**2)", {"b1": 1.5, "b2": 0.7, "b3": 2.0},
     lambda x, b1, b2, b3: (b1 / b2) * np.exp(-0.5 * ((x - b3) / b2) ** 2)),
    ("b1 - b2*x - arctan(b3/(x-b4))/pi", {"b1": 0.2, "b2": -1e-5, "b3": 1.2e3, "b4": -150.0},
     lambda x, b1, b2, b3, b4: b1 - b2 * x - np.arctan(b3 / (x - b4)) / np.pi),
    ("b1 + b2*cos(2*pi*x/12) + b3*sin(2*pi*x/12)", {"b1": 10.0, "b2": 3.0, "b3": 0.5},
     lambda x, b1, b2, b3: b1 + b2 * np.cos(2 * np.pi * x / 12) + b3 * np.sin(2 * np.pi * x / 12)),
    ("b1*(b2+x)**(-1/b3)", {"b1": -2500.0, "b2": 46.7, "b3": 0.93},
     lambda x, b1, b2, b3: b1 * (b2 + x) ** (-1 / b3)),
    ("log(a*x) + sqrt(c*x) - tan(a*x/4) + tanh(-c*x) + abs(x - c)*atan(+x) - -a**2",
     {"a": 0.8, "c": 1.3},
     lambda x, a, c: (np.log(a * x) + np.sqrt(c * x) - np.tan(a * x / 4) + np.tanh(-c * x)
                      + np.abs(x - c) * np.arctan(x) + a ** 2)),
]


def _caret(message: str) -> tuple[str, int, int]:
    """The quoted line, and the column and width of the carets, from an error message."""
    *_, shown, carets = message.splitlines()
    assert shown.startswith("    ") and carets.startswith("    ")
    start = len(carets) - len(carets.lstrip())
    return shown[4:], start - 4, len(carets.strip())


# ----------------------------------------------------------------------- values and gradients
@pytest.mark.parametrize("expression, params, twin", FORMULAS)
def test_values_match_numpy_in_float64(expression, params, twin):
    layer = layers.Formula(expression, params, dtype="float64")
    out = layer(X)
    assert out.dtype == tf.float64 and tuple(out.shape) == (len(X), 1)
    np.testing.assert_allclose(out.numpy()[:, 0], twin(X, **params), rtol=1e-12)


def test_shapes_batch_and_batch_by_one_agree_and_x1_is_x():
    expected = 2.0 * X + 1.0
    for x, expression in [(X, "a*x + b"), (X[:, None], "a*x + b"), (X[:, None], "a*x1 + b"),
                          (X, "a*x1 + b")]:
        out = layers.Formula(expression, {"a": 2.0, "b": 1.0}, dtype="float64")(x)
        np.testing.assert_allclose(out.numpy(), expected[:, None], rtol=1e-15)


def test_several_columns_x1_is_column_0_and_unused_columns_are_allowed():
    x = np.random.default_rng(0).uniform(0.5, 2.0, size=(6, 4))
    layer = layers.Formula("a*x1 + b*x2**2 - exp(-x4)", {"a": 3.0, "b": -0.5}, dtype="float64")
    expected = 3.0 * x[:, 0] - 0.5 * x[:, 1] ** 2 - np.exp(-x[:, 3])
    np.testing.assert_allclose(layer(x).numpy()[:, 0], expected, rtol=1e-14)
    with pytest.raises(ValueError, match="was built for inputs with 4 values on axis -1"):
        layer(x[:, :3])


def test_a_formula_without_inputs_gives_one_value_per_example():
    out = layers.Formula("b1 + 2*b2", {"b1": 1.0, "b2": 0.25})(np.zeros((3, 2)))
    np.testing.assert_array_equal(out.numpy(), [[1.5]] * 3)


def _jacobian_by_finite_differences(layer, x, h=1e-6):
    columns = []
    for variable in layer.trainable_variables:
        start = variable.numpy()
        variable.assign(start + h)
        up = layer(x).numpy()[:, 0]
        variable.assign(start - h)
        down = layer(x).numpy()[:, 0]
        variable.assign(start)
        columns.append((up - down) / (2 * h))
    return np.stack(columns, axis=1)


@pytest.mark.parametrize("index", [0, 2, 4, 5])
def test_gradients_with_respect_to_parameters_match_finite_differences(index):
    expression, params, _ = FORMULAS[index]
    layer = layers.Formula(expression, params, dtype="float64")
    x = tf.constant(X)
    with tf.GradientTape() as tape:
        out = layer(x)[:, 0]
    jacobian = tf.stack(tape.jacobian(out, layer.trainable_variables), axis=1).numpy()
    np.testing.assert_allclose(jacobian, _jacobian_by_finite_differences(layer, x), rtol=1e-6,
                               atol=1e-7 * np.abs(jacobian).max())


def test_gradients_golden_boxbod_and_inputs_against_compute_gradient():
    layer = layers.Formula("b1*(1-exp(-b2*x))", {"b1": 500.0, "b2": 0.01}, dtype="float64")
    x = tf.constant(X)
    with tf.GradientTape() as tape:
        total = tf.reduce_sum(layer(x))
    d_b1, d_b2 = tape.gradient(total, layer.trainable_variables)
    # Hand-derived: d/db1 = 1 - exp(-b2 x), d/db2 = b1 x exp(-b2 x).
    np.testing.assert_allclose(d_b1.numpy(), np.sum(1 - np.exp(-0.01 * X)), rtol=1e-13)
    np.testing.assert_allclose(d_b2.numpy(), np.sum(500.0 * X * np.exp(-0.01 * X)), rtol=1e-13)
    theoretical, numerical = tf.test.compute_gradient(lambda t: layer(t), [x])
    np.testing.assert_allclose(theoretical[0], numerical[0], rtol=1e-6, atol=1e-8)


# ----------------------------------------------------------------------------- the contract
# The one-column float32 contract runs from graphfit.testing's examples (test_conformance).
def test_layer_contract_several_columns_float64():
    x = np.random.default_rng(1).uniform(1.0, 2.0, size=(4, 3))
    layer = run_layer_test(
        layers.Formula,
        {"expression": "a*x1/x3 + sqrt(b*x2)", "params": {"a": 1.5, "b": 4.0}, "dtype": "float64"},
        x,
        expected_output_shape=(4, 1),
        expected_trainable=2,
        expected_non_trainable=0,
        reference=lambda layer, x: (1.5 * x[:, 0] / x[:, 2] + np.sqrt(4.0 * x[:, 1]))[:, None],
        rtol=1e-12,
    )
    assert [v.name for v in layer.variables] == [f"{layer.name}/a:0", f"{layer.name}/b:0"]
    assert all(v.dtype == tf.float64 and v.shape == () for v in layer.variables)


def test_values_and_config_keep_the_initial_values_as_given():
    layer = layers.Formula("b1*(1-exp(-b2*x))", {"b1": 500, "b2": 1e-4}, dtype="float64",
                           name="boxbod")
    with pytest.raises(RuntimeError, match="Call it on data first"):
        layer.values()
    layer(X)
    assert layer.values() == {"b1": 500.0, "b2": 1e-4}  # exact: no float32 detour
    layer.variables[1].assign(0.25)
    assert layer.values() == {"b1": 500.0, "b2": 0.25}
    config = layer.get_config()
    assert config == {"name": "boxbod", "dtype": "float64", "expression": "b1*(1-exp(-b2*x))",
                      "params": {"b1": 500.0, "b2": 1e-4}}
    json.dumps(config)
    assert LAYERS.get("Formula").from_config(config).get_config() == config


def test_line_breaks_in_the_expression_read_as_spaces():
    layer = layers.Formula("  b1*x\n  + b2\t", {"b1": 2.0, "b2": 1.0})
    assert layer.expression == "b1*x   + b2"
    np.testing.assert_allclose(layer(X).numpy()[:, 0], 2 * X + 1, rtol=1e-6)


# ------------------------------------------------------------------------------- refusals
P = {"b1": 1.0, "b2": 2.0}

# (expression, a fragment of the message, the column and width of the carets)
REFUSALS = [
    ("x.__class__", "attribute access not allowed", 0, 11),
    ("b1 + b2*x[0]", r"subscripts \(indexing\) not allowed", 8, 4),
    ("b1*(x > b2)", "comparisons not allowed", 4, 6),
    ("b1 + (lambda: b2)()", "lambda not allowed", 6, 10),
    ("b1 + (b2*x)(2)", "only the functions by name can be called", 6, 4),
    ("b1 + (lambda: b2)", "lambda not allowed", 6, 10),
    ("b1 + eval('b2')", "unknown function 'eval'", 5, 4),
    ("__import__('os').system('ls')", "attribute access not allowed", 0, 23),
    ("b1*__import__('os')", "unknown function '__import__'", 3, 10),
    ("open('f') + b1", "unknown function 'open'", 0, 4),
    ("b1*exp(x=b2)", "keyword arguments not allowed", 7, 4),
    ("b1*x + 'b2'", "string literals not allowed", 7, 4),
    ("b1*x^b2", r"'\^' is not a power.*use \*\* for powers", 4, 1),
    ("b1*exp(-c*x)",
     r"unknown name 'c' in \"b1\*exp\(-c\*x\)\" \(parameters: b1, b2; inputs: x", 8, 1),
    ("b1*exp(-b3*x)+b2", "unknown name 'b3'", 8, 2),
    ("b1*exp(-B2*x)+b2", "unknown name 'B2' in .*; did you mean 'b2'\\?", 8, 2),
    ("b1*exps(x)+b2", "unknown function 'exps' in .*; did you mean 'exp'\\?", 3, 4),
    ("b1*exp(x, 2)+b2", r"exp\(\) takes 1 argument, 2 given", 3, 9),
    ("b1*exp()+b2", r"exp\(\) takes 1 argument, 0 given", 3, 5),
    ("b1*(x + b2", "invalid syntax .*'\\(' was never closed", 3, 1),
    ("b1*x +", r"invalid syntax .*\(it ends too early\)", 6, 1),
    ("b1 x + b2", "invalid syntax", 3, 1),
    ("b1*x % b2", "operator '%' is not supported", 5, 1),
    ("np.exp(b1*x) + b2", "np.exp is not allowed.*write exp without the prefix", 0, 6),
    ("exp*b1 + b2*x", "'exp' is a function.*call it as exp", 0, 3),
    ("b1(x) + b2", "'b1' is not a function", 0, 2),
    ("b1*x if b2 else x", "conditional expressions not allowed", 0, 17),
    ("b1*x + b2*True", r"True/False not allowed", 10, 4),
    ("b1*x1 + b2*x", "'x' used together with 'x1'", 11, 1),
    ("e*b1*x + b2", "for Euler's number write exp\\(1\\)", 0, 1),
    ("b1*x0 + b2", r"numbered from 1 \(x1 is column 0\)", 3, 2),
    ("b1 + é*b2*x", "unknown name 'é'", 5, 1),  # ast counts bytes, the caret characters
    ("b1*x + 1e400*b2", "out of the floating-point range", 7, 5),
]


@pytest.mark.parametrize("expression, fragment, column, width", REFUSALS)
def test_refusals_point_at_the_offending_part(expression, fragment, column, width):
    with pytest.raises(ValueError, match=fragment) as caught:
        layers.Formula(expression, P)
    message = str(caught.value)
    assert message.startswith("Formula: ")
    assert _caret(message) == (expression, column, width), message


def test_unknown_name_message_matches_the_documented_layout():
    with pytest.raises(ValueError) as caught:
        layers.Formula("b1*exp(-c*x)", P)
    assert str(caught.value).splitlines()[1:] == ["    b1*exp(-c*x)", "            ^"]


def test_too_deep_expressions_are_refused_without_recursion_errors():
    with pytest.raises(ValueError, match="nested more than 200 levels"):
        layers.Formula("+".join(["x"] * 300) + "+b1+b2", P)
    with pytest.raises(ValueError, match="cannot parse the expression|invalid syntax"):
        layers.Formula("+".join(["x"] * 50_000) + "+b1+b2", P)


@pytest.mark.parametrize(
    "columns, expression, fragment, column",
    [
        (2, "b1*x1 + b2*x3", "input 'x3' needs 3 input columns.*the inputs have 2", 11),
        (3, "b1*x + b2", "'x' stands for a single input column.*name them x1 ... x3", 3),
        (1, "b1*x2 + b2", "input 'x2' needs 2 input columns.*the inputs have 1", 3),
    ],
)
def test_refusals_when_the_inputs_have_too_few_columns(columns, expression, fragment, column):
    layer = layers.Formula(expression, P)
    x = np.ones((4, columns)) if columns > 1 else np.ones((4,))
    with pytest.raises(ValueError, match=fragment) as caught:
        layer(x)
    assert _caret(str(caught.value))[:2] == (expression, column)
    assert not layer.built


def test_refuses_inputs_of_rank_3():
    with pytest.raises(ValueError, match=r"shape \(batch,\) or \(batch, columns\).*\(2, 3, 1\)"):
        layers.Formula("b1*x1 + b2", P)(np.ones((2, 3, 1)))


@pytest.mark.parametrize(
    "expression, params, fragment",
    [
        ("", P, "expression must not be empty.*Received: expression=''"),
        ("  \n ", P, "expression must not be empty"),
        (3.0, P, "expression must be a string.*Received: expression=3.0"),
        ("b1*x", P, r"parameter 'b2' not used.*Received: params=\{'b1': 1.0, 'b2': 2.0\}"),
        ("x", P, "parameters 'b1', 'b2' not used"),
        ("b1*x", [1.0], r"params must be a dict.*Received: params=\[1.0\]"),
        ("b1*x", {"x": 1.0}, "'x' is an input name"),
        ("b1*x", {"x2": 1.0}, "'x2' is an input name"),
        ("b1*x", {"exp": 1.0}, "'exp' is a function"),
        ("b1*x", {"pi": 1.0}, "'pi' is a constant"),
        ("b1*x", {"lambda": 1.0}, "'lambda' is not a usable parameter name"),
        ("b1*x", {"b-1": 1.0}, "'b-1' is not a usable parameter name"),
        ("b1*x", {"b1": True}, "initial value of 'b1' must be a finite number"),
        ("b1*x", {"b1": float("inf")}, "initial value of 'b1' must be a finite number"),
        ("b1*x", {"b1": "1.0"}, "initial value of 'b1' must be a finite number"),
    ],
)
def test_bad_arguments_are_refused_with_the_value_received(expression, params, fragment):
    with pytest.raises(ValueError, match=fragment):
        layers.Formula(expression, params)


def test_x0_and_e_can_be_parameters():
    layer = layers.Formula("a*exp(-(x-x0)**2/(2*s**2)) + e", {"a": 2.0, "x0": 1.0, "s": 0.5,
                                                                "e": 0.1}, dtype="float64")
    expected = 2.0 * np.exp(-((X - 1.0) ** 2) / (2 * 0.25)) + 0.1
    np.testing.assert_allclose(layer(X).numpy()[:, 0], expected, rtol=1e-14)


# ---------------------------------------------------------------------- safety: never eval
def test_construction_and_call_never_eval_exec_or_compile_code(monkeypatch):
    real_compile = builtins.compile

    def ast_only_compile(source, filename, mode, flags=0, *args, **kwargs):
        # ast.parse goes through compile() with PyCF_ONLY_AST: a tree, no code object.
        if not flags & ast.PyCF_ONLY_AST:
            raise AssertionError(f"compile() to code called on {source!r}")
        return real_compile(source, filename, mode, flags, *args, **kwargs)

    def forbidden(*args, **kwargs):
        raise AssertionError(f"eval/exec called on {args!r}")

    monkeypatch.setattr(builtins, "compile", ast_only_compile)
    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    expression, params, twin = FORMULAS[5]
    layer = layers.Formula(expression, params, dtype="float64")
    np.testing.assert_allclose(layer(X).numpy()[:, 0], twin(X, **params), rtol=1e-12)
    with pytest.raises(ValueError, match="unknown function '__import__'"):
        layers.Formula("b1*__import__('os')", {"b1": 1.0})
    parsed = formula_parser.parse("b1 + x", ["b1"])
    assert parsed.evaluate({"b1": tf.constant(1.0), "x": tf.constant(2.0)}, tf.float32) == 3.0


# -------------------------------------------------------------------------------- fitting
def test_fit_with_sgd_follows_gradient_descent_computed_by_hand():
    rng = np.random.default_rng(2)
    x = rng.uniform(-1.0, 1.0, size=(16, 1))
    y = 3.0 * x - 0.5
    # The layer inherits the model's float64, so the data are not rounded to float32.
    model = gf.Sequential([layers.Formula("a*x + b", {"a": 0.0, "b": 0.0})], dtype="float64")
    model.compile(optimizer=gf.optimizers.SGD(learning_rate=0.2), loss="mse")
    history = model.fit(x, y, batch_size=None, epochs=4, verbose=0, shuffle=False)
    # Gradient descent on mean((a x + b - y)^2), by hand in NumPy.
    a = b = 0.0
    losses = []
    for _ in range(4):
        r = a * x + b - y
        losses.append(np.mean(r ** 2))
        a, b = a - 0.2 * 2 * np.mean(r * x), b - 0.2 * 2 * np.mean(r)
    fitted = model.layers[0].values()
    np.testing.assert_allclose([fitted["a"], fitted["b"]], [a, b], rtol=1e-10)
    np.testing.assert_allclose(history.history["loss"], losses, rtol=1e-10)


def test_adam_steps_reduce_the_loss_of_a_nonlinear_curve():
    x = np.linspace(0.0, 5.0, 12)
    y = 4.0 * (1.0 - np.exp(-0.7 * x))
    layer = layers.Formula("b1*(1-exp(-b2*x))", {"b1": 2.0, "b2": 0.2}, dtype="float64")
    optimizer = gf.optimizers.Adam(learning_rate=0.05)

    def loss():
        return tf.reduce_mean((layer(x)[:, 0] - y) ** 2), None

    before = float(loss()[0])
    for _ in range(30):
        optimizer.minimize(loss, layer.trainable_variables)
    assert float(loss()[0]) < 0.2 * before


def test_recipes_reach_formula_by_name_and_report_a_bad_expression():
    text = ("data: {source: moons}\n"
            "model: [{type: Formula, expression: 'b1*x1 + b2*x2', params: {b1: 1.0e-4, b2: 1}}]\n"
            "loss: mse\n")
    recipe = gf.recipes.recipe_from_text(text, "curve.yaml")
    assert recipe.model["layers"][0]["params"] == {"b1": 1e-4, "b2": 1}
    with pytest.raises(gf.recipes.RecipeError, match=r"unknown name 'B2'.*did you mean 'b2'"):
        gf.recipes.recipe_from_text(text.replace("b2*x2", "B2*x2"), "curve.yaml")
