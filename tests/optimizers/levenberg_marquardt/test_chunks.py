"""Chunks of a batch for LM's Jacobian passes: real examples only, each counted once."""

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers
from graphfit.optimizers.levenberg_marquardt import chunks as lm_chunks
from graphfit.optimizers.levenberg_marquardt import jacobian as lm_jacobian
from graphfit.optimizers.levenberg_marquardt import matrix_free as lm_matrix_free
from graphfit.optimizers.levenberg_marquardt import update as lm_update
from graphfit.training.compiled_steps import CompiledSteps

RNG = np.random.default_rng(3)


@pytest.mark.parametrize("examples, chunk, starts", [
    (7, 3, [0, 3, 4]),  # the last chunk overlaps the one before by two examples
    (6, 3, [0, 3]),     # a multiple of the chunk: no overlap
    (2, 5, [0]),        # smaller than a chunk: one chunk of the whole batch
])
def test_every_example_is_kept_once_and_chunks_hold_only_real_examples(examples, chunk, starts):
    chunks = lm_chunks.ExampleChunks({"x": tf.range(examples)}, tf.constant(examples), chunk)
    assert int(chunks.count) == len(starts)
    kept = []
    for i, start in enumerate(starts):
        part, keep = chunks.part(i)
        size = min(examples, chunk)
        assert part["x"].numpy().tolist() == list(range(start, start + size))
        kept += part["x"].numpy()[keep.numpy()].tolist()
    assert kept == list(range(examples))


def test_an_empty_batch_has_no_chunks():
    chunks = lm_chunks.ExampleChunks({"x": tf.zeros([0, 2])}, tf.constant(0), 4)
    assert int(chunks.count) == 0
    total = chunks.sum(lambda part, i: tf.constant(1.0), tf.constant(0.0))
    assert float(total) == 0.0


def test_a_layer_that_mixes_examples_sees_only_real_ones_in_the_last_chunk():
    # Rows (x_i − mean of the chunk's x) · θ, as batch normalization centres a batch: the
    # chunk's mean must come from its real examples (padding with zero examples moved it).
    x = tf.constant(RNG.normal(loc=3.0, size=(7, 2)))
    theta = tf.Variable(RNG.normal(size=2))

    def rows_for(part):
        centred = part["x"] - tf.reduce_mean(part["x"], axis=0)
        rows = tf.linalg.matvec(centred, theta)
        return rows, tf.stop_gradient(rows)

    # Chunks of 4: examples 0-3, then 3-6 with example 3 counted already.
    first = x[:4] - tf.reduce_mean(x[:4], axis=0)
    last = (x[3:] - tf.reduce_mean(x[3:], axis=0))[1:]
    c = np.concatenate([first, last])
    expected = c.T @ c
    for mode in ("reverse", "forward"):
        a, g, diag, _, under = lm_jacobian.normal_equations(
            rows_for, {"x": x}, tf.constant(7), 4, [theta], mode, tf.float64)
        np.testing.assert_allclose(a, expected, rtol=1e-12)
        np.testing.assert_allclose(g, c.T @ (c @ theta.numpy()), rtol=1e-12)
        assert not bool(under)
    products = lm_matrix_free.Products(rows_for, {"x": x}, tf.constant(7), 4, [theta])
    v = RNG.normal(size=2)
    np.testing.assert_allclose(products.gauss_newton(tf.constant(v)), expected @ v, rtol=1e-12)
    np.testing.assert_allclose(products.curvature(tf.constant(v)), v @ expected @ v, rtol=1e-12)


def test_a_batch_normalized_model_in_several_chunks_steps_along_the_loss_gradient(monkeypatch):
    # Each chunk is normalized by its own statistics, so Σ Cᵀρ over the chunks is not the
    # whole batch's gradient: b must come from the loss itself.
    gf.set_seed(0)
    model = gf.Sequential([layers.Dense(4), layers.BatchNormalization(),
                           layers.Activation("tanh"), layers.Dense(1)],
                          input_shape=(3,), dtype="float64")
    x, y = RNG.normal(size=(23, 3)), RNG.normal(size=(23, 1))
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
    gradient = tf.concat([tf.reshape(g, [-1])
                          for g in tape.gradient(loss, model.trainable_variables)], 0)
    linearized = []
    original = lm_update.linearize
    monkeypatch.setattr(lm_update, "linearize",
                        lambda *args, **kwargs: linearized.append(original(*args, **kwargs))
                        or linearized[-1])
    model.compile(optimizer=optimizers.LevenbergMarquardt(jacobian_chunk_size=5), loss="mse",
                  run_eagerly=True)
    model.fit(x, y, batch_size=None, epochs=1, shuffle=False, verbose=0)
    np.testing.assert_allclose(linearized[0].b, 0.5 * gradient.numpy(), rtol=1e-10)


@pytest.mark.parametrize("solver", ["direct", "cg"])
def test_a_residual_undefined_at_a_zero_example_fits_in_chunks(solver):
    # Relative residuals (p − y)/y: a zero example padded into the last chunk made every
    # row NaN, and the fit stalled at its first loss.
    x = np.linspace(1.0, 2.0, 23)[:, None]
    losses, start = [], None
    for chunk in (None, 5):
        model = gf.Sequential([layers.Dense(4, activation="tanh"), layers.Dense(1)],
                              input_shape=(1,), dtype="float64")
        start = start or model.get_weights()
        model.set_weights(start)
        # cg: the exact diagonal (random probes are drawn per chunk)
        model.compile(optimizer=optimizers.LevenbergMarquardt(
            jacobian_chunk_size=chunk, solver=solver, cg_diagonal_probes=None),
            loss=optimizers.ResidualLoss(lambda t, p: (p - t) / t))
        history = model.fit(x, 1 + x**2, batch_size=None, epochs=3, verbose=0)
        losses.append(history.history["loss"])
    assert losses[1][-1] < 0.5 * losses[1][0]  # padded, the loss stayed at its first value
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-7)


def test_the_cg_diagonals_count_an_overlapped_example_once():
    # Rows x_i · θ, independent examples; chunks of 4 over 7 examples repeat example 3, made
    # 100 times larger than the others so that counting it twice would double diag(JᵀJ).
    x = RNG.normal(size=(7, 2))
    x[3] *= 100.0
    x = tf.constant(x)
    theta = tf.Variable(RNG.normal(size=2))

    def rows_for(part):
        rows = tf.linalg.matvec(part["x"], theta)
        return rows, tf.stop_gradient(rows)

    expected = np.sum(x.numpy() ** 2, axis=0)  # diag(JᵀJ) = Σᵢ xᵢ², each example once
    for mode in ("per_example", "reverse", "forward"):
        diag = lm_matrix_free.exact_diagonal(rows_for, {"x": x}, tf.constant(7), 4, [theta],
                                             mode)
        np.testing.assert_allclose(diag, expected, rtol=1e-12, err_msg=mode)
    products = lm_matrix_free.Products(rows_for, {"x": x}, tf.constant(7), 4, [theta])
    estimate = products.diagonal_probes(8, tf.constant(3)).numpy()
    # Rademacher probes: unbiased, and here within a few per cent (example 3 dominates);
    # counted twice it would be near 2.
    np.testing.assert_allclose(estimate / expected, [1.0, 1.0], atol=0.15)


def _while_loops(model) -> int:
    graph_def = model.compile_state.steps.train_step_graph().as_graph_def()
    ops = [n.op for n in graph_def.node] + [
        n.op for f in graph_def.library.function for n in f.node_def]
    return ops.count("While")


@pytest.mark.parametrize("mode", ["per_example", "reverse", "forward"])
@pytest.mark.parametrize("examples, dtype", [(9, "float64"), (4, "float64"), (9, "float32")])
def test_a_batch_known_to_fit_one_chunk_gives_the_chunk_loops_numbers_bit_for_bit(
        mode, examples, dtype):
    # 2 rows per example against n = 17 parameters: 4 examples are the m < n system.
    gf.set_seed(2)
    model = gf.Sequential([layers.Dense(3, activation="tanh"), layers.Dense(2)],
                          input_shape=(2,), dtype=dtype)
    x = tf.constant(RNG.normal(size=(examples, 2)), dtype)
    y = tf.constant(RNG.normal(size=(examples, 2)), dtype)
    variables = model.trainable_variables

    @tf.function(autograph=False)
    def linearized(single_chunk):
        def rows_for(part):
            rows = tf.reshape(model(part["x"], training=True) - part["y"], [-1])
            return rows, tf.stop_gradient(rows)

        return lm_jacobian.normal_equations(
            rows_for, {"x": x, "y": y}, tf.shape(x)[0], 16, variables, mode, tf.float64,
            layerwise_rows=2, single_chunk=single_chunk)

    looped, single = linearized(False), linearized(True)
    assert bool(single[4]) == (examples == 4)  # under
    for a, b in zip(looped, single):
        np.testing.assert_array_equal(b.numpy(), a.numpy())


def _fit(batch_sizes, chunk=8, start=None, **fit_args):
    x, y = np.linspace(-1, 1, 32)[:, None], np.sin(3 * np.linspace(-1, 1, 32))[:, None]
    gf.set_seed(0)
    model = gf.Sequential([layers.Dense(3, activation="tanh"), layers.Dense(1)],
                          input_shape=(1,), dtype="float64")
    if start is not None:
        model.set_weights(start)
    model.compile(optimizer=optimizers.LevenbergMarquardt(jacobian_chunk_size=chunk),
                  loss="mse")
    losses = [model.fit(x, y, batch_size=b, epochs=2, shuffle=False, verbose=0,
                        **fit_args).history["loss"] for b in batch_sizes]
    return model, losses


def test_fit_linearizes_its_batches_without_the_chunk_loop_until_they_outgrow_a_chunk():
    model, _ = _fit([8])
    assert _while_loops(model) == 1  # the trial loop only
    steps = model.compile_state.steps.train_step
    model.fit(np.zeros((4, 1)), np.zeros((4, 1)), batch_size=4, verbose=0)
    assert model.compile_state.steps.train_step is steps  # smaller batches: no new trace
    # Batches of 16 do not fit a chunk of 8: the step is traced again, with the chunk loop.
    model.fit(np.zeros((16, 1)), np.zeros((16, 1)), batch_size=16, verbose=0)
    assert _while_loops(model) == 2
    steps = model.compile_state.steps.train_step
    model.fit(np.zeros((32, 1)), np.zeros((32, 1)), batch_size=32, verbose=0)
    assert model.compile_state.steps.train_step is steps  # the loop serves any size


def test_growing_batches_within_a_chunk_keep_the_traced_step():
    model, _ = _fit([8], chunk=None)
    steps = model.compile_state.steps.train_step
    model.fit(np.zeros((32, 1)), np.zeros((32, 1)), batch_size=32, verbose=0)
    assert model.compile_state.steps.train_step is steps
    assert _while_loops(model) == 1


def test_a_fit_without_the_chunk_loop_takes_the_loops_steps_bit_for_bit(monkeypatch):
    _, single = _fit([8, 5])
    original = CompiledSteps.expect_fit  # no promise: the chunk loop, as for a dataset
    monkeypatch.setattr(CompiledSteps, "expect_fit",
                        lambda self, largest, per_pass: original(self, None, per_pass))
    model, looped = _fit([8, 5])
    assert _while_loops(model) == 2
    np.testing.assert_array_equal(single, looped)


def test_a_dataset_fit_after_an_array_fit_gets_the_chunk_loop_back():
    x, y = RNG.normal(size=(12, 2)), RNG.normal(size=(12, 1))
    gf.set_seed(0)
    model = gf.Sequential([layers.Dense(3, activation="tanh"), layers.Dense(1)],
                          input_shape=(2,), dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    model.fit(x, y, batch_size=6, epochs=1, verbose=0)
    assert _while_loops(model) == 1
    # A dataset cannot say how large its batches get.
    model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(6), epochs=1, verbose=0)
    assert _while_loops(model) == 2


def test_the_frozen_feature_cache_traces_its_step_again_for_larger_batches(monkeypatch):
    retraced = []
    original = CompiledSteps.retrace_training
    monkeypatch.setattr(CompiledSteps, "retrace_training",
                        lambda self: retraced.append(self.model) or original(self))
    x, y = RNG.normal(size=(32, 2)), RNG.normal(size=(32, 1))
    gf.set_seed(0)
    model = gf.Sequential([layers.Dense(4, activation="tanh", trainable=False),
                           layers.Dense(3, activation="tanh"), layers.Dense(1)],
                          input_shape=(2,), dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(jacobian_chunk_size=8), loss="mse")
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)  # the whole model's step
    model.fit(x, y, batch_size=8, epochs=1, verbose=0, cache_frozen=True)  # the tail's
    assert retraced == []
    # Only the step a fit trains is traced again: here the cache's tail, not the model's.
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, cache_frozen=True)
    assert len(retraced) == 1 and retraced[0] is not model
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    assert len(retraced) == 2 and retraced[1] is model
