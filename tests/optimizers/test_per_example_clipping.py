"""PerExampleClipping (DP-SGD's gradient): hand-computed steps, the plain step when nothing is
clipped, reproducible noise, model.fit with and without XLA, and configs and recipes."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers
from graphfit.optimizers import transforms
from graphfit.optimizers.per_example_clipping import PerExampleClipping

RNG = np.random.default_rng(0)
X = RNG.normal(size=(8, 3)).astype("float32")
Y = RNG.normal(size=(8, 1)).astype("float32")


def trained_weights(gradient_transforms, jit_compile=False, dropout=False, epochs=2):
    keras.utils.set_random_seed(11)
    stack = [layers.Dense(4, activation="tanh")]
    if dropout:
        stack.append(layers.Dropout(0.25, seed=1))
    model = gf.Sequential([*stack, layers.Dense(1)], input_shape=(3,))
    model.compile(optimizer=optimizers.SGD(0.1, momentum=0.5,
                                           gradient_transforms=gradient_transforms),
                  loss="mse", jit_compile=jit_compile)
    model.fit(X, Y, batch_size=4, epochs=epochs, shuffle=False, verbose=0)
    return model.get_weights()


@pytest.mark.parametrize("jit_compile", [False, True])
def test_nothing_clipped_and_no_noise_is_the_plain_step(jit_compile):
    plain = trained_weights([], jit_compile)
    clipped = trained_weights([PerExampleClipping(1e6)], jit_compile)
    for a, b in zip(plain, clipped):
        np.testing.assert_allclose(b, a, atol=1e-6)
    if not jit_compile:
        small = trained_weights([PerExampleClipping(0.01)])
        assert max(np.abs(a - b).max() for a, b in zip(plain, small)) > 1e-3  # clipping bites


def linear_model(kernel, bias):
    model = gf.Sequential([layers.Dense(1)], input_shape=(2,), dtype="float64")
    model.set_weights([np.array(kernel, "float64")[:, None], np.array([bias], "float64")])
    return model


def test_one_step_by_hand_each_example_bounded():
    # y_hat = x . w + b with w = (0.5, -1), b = 0.25; loss mean((y_hat - y)^2). Example i's
    # own gradient is 2 r_i (x_i, 1); the third example is an outlier (residual -10.75).
    x = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 1.0]])
    y = np.array([[1.0], [-2.0], [12.0]])
    w, b, clip, lr = np.array([0.5, -1.0]), 0.25, 1.5, 0.1
    residuals = x @ w + b - y[:, 0]
    own = 2 * residuals[:, None] * np.hstack([x, np.ones((3, 1))])  # (3, 3): dw1, dw2, db
    norms = np.linalg.norm(own, axis=1)
    assert norms.min() < clip < norms.max()  # one kept whole, the others clipped
    clipped = own * np.minimum(1.0, clip / norms)[:, None]
    step = clipped.sum(axis=0) / 3
    model = linear_model(w, b)
    model.compile(optimizer=optimizers.SGD(lr, gradient_transforms=[PerExampleClipping(clip)]),
                  loss="mse")
    model.fit(x, y, batch_size=3, epochs=1, verbose=0)
    kernel, bias = model.get_weights()
    np.testing.assert_allclose(kernel[:, 0], w - lr * step[:2], rtol=1e-12)
    np.testing.assert_allclose(bias, [b - lr * step[2]], rtol=1e-12)
    # No example moves the parameters by more than lr * clip / batch.
    assert np.linalg.norm(clipped, axis=1).max() <= clip * (1 + 1e-12)
    assert np.linalg.norm(np.hstack([kernel[:, 0] - w, bias - b])) <= lr * clip


def test_noise_is_gaussian_of_the_stated_scale_and_reproducible():
    # A perfect fit has zero gradients, so one step moves the weights by -lr * noise / batch,
    # the noise drawn kernel first, then bias, from a generator seeded with `seed`.
    x = np.array([[1.0, 2.0], [3.0, -1.0]])
    w, b, lr, clip, multiplier = np.array([0.5, -1.0]), 0.25, 0.1, 2.0, 1.5

    def one_step(seed):
        model = linear_model(w, b)
        transform = PerExampleClipping(clip, noise_multiplier=multiplier, seed=seed)
        model.compile(optimizer=optimizers.SGD(lr, gradient_transforms=[transform]), loss="mse",
                      jit_compile=False)
        model.fit(x, (x @ w + b)[:, None], batch_size=2, epochs=1, verbose=0)
        return model.get_weights()

    generator = tf.random.Generator.from_seed(3)
    noise_kernel = generator.normal([2, 1], stddev=multiplier * clip, dtype=tf.float64).numpy()
    noise_bias = generator.normal([1], stddev=multiplier * clip, dtype=tf.float64).numpy()
    kernel, bias = one_step(3)
    np.testing.assert_allclose(kernel, w[:, None] - lr * noise_kernel / 2, rtol=1e-12)
    np.testing.assert_allclose(bias, b - lr * noise_bias / 2, rtol=1e-12)
    again = one_step(3)
    np.testing.assert_array_equal(again[0], kernel)
    assert not np.allclose(one_step(4)[0], kernel)


def test_noisy_training_is_reproducible_with_xla():
    first = trained_weights([PerExampleClipping(0.5, 1.0, seed=5)], True, epochs=1)
    second = trained_weights([PerExampleClipping(0.5, 1.0, seed=5)], True, epochs=1)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


def test_a_resumed_run_draws_new_noise_not_the_noise_it_drew_before(tmp_path):
    def compiled():
        keras.utils.set_random_seed(11)
        model = gf.Sequential([layers.Dense(1)], input_shape=(3,))
        optimizer = optimizers.SGD(0.1, gradient_transforms=[PerExampleClipping(0.5, 1.0, seed=5)])
        model.compile(optimizer=optimizer, loss="mse", jit_compile=False)
        return model, optimizer

    model, optimizer = compiled()
    model.fit(X, Y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    path = tf.train.Checkpoint(model=model, optimizer=optimizer).write(str(tmp_path / "ckpt"))
    model.fit(X, Y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    resumed, resumed_optimizer = compiled()
    resumed_optimizer.build(resumed.trainable_variables)
    tf.train.Checkpoint(model=resumed, optimizer=resumed_optimizer).read(path)
    resumed.fit(X, Y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    for a, b in zip(model.get_weights(), resumed.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_dropout_falls_back_to_a_loop_and_trains():
    plain = trained_weights([], dropout=True, epochs=1)
    with pytest.warns(UserWarning, match="RngReadAndSkip.*tf.map_fn"):
        clipped = trained_weights([PerExampleClipping(0.5)], dropout=True, epochs=1)
    assert all(np.isfinite(w).all() for w in clipped)
    assert max(np.abs(a - b).max() for a, b in zip(plain, clipped)) > 0


def test_configs_recipes_and_round_trip():
    config = {"type": "SGD", "learning_rate": 0.1, "gradient_transforms": [
        {"type": "PerExampleClipping", "l2_norm_clip": 1.0, "noise_multiplier": 0.5, "seed": 2}]}
    sgd = optimizers.get(config)
    transform = sgd._gradient_source  # computes the gradient: taken first, before the flags
    assert not sgd._user_transforms.transforms
    assert isinstance(transform, PerExampleClipping)
    assert (transform.l2_norm_clip, transform.noise_multiplier, transform.seed) == (1.0, 0.5, 2)
    assert optimizers.get(optimizers.serialize(sgd)).get_config() == sgd.get_config()
    assert transforms.serialize(transform) == config["gradient_transforms"][0]
    assert isinstance(transforms.get({"type": "PerExampleClipping", "l2_norm_clip": 3}),
                      PerExampleClipping)
    recipe = gf.recipes.recipe_from_text(
        "data: {source: moons}\nmodel: [{type: Dense, units: 1}]\n"
        "loss: {type: BinaryCrossentropy, from_logits: true}\n"
        "optimizer: {type: SGD, gradient_transforms: [{type: PerExampleClipping, "
        "l2_norm_clip: 1.0}]}\n", "dp.yaml")
    assert recipe.optimizer["gradient_transforms"] == [
        {"type": "PerExampleClipping", "l2_norm_clip": 1.0}]
    with pytest.raises(gf.recipes.RecipeError, match="l2_norm_clip must be a positive float"):
        gf.recipes.recipe_from_text(
            "data: {source: moons}\nmodel: [{type: Dense, units: 1}]\n"
            "loss: {type: BinaryCrossentropy, from_logits: true}\n"
            "optimizer: {type: SGD, gradient_transforms: [{type: PerExampleClipping, "
            "l2_norm_clip: -1}]}\n", "dp.yaml")


@pytest.mark.parametrize("arguments, message", [
    ({"l2_norm_clip": 0}, "l2_norm_clip must be a positive float. Received: l2_norm_clip=0"),
    ({"l2_norm_clip": 1, "noise_multiplier": -1}, "Received: noise_multiplier=-1"),
    ({"l2_norm_clip": 1, "seed": 1.5}, "Received: seed=1.5"),
])
def test_bad_arguments(arguments, message):
    with pytest.raises(ValueError, match=message):
        PerExampleClipping(**arguments)


def test_misuse_errors():
    w = tf.Variable([1.0, 2.0])
    sgd = optimizers.SGD(0.1, gradient_transforms=[PerExampleClipping(1.0)])
    with pytest.raises(ValueError, match="needs the batch.*model.fit"):
        sgd.minimize(lambda: (tf.reduce_sum(w * w), None), [w])
    with pytest.raises(ValueError, match="needs the batch.*model.fit"):
        sgd.apply_gradients([(tf.constant([1.0, 1.0]), w)])
    with pytest.raises(ValueError, match="must be the first"):
        optimizers.SGD(0.1, gradient_transforms=[transforms.ClipByNorm(1.0),
                                                 PerExampleClipping(1.0)])
    np.testing.assert_array_equal(w.numpy(), [1.0, 2.0])


def test_weight_penalties_join_the_private_gradient_unclipped():
    """A weight penalty reads no example: its gradient is added after clipping, so with
    nothing clipped and no noise the step is the plain regularized one."""
    def weights(transforms_):
        keras.utils.set_random_seed(11)
        model = gf.Sequential([layers.Dense(4, activation="tanh",
                                            kernel_regularizer=keras.regularizers.L2(0.5)),
                               layers.Dense(1)], input_shape=(3,))
        model.compile(optimizer=optimizers.SGD(0.1, gradient_transforms=transforms_),
                      loss="mse")
        model.fit(X, Y, batch_size=4, epochs=2, shuffle=False, verbose=0)
        return model.get_weights()

    for a, b in zip(weights([]), weights([PerExampleClipping(1e6)])):
        np.testing.assert_allclose(b, a, atol=1e-6)
