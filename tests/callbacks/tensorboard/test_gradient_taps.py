"""Gradient taps: TensorBoard's `gradient_taps` norms of d(sum of a named node)/d(variables),
computed inside the compiled training step, checked against an independent GradientTape and
read back with TensorBoard's own event reader."""

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import graphfit as gf
from graphfit import cli, layers
from graphfit.callbacks import TensorBoard


def _values(folder):
    """{tag: [(step, value)]} of one run."""
    events = EventAccumulator(str(folder), size_guidance={"tensors": 0})
    events.Reload()
    return {tag: [(e.step, tf.make_ndarray(e.tensor_proto)) for e in events.Tensors(tag)]
            for tag in events.Tags()["tensors"]}


def _taps(run):
    return {tag: series for tag, series in run.items() if tag.startswith("gradient_taps/")}


def _data(n=12, features=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features)).astype("float32")
    return x, (x @ rng.normal(size=(features, 1)) + 0.3).astype("float32")


def _mlp(batch_norm=False):
    hidden = [layers.Dense(4, activation="tanh", name="hidden")]
    if batch_norm:
        hidden.append(layers.BatchNormalization(name="bn"))
    return gf.Sequential([*hidden, layers.Dense(1, name="out")], input_shape=(3,))


def _expected_norms(model, x, y):
    """An independent GradientTape at the model's current weights: {tag: norm}."""
    hidden, out = model.get_layer("hidden"), model.get_layer("out")
    variables = {f"{v.name.split(':')[0].split('/', 1)[1]}": v
                 for v in model.trainable_variables}
    with tf.GradientTape(persistent=True) as tape:
        h = hidden(x)
        y_pred = out(h)
        targets = {"hidden": tf.reduce_sum(h), "output": tf.reduce_sum(y_pred),
                   "loss": tf.reduce_mean(tf.square(y_pred - y))}
    norms = {}
    for node, target in targets.items():
        for tag, variable in variables.items():
            gradient = tape.gradient(target, variable)
            if gradient is not None:
                norms[f"gradient_taps/{node}/{tag}"] = float(tf.norm(gradient))
    return norms


@pytest.mark.parametrize("jit_compile", [False, True])
def test_norms_equal_an_independent_tape_at_the_weights_before_the_update(tmp_path, jit_compile):
    x, y = _data()
    model = _mlp()
    model.compile(optimizer=gf.optimizers.SGD(0.5), loss="mse", jit_compile=jit_compile)
    expected = _expected_norms(model, x, y)  # before the first (and only) step
    board = TensorBoard(str(tmp_path), gradient_taps=["hidden", "output", "loss"])
    model.fit(x, y, batch_size=len(x), epochs=1, shuffle=False, verbose=0, callbacks=[board])

    run = _values(tmp_path / "train")
    written = {tag: series for tag, series in _taps(run).items()}
    # The hidden layer depends on its own variables only: no tap for out/kernel, out/bias.
    assert sorted(written) == sorted(expected)
    assert "gradient_taps/hidden/out/kernel" not in written
    for tag, series in written.items():
        ((step, value),) = series
        assert step == 1, tag
        np.testing.assert_allclose(float(value), expected[tag], rtol=1e-5, err_msg=tag)
    # The update happened (lr 0.5): the taps saw the weights before it.
    assert _expected_norms(model, x, y)["gradient_taps/hidden/hidden/kernel"] != pytest.approx(
        expected["gradient_taps/hidden/hidden/kernel"], rel=1e-3)
    (text,) = run["gradient_taps"]
    assert "no gradient (not upstream of hidden): out/kernel, out/bias" in \
        text[1].item().decode()


@pytest.mark.parametrize("steps_per_execution, freq, expected", [
    (1, 2, [2, 4, 6]),
    (4, 3, [3, 6]),     # a call of 4 steps may hold one recording, or two (steps 4..7: 6)
    (3, 1, [1, 2, 3, 4, 5, 6]),  # every recording of a call is kept, not only its last
])
def test_written_every_n_steps_at_their_global_steps(tmp_path, steps_per_execution, freq,
                                                     expected):
    x, y = _data(n=24)
    model = _mlp()
    model.compile(optimizer="sgd", loss="mse", steps_per_execution=steps_per_execution,
                  jit_compile=False)
    board = TensorBoard(str(tmp_path), gradient_taps=["hidden"], gradient_tap_freq=freq)
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[board])  # 6 steps
    steps = model.compile_state.steps
    traced = steps.tracing_counts()
    model.fit(x, y, batch_size=4, epochs=1, verbose=0, callbacks=[board])  # steps 7..12

    series = _taps(_values(tmp_path / "train"))["gradient_taps/hidden/hidden/kernel"]
    again = [s + 6 for s in expected]
    # Each fit writes its own event file, and the reader takes them in file-name order: two
    # files of the same second and process sort by an unpadded counter (".10" before ".9").
    # TensorBoard plots by step whatever the order, so the steps are compared sorted.
    assert sorted(step for step, _ in series) == expected + again
    assert all(np.isfinite(float(v)) and float(v) > 0 for _, v in series)
    assert steps.tracing_counts() == traced  # the same taps again: no retrace


@pytest.mark.parametrize("jit_compile", [False, True])
def test_update_hooks_run_once_and_training_is_unchanged(tmp_path, jit_compile):
    x, y = _data(n=16)
    results = {}
    for taps in (None, ["hidden", "bn", "output"]):
        model = _mlp(batch_norm=True)
        model.set_weights([np.full_like(w, 0.1 * (i + 1)) if w.ndim == 2 else w
                           for i, w in enumerate(model.get_weights())])
        model.compile(optimizer=gf.optimizers.Adam(0.01), loss="mse", jit_compile=jit_compile)
        hidden = model.get_layer("hidden")
        first_batch_mean = tf.reduce_mean(hidden(x[:8]), axis=0).numpy()
        board = TensorBoard(str(tmp_path / str(taps is None)), gradient_taps=taps)
        model.fit(x[:8], y[:8], batch_size=8, epochs=1, shuffle=False, verbose=0,
                  callbacks=[board])
        # One step: the moving mean moved once, by (1 - momentum) of the batch mean.
        np.testing.assert_allclose(model.get_layer("bn").moving_mean.numpy(),
                                   0.01 * first_batch_mean, rtol=1e-5, atol=1e-7)
        model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0, callbacks=[board])
        results[taps is None] = [v.numpy() for v in model.variables]
    for with_taps, without in zip(results[False], results[True]):
        np.testing.assert_allclose(with_taps, without, rtol=1e-6, atol=1e-7)
    written = _taps(_values(tmp_path / "False" / "train"))
    # Batch-normalized, the sum over the batch of each feature is beta * batch size: it does
    # not depend on the hidden layer's weights at all.
    for _step, value in written["gradient_taps/bn/hidden/kernel"]:
        assert float(value) < 1e-5
    assert [s for s, _ in written["gradient_taps/bn/bn/beta"]] == [1, 2, 3, 4, 5]
    np.testing.assert_allclose([float(v) for _, v in written["gradient_taps/bn/bn/beta"]],
                               [16.0, 8.0, 8.0, 8.0, 8.0], rtol=1e-6)  # √(4 features) · batch


def test_run_eagerly_and_with_gradient_histograms(tmp_path):
    x, y = _data(n=16)
    model = _mlp()
    model.compile(optimizer=gf.optimizers.SGD(0.0), loss="mse", run_eagerly=True)
    board = TensorBoard(str(tmp_path), histogram_freq=1, gradient_taps=["loss"],
                        gradient_tap_freq=2)
    model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0, callbacks=[board])
    run = _values(tmp_path / "train")
    assert "gradients/hidden/kernel" in run  # the histograms' own taps still work
    series = run["gradient_taps/loss/out/kernel"]
    assert [s for s, _ in series] == [2, 4]
    # lr 0 keeps the weights: steps 2 and 4 are the gradients of batches x[4:8] and x[12:].
    np.testing.assert_allclose(
        [float(v) for _, v in series],
        [_expected_norms(model, x[i:i + 4], y[i:i + 4])["gradient_taps/loss/out/kernel"]
         for i in (4, 12)], rtol=1e-5)


def test_levenberg_marquardt_taps_its_first_forward_pass(tmp_path):
    x, y = _data(n=10)
    weights = None
    trained = {}
    for taps in (None, ["hidden", "output"]):
        model = _mlp()
        if weights is None:
            weights = model.get_weights()
        model.set_weights(weights)
        model.compile(optimizer=gf.optimizers.LevenbergMarquardt(), loss="mse")
        expected = _expected_norms(model, x, y)
        board = TensorBoard(str(tmp_path / str(taps is None)), gradient_taps=taps)
        model.fit(x, y, batch_size=None, epochs=1, verbose=0, callbacks=[board])
        trained[taps is None] = model.get_weights()
    # After one step, to float32 rounding: LM's multithreaded reductions already differ in
    # the last bits between two runs, taps or not (and far more after a few steps).
    for with_taps, without in zip(trained[False], trained[True]):
        np.testing.assert_allclose(with_taps, without, rtol=1e-6, atol=1e-7)
    second = _expected_norms(model, x, y)
    model.fit(x, y, batch_size=None, epochs=1, verbose=0, callbacks=[board])
    written = _taps(_values(tmp_path / "False" / "train"))
    assert sorted(written) == sorted(t for t in expected if "/loss/" not in t)
    for tag, series in written.items():
        assert [s for s, _ in series] == [1, 2]
        np.testing.assert_allclose([float(v) for _, v in series], [expected[tag], second[tag]],
                                   rtol=1e-5, err_msg=tag)


def test_embedding_gradients_with_repeated_tokens_are_densified_first(tmp_path):
    tokens = np.array([[1, 1, 2], [2, 1, 0]], dtype="int32")  # token 1 three times
    y = np.array([[0.5], [-1.0]], dtype="float32")
    model = gf.Sequential([layers.Embedding(4, 2, name="embed"), layers.Flatten(),
                           layers.Dense(1, name="out")], input_shape=(3,))
    model.compile(optimizer="sgd", loss="mse", jit_compile=False)
    embeddings = model.get_layer("embed").trainable_variables[0]
    with tf.GradientTape() as tape:
        total = tf.reduce_sum(model(tokens))
    expected = float(tf.norm(tf.convert_to_tensor(tape.gradient(total, embeddings))))
    board = TensorBoard(str(tmp_path), gradient_taps=["output"])
    model.fit(tokens, y, batch_size=2, epochs=1, verbose=0, callbacks=[board])
    ((_, value),) = _values(tmp_path / "train")["gradient_taps/output/embed/embeddings"]
    np.testing.assert_allclose(float(value), expected, rtol=1e-5)


def test_an_unknown_node_names_the_model_layers(tmp_path):
    x, y = _data()
    model = _mlp()
    model.compile(optimizer="sgd", loss="mse")
    board = TensorBoard(str(tmp_path), gradient_taps=["dense_7"])
    with pytest.raises(ValueError, match=r"no layer named 'dense_7' to tap\. Its layers: "
                                         r"\['hidden', 'out'\]; or tap 'output'"):
        model.fit(x, y, epochs=1, verbose=0, callbacks=[board])


class _Shared(gf.Model):
    def __init__(self):
        super().__init__()
        self.twice = layers.Dense(3, name="twice")
        self.head = layers.Dense(1, name="head")

    def call(self, x, training=False):
        return self.head(self.twice(self.twice(x)))


def test_a_layer_called_twice_is_refused(tmp_path):
    x, y = _data()
    model = _Shared()
    model.compile(optimizer="sgd", loss="mse", jit_compile=False)
    board = TensorBoard(str(tmp_path), gradient_taps=["twice"])
    with pytest.raises(ValueError, match="layer 'twice' ran 2 times in one training forward"):
        model.fit(x, y, epochs=1, verbose=0, callbacks=[board])


@pytest.mark.parametrize("arguments, named", [
    ({"gradient_taps": "hidden"}, "gradient_taps='hidden'"),
    ({"gradient_taps": []}, "gradient_taps=[]"),
    ({"gradient_taps": ["hidden", 3]}, "gradient_taps=['hidden', 3]"),
    ({"gradient_taps": ["a", "a"]}, "gradient_taps=['a', 'a']"),
    ({"gradient_taps": ["a"], "gradient_tap_freq": 0}, "gradient_tap_freq=0"),
    ({"gradient_taps": ["a"], "gradient_tap_freq": 2.5}, "gradient_tap_freq=2.5"),
    ({"gradient_taps": ["a"], "gradient_tap_freq": True}, "gradient_tap_freq=True"),
])
def test_bad_arguments_name_the_argument_and_value(tmp_path, arguments, named):
    with pytest.raises(ValueError, match=f"Received: {named}".replace("[", r"\[")):
        TensorBoard(str(tmp_path / "logs"), **arguments)
    assert not (tmp_path / "logs").exists()


def _tap_recipe(tmp_path, training: str, tensorboard: str):
    """A small moons recipe whose `hidden` layer can be tapped; line 6 holds `tensorboard`."""
    recipe = tmp_path / "taps.yaml"
    recipe.write_text(
        "data: {source: moons, n_samples: 64}\n"
        "model: [{type: Dense, units: 4, activation: tanh, name: hidden},\n"
        "        {type: Dense, units: 1}]\n"
        "loss: {type: BinaryCrossentropy, from_logits: true}\n"
        f"callbacks:\n  - {{type: TensorBoard, {tensorboard}}}\n{training}")
    return recipe


def test_from_a_recipe_callbacks_entry(tmp_path):
    recipe = _tap_recipe(tmp_path, "training: {epochs: 1, batch_size: 16, jit_compile: false}\n",
                         "log_dir: logs, gradient_taps: [hidden, loss], gradient_tap_freq: 2")
    assert cli.main(["validate", str(recipe)]) == 0
    run = tmp_path / "run"
    assert cli.main(["train", str(recipe), "--run-dir", str(run), "--verbose", "0"]) == 0
    written = _taps(_values(run / "logs" / "train"))
    assert {"gradient_taps/hidden/hidden/kernel", "gradient_taps/loss/hidden/kernel"} <= \
        set(written)
    steps = [s for s, _ in written["gradient_taps/hidden/hidden/kernel"]]
    assert steps and all(s % 2 == 0 for s in steps)


def test_validate_finds_an_unknown_tap_name_in_a_recipe(tmp_path, capsys):
    recipe = _tap_recipe(tmp_path, "", "gradient_taps: [hiden]")
    assert cli.main(["validate", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert "taps.yaml:6:" in err and "callbacks[0].gradient_taps:" in err
    assert "no layer named 'hiden' to tap" in err and "'hidden'" in err


@pytest.mark.parametrize("loss", ["mse", "binary_crossentropy"])
def test_levenberg_marquardt_steps_the_same_with_and_without_histograms(tmp_path, loss):
    # MSE's rows give its gradient (no backward pass of the loss unless a histogram reads
    # it); a cross-entropy on a sigmoid output is computed by Keras from the logits behind the
    # sigmoid, so its gradient always comes from the loss. Either way TensorBoard only watches:
    # 4 of these 40 labels are confidently wrong (kernel 45), where the two differ most.
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(40, 1))
    y = (x > 0).astype("float64")
    y[:4] = 1 - y[:4]
    trained = []
    for board in (None, TensorBoard(str(tmp_path), histogram_freq=1, write_graph=False)):
        model = gf.Sequential([layers.Dense(1, activation="sigmoid")], input_shape=(1,),
                              dtype="float64")
        model.layers[0].kernel.assign([[45.0]])
        model.compile(optimizer=gf.optimizers.LevenbergMarquardt(), loss=loss,
                      jit_compile=False)
        history = model.fit(x, y, batch_size=None, epochs=10, verbose=0, shuffle=False,
                            callbacks=[board] if board else [])
        trained.append((history.history["loss"], model.get_weights()))
    np.testing.assert_allclose(trained[0][0], trained[1][0], rtol=1e-9)
    for without, with_board in zip(trained[0][1], trained[1][1]):
        np.testing.assert_allclose(without, with_board, rtol=1e-9)
    if loss == "binary_crossentropy":  # 1.62 after 10 epochs; b = Cᵀρ had stalled at 1.87
        assert trained[0][0][-1] < 1.7, trained[0][0]
