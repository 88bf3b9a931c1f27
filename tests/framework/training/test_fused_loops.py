"""Array loops compiled whole by XLA: same numbers as the step-by-step loop; XLA decided once."""

import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers
from graphfit.training import compiled_steps


def ones(y_true, y_pred):
    del y_pred
    return tf.ones_like(tf.cast(y_true, tf.float32))


def digit_count(y_true, y_pred):
    """A metric whose op (AsString) XLA has no kernel for: the loop cannot be fused."""
    del y_pred
    text = tf.strings.as_string(tf.cast(y_true, tf.int64))
    return tf.cast(tf.strings.length(text), tf.float32)


def _fit(metric, x, y, steps_per_execution=8, **compile_kwargs):
    gf.set_seed(3)
    model = gf.Sequential([layers.Dense(16, activation="relu"), layers.Dense(4)],
                          input_shape=(8,))
    model.compile(optimizer=optimizers.SGD(0.1, momentum=0.9), metrics=["accuracy", metric],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=True, steps_per_execution=steps_per_execution, **compile_kwargs)
    history = model.fit(x, y, batch_size=16, epochs=2, verbose=0, shuffle=False,
                        validation_data=(x[:168], y[:168]))  # 10 batches and one of 8
    return model, history.history


@pytest.fixture(scope="module")
def fits():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((200, 8)).astype(np.float32)  # 12 full batches and one of 8
    y = (x[:, :4].argmax(axis=1)).astype(np.int32)
    fused = _fit(ones, x, y)
    stepwise = _fit(ones, x, y, steps_per_execution=compiled_steps.MIN_FUSED_STEPS - 1)
    return x, y, fused, stepwise


def test_a_chunk_is_one_xla_program_and_matches_the_step_by_step_loop(fits):
    x, _, (fused, fused_logs), (stepwise, stepwise_logs) = fits
    steps = fused.compile_state.steps
    assert steps.loop_kind("train", 8) == "xla_chunk" and steps.loop_kind("val", 8) == "xla_chunk"
    # Chunks shorter than MIN_FUSED_STEPS run one XLA program per step.
    assert stepwise.compile_state.steps.loop_kind("train", 7) == "xla_step"
    assert stepwise.compile_state.steps.tracing_counts().get("train_arrays_fused", 0) == 0
    assert stepwise_logs["ones"] == [1.0, 1.0] and fused_logs["ones"] == [1.0, 1.0]
    for key in ("loss", "accuracy", "val_loss", "val_accuracy"):
        np.testing.assert_allclose(fused_logs[key], stepwise_logs[key], rtol=1e-5, atol=1e-6)
    for a, b in zip(fused.get_weights(), stepwise.get_weights()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # By hand: the fused loop's accuracy is that of the weights after training.
    logits = fused.predict(x[:160], verbose=0)
    assert fused.evaluate(x[:160], fits[1][:160], verbose=0, return_dict=True)["accuracy"] == \
        pytest.approx(float(np.mean(logits.argmax(axis=1) == fits[1][:160])))


def test_one_program_serves_every_chunk_size_and_the_loops_trace_once(fits):
    _, _, (fused, _), _ = fits
    counts = fused.compile_state.steps.tracing_counts()
    # The chunks of 8 steps run fused, the last partial batches per step: each traced once.
    assert counts["train_arrays_fused"] == 1 and counts["val_arrays_fused"] == 1
    assert counts["train_arrays"] == 1 and counts["val_arrays"] == 1
    assert counts["train_step"] == 1 and counts["test_step"] == 1


def test_arrays_of_many_lengths_go_back_to_the_step_by_step_loop(fits):
    _, _, (fused, _), _ = fits
    steps = compiled_steps.CompiledSteps(fused, fused.compile_state.loss_set, fused.optimizer,
                                         fused.compile_state.stage_metrics, jit_compile=True)
    for length in range(1, compiled_steps.MAX_DATA_SIZES + 1):
        assert steps.fuses("train", (tf.zeros([length, 2]),), capacity=8)
    assert steps.fuses("train", (tf.zeros([1, 2]),), capacity=8)  # a length compiled for
    assert not steps.fuses("train", (tf.zeros([99, 2]),), capacity=8)
    assert steps.fuses("val", (tf.zeros([99, 2]),), capacity=8)  # each stage counts its own
    assert not steps.fuses("val", (tf.zeros([99, 2]),), capacity=7)  # too short a chunk


def test_padding_keeps_the_rows_and_fills_with_the_first_sample():
    padded = compiled_steps.pad_rows(np.array([[5, 6], [7, 8]]), 4)
    assert padded.dtype == np.int32 and padded.tolist() == [[5, 6], [7, 8], [0, 0], [0, 0]]
    assert compiled_steps.pad_rows(np.array([[1, 2]]), 1).tolist() == [[1, 2]]


def test_new_batch_shapes_compile_again_and_never_drop_xla_in_the_middle_of_fit():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((24, 3)).astype(np.float32)
    y = rng.standard_normal((24, 1)).astype(np.float32)
    model = gf.Sequential([layers.Dense(1)], input_shape=(3,))
    model.compile("sgd", "mse", jit_compile="auto")
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    steps = model.compile_state.steps
    assert steps.jit_compile
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "running without XLA" warning any more
        for batch_size in (7, 5, 3):
            model.fit(x, y, batch_size=batch_size, epochs=1, verbose=0)
    assert model.compile_state.steps is steps and steps.jit_compile
    assert steps.tracing_counts()["train_step"] == 1  # the batch dimension is left open


def test_a_metric_xla_cannot_compile_surfaces_with_what_to_do():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((160, 8)).astype(np.float32)  # 10 batches: one XLA program
    y = x[:, :4].argmax(axis=1).astype(np.int32)
    with pytest.raises(tf.errors.InvalidArgumentError) as error:
        _fit(digit_count, x, y)
    assert "compile with jit_compile=False" in "".join(getattr(error.value, "__notes__", []))


@pytest.mark.parametrize("optimizer", ["sgd", "LevenbergMarquardt"])
def test_no_variable_a_compiled_fit_creates_is_int32(optimizer):
    # TensorFlow keeps int32 variables in host memory; an XLA program on a GPU cannot read or
    # write them ("Trying to access resource ... located in device CPU:0 from device GPU:0").
    created = []

    def record(next_creator, **kwargs):
        variable = next_creator(**kwargs)
        created.append((variable.name, variable.dtype))
        return variable

    rng = np.random.default_rng(2)
    x = rng.standard_normal((24, 3)).astype(np.float32)
    y = rng.standard_normal((24, 1)).astype(np.float32)
    with tf.variable_creator_scope(record):
        model = gf.Sequential([layers.Dense(2, activation="tanh"), layers.Dense(1)],
                              input_shape=(3,))
        model.compile(optimizer, "mse", metrics=["mae"], jit_compile=True)
        model.fit(x, y, batch_size=8, epochs=1, verbose=0, validation_data=(x, y))
    assert model.compile_state.steps.jit_compile
    assert created and not [name for name, dtype in created if dtype == tf.int32]


@pytest.mark.parametrize("metric", ["accuracy", digit_count])
def test_a_dataset_batch_is_one_xla_program_with_the_numbers_of_the_arrays(metric):
    # Under XLA a dataset's loop runs each batch's step and metric updates as one program
    # (not the step's program, then the metrics' ops one by one): the same weights and logs as
    # the same batches from memory. A metric XLA cannot compile runs beside the step instead.
    rng = np.random.default_rng(0)
    x = rng.standard_normal((160, 8)).astype(np.float32)
    y = x[:, :4].argmax(axis=1).astype(np.int32)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
    models, logs = [], []
    for fit_data in ({"x": data, "validation_data": data},
                     {"x": x, "y": y, "batch_size": 16, "validation_data": (x, y)}):
        gf.set_seed(3)
        model = gf.Sequential([layers.Dense(16, activation="relu"), layers.Dense(4)],
                              input_shape=(8,))
        model.compile(optimizer=optimizers.SGD(0.1, momentum=0.9), metrics=[metric],
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      jit_compile=True, steps_per_execution=4)
        logs.append(model.fit(**fit_data, epochs=2, shuffle=False, verbose=0).history)
        models.append(model)
    assert logs[0] == logs[1]
    for a, b in zip(models[0].get_weights(), models[1].get_weights()):
        np.testing.assert_array_equal(a, b)
    counts = models[0].compile_state.steps.tracing_counts()
    assert counts["train_dataset_batch_fused"] == 1 and counts["val_dataset_batch_fused"] == 1
