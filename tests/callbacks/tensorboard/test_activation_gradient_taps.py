"""Activation gradient taps: TensorBoard's `activation_gradient_taps`, ∂loss/∂(output of a named
layer) read from the compiled step's own backward pass, checked against an independent
GradientTape (norms and histograms read back with TensorBoard's own event reader)."""

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import graphfit as gf
from graphfit import cli, layers
from graphfit.callbacks import TensorBoard
from graphfit.training.activation_taps import ActivationTaps

LR = 0.3
BATCH = 4


def _values(folder):
    """{tag: [(step, value)]} of one run."""
    events = EventAccumulator(str(folder), size_guidance={"tensors": 0})
    events.Reload()
    return {tag: [(e.step, tf.make_ndarray(e.tensor_proto)) for e in events.Tensors(tag)]
            for tag in events.Tags()["tensors"]}


def _data(n=8, features=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features)).astype("float32")
    return x, (np.tanh(x @ rng.normal(size=(features, 2))) + 0.3).astype("float32")


def _mlp(seed=0):
    tf.random.set_seed(seed)
    return gf.Sequential([layers.Dense(5, activation="tanh", name="hidden"),
                          layers.Dense(3, activation="relu", name="middle"),
                          layers.Dense(2, name="out")], input_shape=(3,))


def _reference(model, x, y, steps):
    """An independent GradientTape and plain SGD, from the model's current weights:
    [{layer: ∂loss/∂(layer output)}] for each step, on the batches `fit` runs unshuffled."""
    weights = [tf.Variable(v) for v in model.trainable_variables]
    names = ["hidden", "middle", "out"]
    gradients = []
    for step in range(steps):
        start = (step * BATCH) % len(x)
        xb, yb = x[start:start + BATCH], y[start:start + BATCH]
        with tf.GradientTape() as tape:
            h, acts = tf.constant(xb), {}
            for k, name in enumerate(names):
                h = h @ weights[2 * k] + weights[2 * k + 1]
                h = {"hidden": tf.tanh, "middle": tf.nn.relu, "out": tf.identity}[name](h)
                acts[name] = h
            loss = tf.reduce_mean(tf.square(h - yb))
        grads = tape.gradient(loss, [*acts.values(), *weights])
        gradients.append({n: g.numpy().astype(np.float64) for n, g in zip(names, grads)})
        for w, g in zip(weights, grads[len(names):]):
            w.assign_sub(LR * g)
    return gradients


@pytest.mark.parametrize("jit_compile, steps_per_execution", [
    ("auto", 1), ("auto", 2), (False, 3)])
def test_norms_and_histograms_equal_an_independent_tape(tmp_path, jit_compile,
                                                        steps_per_execution):
    x, y = _data()
    model = _mlp()
    model.compile(optimizer=gf.optimizers.SGD(LR), loss="mse", jit_compile=jit_compile,
                  steps_per_execution=steps_per_execution)
    expected = _reference(model, x, y, steps=4)
    board = TensorBoard(str(tmp_path), activation_gradient_taps=["hidden", "middle", "out"])
    model.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0, callbacks=[board])

    run = _values(tmp_path / "train")
    for name in ("hidden", "middle", "out"):
        norms = run[f"activation_gradient_taps/{name}/norm"]
        assert [step for step, _ in norms] == [1, 2, 3, 4]
        histograms = run[f"activation_gradient_taps/{name}"]
        assert [step for step, _ in histograms] == [1, 2, 3, 4]
        for (step, norm), (_, histogram), gradient in zip(norms, histograms, expected):
            want = gradient[name]
            np.testing.assert_allclose(float(norm), np.linalg.norm(want), rtol=1e-5,
                                       err_msg=f"{name} at step {step}")
            assert histogram.shape == (30, 3)
            assert histogram[:, 2].sum() == want.size  # every element of the batch
            np.testing.assert_allclose([histogram[0, 0], histogram[-1, 1]],
                                       [want.min(), want.max()], rtol=1e-5, atol=1e-9)
            inside = (want >= histogram[4, 0]) & (want < histogram[4, 1])
            assert histogram[4, 2] == inside.sum()  # a bucket holds what lies in its range


@pytest.mark.parametrize("scale, board_args, rtol", [
    (None, {"gradient_taps": ["middle", "out"]}, 1e-5),  # gradient taps backprop in the forward
    (2.0**15, {}, 2e-2),  # mixed_float16: minimize differentiates loss × 2**15
    (2.0**16, {}, 2e-2),  # which is inf in float16: divided out in float64
], ids=["with_gradient_taps", "loss_scaled", "loss_scaled_past_float16"])
def test_the_loss_gradient_is_recorded_whatever_else_differentiates(tmp_path, scale,
                                                                   board_args, rtol):
    x, y = _data()
    model = _mlp()
    optimizer = gf.optimizers.SGD(LR)
    if scale is None:
        model.compile(optimizer=optimizer, loss="mse")
    else:
        model.compile(optimizer=gf.optimizers.LossScaleOptimizer(optimizer, initial_scale=scale),
                      loss="mse", dtype_policy="mixed_float16")
    expected = _reference(model, x, y, steps=2)
    board = TensorBoard(str(tmp_path), activation_gradient_taps=["hidden", "middle"],
                        **board_args)
    model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=False, verbose=0, callbacks=[board])
    run = _values(tmp_path / "train")
    for name in ("hidden", "middle"):
        norms = [float(norm) for _, norm in run[f"activation_gradient_taps/{name}/norm"]]
        np.testing.assert_allclose(norms, [np.linalg.norm(g[name]) for g in expected],
                                   rtol=rtol, err_msg=name)


def test_written_every_n_steps_at_their_global_steps(tmp_path):
    x, y = _data(n=24)
    model = _mlp()
    model.compile(optimizer="sgd", loss="mse", steps_per_execution=4)
    board = TensorBoard(str(tmp_path), activation_gradient_taps=["middle"],
                        activation_gradient_tap_freq=3)
    model.fit(x, y, batch_size=BATCH, epochs=2, verbose=0, callbacks=[board])  # 12 steps
    run = _values(tmp_path / "train")
    series = run["activation_gradient_taps/middle/norm"]
    assert [step for step, _ in series] == [3, 6, 9, 12]
    assert all(np.isfinite(float(v)) and float(v) > 0 for _, v in series)
    assert "activation_gradient_taps/middle" in run and not any(
        tag.startswith("activation_gradient_taps/hidden") for tag in run)


def _train(taps, jit_compile, steps_per_execution, tmp_path, start):
    x, y = _data(n=16)
    model = _mlp()
    for variable, value in zip(model.trainable_variables, start):
        variable.assign(value)
    model.compile(optimizer=gf.optimizers.SGD(0.1, momentum=0.9), loss="mse",
                  jit_compile=jit_compile, steps_per_execution=steps_per_execution)
    board = TensorBoard(str(tmp_path), activation_gradient_taps=taps)
    history = model.fit(x, y, batch_size=BATCH, epochs=3, shuffle=False, verbose=0,
                        callbacks=[board])
    graph = model.compile_state.steps.train_step_graph()
    matmuls = sum(op.type == "MatMul" for op in graph.get_operations())
    return [v.numpy() for v in model.trainable_variables], history.history["loss"], matmuls


@pytest.mark.parametrize("jit_compile, steps_per_execution", [("auto", 2), (False, 1)])
def test_weight_updates_are_bit_identical_with_the_taps_on(tmp_path, jit_compile,
                                                           steps_per_execution):
    start = [v.numpy() for v in _mlp(seed=3).trainable_variables]
    without, loss_without, matmuls = _train(None, jit_compile, steps_per_execution,
                                            tmp_path / "a", start)
    with_taps, loss_with, tapped_matmuls = _train(["hidden", "out"], jit_compile,
                                                  steps_per_execution, tmp_path / "b", start)
    assert not np.array_equal(without[0], start[0])  # it trained
    for a, b in zip(without, with_taps):
        np.testing.assert_array_equal(a, b)
    assert loss_without == loss_with
    # No second forward or backward pass: the step multiplies exactly as often (3 forward,
    # 5 backward: the first layer's input gradient is never needed).
    assert tapped_matmuls == matmuls == 8


def test_an_unknown_layer_name_fails_with_a_did_you_mean(tmp_path):
    x, y = _data()
    model = _mlp()
    model.compile(optimizer="sgd", loss="mse")
    board = TensorBoard(str(tmp_path), activation_gradient_taps=["hiden"])
    with pytest.raises(ValueError, match=r"no layer named 'hiden' to tap\. For 'hiden', did "
                                         r"you mean 'hidden'\? Its layers: \['hidden', "
                                         r"'middle', 'out'\]\.$"):
        model.fit(x, y, epochs=1, verbose=0, callbacks=[board])
    # "loss" and "output" are nodes of gradient_taps, not layers whose output has a gradient.
    board = TensorBoard(str(tmp_path), activation_gradient_taps=["loss"])
    with pytest.raises(ValueError, match=r"no layer named 'loss' to tap"):
        model.fit(x, y, epochs=1, verbose=0, callbacks=[board])


@pytest.mark.parametrize("arguments, named", [
    ({"activation_gradient_taps": "hidden"}, "activation_gradient_taps='hidden'"),
    ({"activation_gradient_taps": []}, "activation_gradient_taps=[]"),
    ({"activation_gradient_taps": ["a", "a"]}, "activation_gradient_taps=['a', 'a']"),
    ({"activation_gradient_taps": ["a"], "activation_gradient_tap_freq": 0},
     "activation_gradient_tap_freq=0"),
])
def test_bad_arguments_name_the_argument_and_value(tmp_path, arguments, named):
    with pytest.raises(ValueError, match=f"Received: {named}".replace("[", r"\[")):
        TensorBoard(str(tmp_path / "logs"), **arguments)


def test_a_shared_layer_is_refused_clearly(tmp_path):
    class TwoPasses(gf.Model):  # shares one layer between two calls
        def __init__(self):
            super().__init__()
            self.shared = layers.Dense(3, name="shared")
            self.head = layers.Dense(2, name="head")

        def call(self, x, training=False):
            return self.head(self.shared(x) + self.shared(x))

    x, y = _data()
    model = TwoPasses()
    model.compile(optimizer="sgd", loss="mse")
    board = TensorBoard(str(tmp_path), activation_gradient_taps=["shared"])
    with pytest.raises(ValueError, match=r"'shared' ran 2 times in one training forward"):
        model.fit(x, y, epochs=1, verbose=0, callbacks=[board])


def test_levenberg_marquardt_taps_the_gradient_of_its_first_pass(tmp_path):
    x, y = _data(n=BATCH)
    model = _mlp()
    model.compile(optimizer=gf.optimizers.LevenbergMarquardt(), loss="mse")
    expected = _reference(model, x, y, steps=1)[0]  # at the weights the step starts from
    board = TensorBoard(str(tmp_path), activation_gradient_taps=["hidden", "middle"])
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=[board])
    rows = next(r for r in model.step_recorders if isinstance(r, ActivationTaps)).read()
    assert [step for step, _ in rows] == [1]
    assert sorted(rows[0][1]) == ["hidden", "middle"]
    for name, (norm, _) in rows[0][1].items():
        np.testing.assert_allclose(norm, np.linalg.norm(expected[name]), rtol=1e-5)


def test_per_example_clipping_taps_the_batch_loss_of_its_step(tmp_path):
    # PerExampleClipping is a gradient transform: minimize differentiates the batch loss as
    # usual (the update then uses the clipped per-example gradients), and the taps read that
    # backward pass.
    from graphfit.optimizers import PerExampleClipping

    x, y = _data(n=BATCH)
    model = _mlp()
    model.compile(optimizer=gf.optimizers.SGD(LR, gradient_transforms=[PerExampleClipping(1.0)]),
                  loss="mse")
    expected = _reference(model, x, y, steps=1)[0]
    board = TensorBoard(str(tmp_path), activation_gradient_taps=["hidden"])
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=[board])
    rows = next(r for r in model.step_recorders if isinstance(r, ActivationTaps)).read()
    np.testing.assert_allclose(rows[0][1]["hidden"][0], np.linalg.norm(expected["hidden"]),
                               rtol=1e-5)


def test_from_a_recipe_callbacks_entry(tmp_path):
    recipe = tmp_path / "taps.yaml"
    recipe.write_text(
        "data: {source: moons, n_samples: 64}\n"
        "model: [{type: Dense, units: 4, activation: tanh, name: hidden},\n"
        "        {type: Dense, units: 1}]\n"
        "loss: {type: BinaryCrossentropy, from_logits: true}\n"
        "callbacks:\n  - {type: TensorBoard, log_dir: logs, activation_gradient_taps: [hidden],"
        " activation_gradient_tap_freq: 2}\n"
        "training: {epochs: 1, batch_size: 16, jit_compile: false}\n")
    assert cli.main(["validate", str(recipe)]) == 0
    run = tmp_path / "run"
    assert cli.main(["train", str(recipe), "--run-dir", str(run), "--verbose", "0"]) == 0
    written = _values(run / "logs" / "train")
    steps = [s for s, _ in written["activation_gradient_taps/hidden/norm"]]
    assert steps and all(s % 2 == 0 for s in steps)
