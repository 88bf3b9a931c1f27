"""Mixed precision through the whole training machinery (issue 19): XLA and several steps per
call, Levenberg–Marquardt's float32 normal equations, TensorBoard's taps, checkpoints that
move between float32 and mixed, and a recipe from the command line."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import callbacks, cli, layers, optimizers
from graphfit.saving import checkpoints

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _data(samples=128, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples, 6)).astype("float32")
    return x, (x[:, :2].sum(axis=1) > 0).astype("int32")


def _classifier(policy=None, seed=0):
    gf.set_seed(seed)
    model = gf.Sequential([layers.Dense(16, activation="relu", name="hidden"),
                           layers.BatchNormalization(name="norm"), layers.Dense(2, name="head")],
                          input_shape=(6,), dtype=policy)
    return model


_LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _mixed_fit(jit_compile, steps_per_execution):
    x, y = _data()
    model = _classifier()
    model.compile(optimizer=optimizers.SGD(0.1, momentum=0.9), loss=_LOSS,
                  jit_compile=jit_compile, steps_per_execution=steps_per_execution,
                  dtype_policy="mixed_bfloat16")
    history = model.fit(x, y, epochs=2, batch_size=16, shuffle=False, verbose=0)
    assert model.compile_state.jit_compile is jit_compile
    return history.history["loss"], model.get_weights()


@pytest.fixture(scope="module")
def stepwise_mixed_fit():
    """The reference of the comparisons below, trained once: no XLA, one step per call."""
    return _mixed_fit(False, 1)


@pytest.mark.parametrize("jit_compile, steps_per_execution", [(True, 4), (False, 3)])
def test_xla_and_several_steps_per_call_give_the_same_mixed_training(
        stepwise_mixed_fit, jit_compile, steps_per_execution):
    loss_a, weights_a = stepwise_mixed_fit
    loss_b, weights_b = _mixed_fit(jit_compile, steps_per_execution)
    assert loss_b[-1] < loss_b[0]
    # XLA fuses differently from TensorFlow's kernels: a few bfloat16 roundings apart.
    np.testing.assert_allclose(loss_a, loss_b, rtol=0.05)
    for a, b in zip(weights_a, weights_b):
        assert a.dtype == b.dtype == np.float32
        np.testing.assert_allclose(a, b, atol=0.05)


def test_levenberg_marquardt_solves_float32_normal_equations_under_mixed_bfloat16():
    rng = np.random.default_rng(1)
    x = rng.uniform(-2, 2, (200, 1)).astype("float32")
    y = np.tanh(1.5 * x) + 0.5 * x
    gf.set_seed(2)
    model = gf.Sequential([layers.Dense(8, activation="tanh"), layers.Dense(1)],
                          input_shape=(1,), dtype="mixed_bfloat16")
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    history = model.fit(x, y, epochs=6, batch_size=200, verbose=0)
    losses = history.history["loss"]
    # bfloat16 residuals carry ~3 digits: the fit gets to the bfloat16 noise floor, not below.
    assert losses[-1] < 0.05 * losses[0] and losses[-1] < 2e-3
    assert {v.dtype for v in model.optimizer.variables if v.dtype.is_floating} <= {
        tf.float32, tf.float64}
    assert model.layers[0].kernel.dtype == tf.float32


def test_tensorboard_histograms_and_taps_under_mixed_bfloat16(tmp_path):
    x, y = _data()
    model = _classifier("mixed_bfloat16")
    model.compile(optimizer=optimizers.Adam(0.01), loss=_LOSS, metrics=["accuracy"])
    board = callbacks.TensorBoard(str(tmp_path), histogram_freq=1, gradient_taps=["hidden"],
                                  activation_gradient_taps=["hidden"])
    model.fit(x, y, epochs=2, batch_size=32, verbose=0, validation_data=(x, y),
              callbacks=[board])
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    train = EventAccumulator(str(tmp_path / "train"), size_guidance={"tensors": 0})
    train.Reload()
    tags = set(train.Tags()["tensors"])
    assert "loss" in tags
    assert {"weights/hidden/kernel", "gradients/hidden/kernel", "weights/norm/moving_mean",
            "gradient_taps/hidden/hidden/kernel", "activation_gradient_taps/hidden"} <= tags
    losses = [float(tf.make_ndarray(e.tensor_proto)) for e in train.Tensors("loss")]
    assert len(losses) == 2 and all(np.isfinite(losses))


def test_a_float32_checkpoint_resumes_under_mixed_bfloat16_and_back(tmp_path):
    x, y = _data()
    model = _classifier()
    model.compile(optimizer=optimizers.SGD(0.05, momentum=0.9), loss=_LOSS)
    model.fit(x, y, epochs=1, batch_size=32, verbose=0)
    checkpoints.Checkpointer(str(tmp_path / "f32"), model).save_latest(1)
    saved = [v.numpy() for v in model.variables + model.optimizer.variables]

    mixed = _classifier(seed=7)
    mixed.compile(optimizer=optimizers.SGD(0.05, momentum=0.9), loss=_LOSS,
                  dtype_policy="mixed_bfloat16")
    mixed.fit(x[:32], y[:32], epochs=1, batch_size=32, verbose=0)  # creates the slots
    assert checkpoints.restore_latest(mixed, str(tmp_path / "f32"))["epoch"] == 1
    restored = [v.numpy() for v in mixed.variables + mixed.optimizer.variables]
    for a, b in zip(saved, restored):
        np.testing.assert_array_equal(a, b)  # weights, momentum slots, iterations
    mixed.fit(x, y, epochs=2, initial_epoch=1, batch_size=32, verbose=0)
    checkpoints.Checkpointer(str(tmp_path / "mixed"), mixed).save_latest(2)

    back = _classifier(seed=9)
    back.compile(optimizer=optimizers.SGD(0.05, momentum=0.9), loss=_LOSS)
    back.fit(x[:32], y[:32], epochs=1, batch_size=32, verbose=0)
    assert checkpoints.restore_latest(back, str(tmp_path / "mixed"))["epoch"] == 2
    for a, b in zip(mixed.get_weights(), back.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert back.layers[0].compute_dtype == tf.float32
    wide = _classifier("float64")
    wide.compile(optimizer=optimizers.SGD(0.05, momentum=0.9), loss=_LOSS)
    with pytest.raises(ValueError, match="holds float32 variables, and the model's are float64 "
                                         r"\(dtype policy 'float64'\)"):
        checkpoints.restore_latest(wide, str(tmp_path / "mixed"))


def test_a_mixed_model_exports_float32_signatures(tmp_path):
    x, y = _data()
    model = _classifier("mixed_bfloat16")
    model.compile(optimizer=optimizers.Adam(0.01), loss=_LOSS)
    model.fit(x, y, epochs=2, batch_size=32, verbose=0)
    model.export(str(tmp_path / "export"))
    served = tf.saved_model.load(str(tmp_path / "export"))
    predict = served.signatures["predict"]
    assert predict.structured_input_signature[1]["x"].dtype == tf.float32
    outputs = predict(x=tf.constant(x[:8]))["outputs"]
    assert outputs.dtype == tf.float32
    # Another graph, other fusions: the same up to a few bfloat16 roundings.
    np.testing.assert_allclose(outputs, model.predict(x[:8], verbose=0).astype("float32"),
                               rtol=2e-2, atol=1e-2)
    probabilities = served.signatures["classify"](x=tf.constant(x[:8]))["probabilities"]
    assert probabilities.dtype == tf.float32
    np.testing.assert_allclose(tf.reduce_sum(probabilities, -1), 1.0, rtol=1e-6)


def test_the_mixed_recipe_trains_evaluates_and_predicts_from_the_command_line(tmp_path, capsys):
    recipe = os.path.join(REPO, "recipes", "digits_mixed_bfloat16.yaml")
    run = tmp_path / "run"
    # Without XLA, whose bfloat16 compiles were most of this test's time (mixed training
    # under XLA: test_xla_and_several_steps_per_call_give_the_same_mixed_training and
    # test_a_float32_checkpoint_resumes_under_mixed_bfloat16_and_back).
    assert cli.main(["train", recipe, "--run-dir", str(run), "--verbose", "0",
                     "--set", "training.epochs=3", "--set", "training.jit_compile=false"]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["test"]["accuracy"] > 0.8
    assert cli.main(["evaluate", str(run)]) == 0
    assert "accuracy" in capsys.readouterr().out
    images, _ = gf.datasets.load_digits()
    inputs, output = tmp_path / "new.csv", tmp_path / "predictions.csv"
    np.savetxt(inputs, images[:20], delimiter=",", comments="",
               header=",".join(f"pixel_{i}" for i in range(64)))
    assert cli.main(["predict", str(run), "--input", str(inputs), "--output", str(output)]) == 0
    table = np.loadtxt(output, delimiter=",", skiprows=1)
    probabilities = table[:, 1:]
    # float32 probabilities from the bfloat16 logits: rows sum to 1 at float32's precision.
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-6)
    assert np.array_equal(table[:, 0], probabilities.argmax(axis=1))


@pytest.mark.parametrize("name", ["graph_classes.yaml"])  # ClassMeans: test_dtype_policy
def test_graph_recipes_train_under_mixed_bfloat16(name, tmp_path):
    run = tmp_path / "run"
    assert cli.main(["train", os.path.join(REPO, "recipes", name), "--run-dir", str(run),
                     "--verbose", "0", "--set", "training.epochs=1",
                     "--set", "training.dtype=mixed_bfloat16"]) == 0
    metrics = json.loads((run / "metrics.json").read_text())
    assert all(np.isfinite(v) for stage in metrics.values() for v in stage.values())


def test_a_float32_run_resumes_under_mixed_bfloat16_from_the_command_line(tmp_path, capsys):
    from graphfit.recipes import load_recipe
    from graphfit.recipes.running import run_directory, runner, training_run

    source = os.path.join(REPO, "recipes", "quickstart.yaml")
    cut = tmp_path / "cut"
    # Without XLA, whose compiles were most of this test's time; a float32 checkpoint goes on
    # under mixed_bfloat16 with XLA in test_a_float32_checkpoint_resumes_under_mixed_bfloat16_
    # and_back.
    training_run.train(load_recipe(source, ["training.epochs=1", "training.jit_compile=false"]),
                       run_dir=str(cut), verbose=0)
    for name in os.listdir(cut / "checkpoints"):  # as if killed after epoch 1's checkpoint
        if name.startswith("final"):
            os.remove(cut / "checkpoints" / name)
    os.remove(cut / "metrics.json")
    assert cli.main(["train", "--resume", str(cut), "--set", "training.dtype=float64"]) == 2
    assert "holds float32 variables" in capsys.readouterr().err
    assert cli.main(["train", "--resume", str(cut), "--verbose", "0", "--set",
                     "training.epochs=2", "--set", "training.dtype=mixed_bfloat16"]) == 0
    resumed, _ = runner.load_run(str(cut))
    assert resumed.model.dtype_policy.name == "mixed_bfloat16"  # recorded in the run
    assert run_directory.read_yaml(str(cut / "overrides.yaml"))[-2:] == [
        "training.epochs=2", "training.dtype=mixed_bfloat16"]
    history = json.loads((cut / "history.json").read_text())
    assert len(history["loss"]) == 2 and history["loss"][1] < history["loss"][0]


def test_embedding_float_ids_stay_exact_under_a_16_bit_compute_dtype():
    ids = np.array([[257.0, 1001.0, 2049.0, 4097.0]], "float32")  # bfloat16 rounds them all
    for policy in ("mixed_bfloat16", "mixed_float16"):
        model = gf.Sequential([layers.Embedding(5000, 2)], dtype=policy)
        looked_up = model(ids)
        rows = tf.cast(model.layers[0].embeddings.numpy()[ids.astype(int)], looked_up.dtype)
        np.testing.assert_array_equal(looked_up.numpy(), rows.numpy())


def test_a_recipe_dtype_that_is_no_policy_is_a_recipe_problem(tmp_path, capsys):
    recipe = os.path.join(REPO, "recipes", "digits_mixed_bfloat16.yaml")
    assert cli.main(["validate", recipe, "--set", "training.dtype=bfloat16"]) == 2
    err = capsys.readouterr().err
    assert "training.dtype: must be one of" in err and "use 'mixed_bfloat16'" in err


def test_a_loss_scale_optimizers_inner_optimizer_is_checked_key_by_key(tmp_path, capsys):
    recipe = os.path.join(REPO, "recipes", "digits_mixed_bfloat16.yaml")
    wrapped = ["--set", "optimizer={type: LossScaleOptimizer, inner_optimizer: {type: SGD}}"]
    assert cli.main(["validate", recipe, *wrapped,
                     "--set", "optimizer.inner_optimizer.momentun=0.9"]) == 2
    assert ("optimizer.inner_optimizer.momentun: SGD has no argument 'momentun'; did you "
            "mean 'momentum'?") in capsys.readouterr().err
    scheduled = tmp_path / "scheduled.yaml"
    scheduled.write_text(open(recipe).read() + """
callbacks: [{type: ReduceLROnPlateau, patience: 1}]
""")
    schedule = ("optimizer.inner_optimizer.learning_rate={type: ExponentialDecay, "
                "initial_learning_rate: 0.1, decay_steps: 10, decay_rate: 0.9}")
    assert cli.main(["validate", str(scheduled), *wrapped, "--set", schedule]) == 2
    assert "ReduceLROnPlateau sets the learning rate, but optimizer.learning_rate is a " \
        "schedule" in capsys.readouterr().err
