"""Keras's guide "Customizing what happens in fit() with TensorFlow"
(keras-io guides/custom_train_step_in_tensorflow.py), run through Keras and through graphfit.

Each example's classes are the guide's code, written once in `guide_classes(base)` and defined
on `keras.Sequential` and on `gf.Sequential`; the guide's own functional form,
`CustomModel(inputs, outputs)`, is tested once on `keras.Model` and `gf.Model`. Both start
from the same weights, train on the same tiny data in the same order, and must report the same
logs. The GAN example is the guide's `train_step`, on Dense networks and vectors instead of
convolutions and MNIST (the guide's data is downloaded; the suite downloads nothing).

Where graphfit differs by design, the test says so (docs/guides/keras_parity.md lists it):
- `model.metrics` lists each compiled metric object (Keras 3 lists one `compile_metrics`
  container), so the guide's loop that passes `sample_weight` to every metric also weights a
  metric compiled unweighted; Keras routes it to `weighted_metrics` only. `compute_metrics`
  routes it as Keras does.
- graphfit builds a model by tracing its `call` on the data, so the GAN defines `call` (the
  discriminator); the guide's Keras GAN has none.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers

RNG = np.random.default_rng(0)
X = RNG.random((40, 8)).astype("float32")
Y = RNG.random((40, 1)).astype("float32")
SW = RNG.random((40, 1)).astype("float32")
FIT = dict(batch_size=16, shuffle=False, verbose=0)  # 3 batches, the last of 8
# Without XLA, as Keras on a CPU (and faster to trace); the first example runs graphfit's
# default, XLA on a CPU, with the dict-returning step inside one compiled loop.
NO_XLA = dict(jit_compile=False)


def guide_classes(base):
    """The guide's model classes, subclassing `base` (keras.Sequential or gf.Sequential)."""

    class FirstExample(base):
        def train_step(self, data):
            x, y = data
            with tf.GradientTape() as tape:
                y_pred = self(x, training=True)
                loss = self.compute_loss(y=y, y_pred=y_pred)
            trainable_vars = self.trainable_variables
            gradients = tape.gradient(loss, trainable_vars)
            self.optimizer.apply(gradients, trainable_vars)
            for metric in self.metrics:
                if metric.name == "loss":
                    metric.update_state(loss)
                else:
                    metric.update_state(y, y_pred)
            return {m.name: m.result() for m in self.metrics}

    class LowerLevel(base):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.loss_tracker = keras.metrics.Mean(name="loss")
            self.mae_metric = keras.metrics.MeanAbsoluteError(name="mae")
            self.loss_fn = keras.losses.MeanSquaredError()

        def train_step(self, data):
            x, y = data
            with tf.GradientTape() as tape:
                y_pred = self(x, training=True)
                loss = self.loss_fn(y, y_pred)
            trainable_vars = self.trainable_variables
            gradients = tape.gradient(loss, trainable_vars)
            self.optimizer.apply(gradients, trainable_vars)
            self.loss_tracker.update_state(loss)
            self.mae_metric.update_state(y, y_pred)
            return {"loss": self.loss_tracker.result(), "mae": self.mae_metric.result()}

        @property
        def metrics(self):
            return [self.loss_tracker, self.mae_metric]

    class SampleWeights(base):
        def train_step(self, data):
            if len(data) == 3:
                x, y, sample_weight = data
            else:
                sample_weight = None
                x, y = data
            with tf.GradientTape() as tape:
                y_pred = self(x, training=True)
                loss = self.compute_loss(y=y, y_pred=y_pred, sample_weight=sample_weight)
            trainable_vars = self.trainable_variables
            gradients = tape.gradient(loss, trainable_vars)
            self.optimizer.apply(gradients, trainable_vars)
            for metric in self.metrics:
                if metric.name == "loss":
                    metric.update_state(loss)
                else:
                    metric.update_state(y, y_pred, sample_weight=sample_weight)
            return {m.name: m.result() for m in self.metrics}

    class OwnTestStep(base):
        def test_step(self, data):
            x, y = data
            y_pred = self(x, training=False)
            loss = self.compute_loss(y=y, y_pred=y_pred)
            for metric in self.metrics:
                if metric.name == "loss":
                    metric.update_state(loss)
                else:
                    metric.update_state(y, y_pred)
            return {m.name: m.result() for m in self.metrics}

    class ComputeMetrics(base):  # the same step through compute_loss / compute_metrics
        def train_step(self, data):
            x, y, sample_weight = data
            with tf.GradientTape() as tape:
                y_pred = self(x, training=True)
                loss = self.compute_loss(x, y, y_pred, sample_weight)
            self.optimizer.apply_gradients(
                zip(tape.gradient(loss, self.trainable_variables), self.trainable_variables))
            for metric in self.metrics:
                if metric.name == "loss":
                    metric.update_state(loss)
            return self.compute_metrics(x, y, y_pred, sample_weight)

    return dict(FirstExample=FirstExample, LowerLevel=LowerLevel, SampleWeights=SampleWeights,
                OwnTestStep=OwnTestStep, ComputeMetrics=ComputeMetrics)


KERAS, GRAPHFIT = guide_classes(keras.Sequential), guide_classes(gf.Sequential)


def _pair(name):
    """The guide's model `name` in Keras and in graphfit, with the same initial weights."""
    keras.utils.set_random_seed(1)
    reference = KERAS[name]([keras.Input((8,)), keras.layers.Dense(1)])
    model = GRAPHFIT[name]([layers.Dense(1)], input_shape=(8,))
    model.set_weights(reference.get_weights())
    return reference, model


def _close(ours: dict, theirs: dict):
    assert set(ours) == set(theirs)
    for key in theirs:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=2e-5, atol=1e-7, err_msg=key)


def test_first_example_compute_loss_and_self_metrics():
    reference, model = _pair("FirstExample")
    reference.compile(optimizer="adam", loss="mse", metrics=["mae"])
    model.compile(optimizer="adam", loss="mse", metrics=["mae"])
    expected = reference.fit(X, Y, epochs=3, **FIT).history
    _close(model.fit(X, Y, epochs=3, **FIT).history, expected)
    assert set(expected) == {"loss", "mae"}



def test_the_guide_s_own_form_custom_model_of_inputs_and_outputs():
    """The guide's exact construction: `CustomModel(inputs, outputs)` on `keras.Model` /
    `gf.Model` with `keras.Input` / `gf.Input` (a functional model with the overridden step)."""
    keras_class = guide_classes(keras.Model)["FirstExample"]
    graphfit_class = guide_classes(gf.Model)["FirstExample"]
    keras.utils.set_random_seed(1)
    k_inputs = keras.Input(shape=(8,))
    reference = keras_class(k_inputs, keras.layers.Dense(1)(k_inputs))
    inputs = gf.Input(shape=(8,))
    model = graphfit_class(inputs, layers.Dense(1)(inputs))
    assert isinstance(model, graphfit_class)
    model.set_weights(reference.get_weights())
    reference.compile(optimizer="adam", loss="mse", metrics=["mae"])
    model.compile(optimizer="adam", loss="mse", metrics=["mae"], **NO_XLA)
    expected = reference.fit(X, Y, epochs=2, **FIT).history
    _close(model.fit(X, Y, epochs=2, **FIT).history, expected)

def test_lower_level_own_metrics_listed_in_a_metrics_property():
    reference, model = _pair("LowerLevel")
    reference.compile(optimizer="adam")
    model.compile(optimizer="adam", **NO_XLA)
    expected = reference.fit(X, Y, epochs=3, **FIT).history
    # The trackers are reset at each epoch's start (the logs are per-epoch means).
    _close(model.fit(X, Y, epochs=3, **FIT).history, expected)


def test_sample_weight_example():
    reference, model = _pair("SampleWeights")
    reference.compile(optimizer="adam", loss="mse", metrics=["mae"])
    model.compile(optimizer="adam", loss="mse", metrics=["mae"], **NO_XLA)
    expected = reference.fit(X, Y, sample_weight=SW, epochs=2, **FIT).history
    ours = model.fit(X, Y, sample_weight=SW, epochs=2, **FIT).history
    np.testing.assert_allclose(ours["loss"], expected["loss"], rtol=2e-5)
    # Differs by design: the loop hands sample_weight to graphfit's "mae" object itself,
    # where Keras's compile_metrics container drops it for an unweighted metric. Keras with
    # the metric compiled weighted gives graphfit's number.
    weighted, _ = _pair("SampleWeights")
    weighted.compile(optimizer="adam", loss="mse", weighted_metrics=["mae"])
    as_weighted = weighted.fit(X, Y, sample_weight=SW, epochs=2, **FIT).history
    np.testing.assert_allclose(ours["mae"], as_weighted["mae"], rtol=2e-5)
    assert not np.allclose(ours["mae"], expected["mae"], rtol=1e-3)


def test_compute_metrics_routes_sample_weights_as_keras():
    reference, model = _pair("ComputeMetrics")
    reference.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", metrics=["mae"],
                      weighted_metrics=["msle"])
    model.compile(optimizer=optimizers.SGD(0.1), loss="mse", metrics=["mae"],
                  weighted_metrics=["msle"], **NO_XLA)
    expected = reference.fit(X, Y, sample_weight=SW, epochs=2, **FIT).history
    _close(model.fit(X, Y, sample_weight=SW, epochs=2, **FIT).history, expected)


def test_own_test_step_in_evaluate_and_in_validation():
    reference, model = _pair("OwnTestStep")
    reference.compile(loss="mse", metrics=["mae"])
    model.compile(loss="mse", metrics=["mae"], **NO_XLA)
    expected = reference.evaluate(X, Y, batch_size=16, verbose=0)
    np.testing.assert_allclose(model.evaluate(X, Y, batch_size=16, verbose=0), expected,
                               rtol=2e-5)
    # In fit, validation and test each run it on their own metric objects.
    history = model.fit(X, Y, epochs=1, validation_data=(X[:16], Y[:16]),
                        test_data=(X, Y), **FIT).history
    np.testing.assert_allclose([history["test_loss"][0], history["test_mae"][0]],
                               model.evaluate(X, Y, batch_size=16, verbose=0), rtol=2e-5)
    np.testing.assert_allclose(history["val_loss"][0],
                               model.evaluate(X[:16], Y[:16], batch_size=16, verbose=0)[0],
                               rtol=2e-5)


# --------------------------------------------------------------------------- the GAN
LATENT, IMAGE = 4, 6


def gan_class(base):
    class GAN(base):
        def __init__(self, discriminator, generator, latent_dim):
            super().__init__()
            self.discriminator = discriminator
            self.generator = generator
            self.latent_dim = latent_dim
            self.d_loss_tracker = keras.metrics.Mean(name="d_loss")
            self.g_loss_tracker = keras.metrics.Mean(name="g_loss")
            self.seed_generator = keras.random.SeedGenerator(1337)

        @property
        def metrics(self):
            return [self.d_loss_tracker, self.g_loss_tracker]

        def compile(self, d_optimizer, g_optimizer, loss_fn):
            super().compile()
            self.d_optimizer = d_optimizer
            self.g_optimizer = g_optimizer
            self.loss_fn = loss_fn

        def call(self, images, training=False):  # graphfit builds the model by calling it
            return self.discriminator(images, training=training)

        def train_step(self, real_images):
            if isinstance(real_images, tuple):
                real_images = real_images[0]
            batch_size = tf.shape(real_images)[0]
            random_latent_vectors = keras.random.normal(
                shape=(batch_size, self.latent_dim), seed=self.seed_generator)
            generated_images = self.generator(random_latent_vectors)
            combined_images = tf.concat([generated_images, real_images], axis=0)
            labels = tf.concat([tf.ones((batch_size, 1)), tf.zeros((batch_size, 1))], axis=0)
            labels += 0.05 * keras.random.uniform(tf.shape(labels), seed=self.seed_generator)
            with tf.GradientTape() as tape:
                predictions = self.discriminator(combined_images)
                d_loss = self.loss_fn(labels, predictions)
            grads = tape.gradient(d_loss, self.discriminator.trainable_weights)
            self.d_optimizer.apply(grads, self.discriminator.trainable_weights)
            random_latent_vectors = keras.random.normal(
                shape=(batch_size, self.latent_dim), seed=self.seed_generator)
            misleading_labels = tf.zeros((batch_size, 1))
            with tf.GradientTape() as tape:
                predictions = self.discriminator(self.generator(random_latent_vectors))
                g_loss = self.loss_fn(misleading_labels, predictions)
            grads = tape.gradient(g_loss, self.generator.trainable_weights)
            self.g_optimizer.apply(grads, self.generator.trainable_weights)
            self.d_loss_tracker.update_state(d_loss)
            self.g_loss_tracker.update_state(g_loss)
            return {"d_loss": self.d_loss_tracker.result(),
                    "g_loss": self.g_loss_tracker.result()}

    return GAN


def test_gan_with_two_optimizers_and_keras_random():
    keras.utils.set_random_seed(2)
    k_disc = keras.Sequential([keras.Input((IMAGE,)), keras.layers.Dense(8, "leaky_relu"),
                               keras.layers.Dense(1)])
    k_gen = keras.Sequential([keras.Input((LATENT,)), keras.layers.Dense(8, "leaky_relu"),
                              keras.layers.Dense(IMAGE, activation="sigmoid")])
    disc = gf.Sequential([layers.Dense(8, "leaky_relu"), layers.Dense(1)], input_shape=(IMAGE,))
    gen = gf.Sequential([layers.Dense(8, "leaky_relu"), layers.Dense(IMAGE, "sigmoid")],
                        input_shape=(LATENT,))
    disc.set_weights(k_disc.get_weights())
    gen.set_weights(k_gen.get_weights())
    images = RNG.random((48, IMAGE)).astype("float32")
    dataset = tf.data.Dataset.from_tensor_slices(images).batch(16)
    logs = []
    for base, d, g, adam, seeds in ((keras.Model, k_disc, k_gen, keras.optimizers.Adam, 7),
                                    (gf.Model, disc, gen, optimizers.Adam, 7)):
        keras.utils.set_random_seed(seeds)
        gan = gan_class(base)(discriminator=d, generator=g, latent_dim=LATENT)
        gan.compile(d_optimizer=adam(learning_rate=0.0003), g_optimizer=adam(0.0003),
                    loss_fn=keras.losses.BinaryCrossentropy(from_logits=True))
        # keras.random draws other numbers under XLA (TensorFlow picks another RNG
        # algorithm), and jit_compile="auto" means XLA on a CPU for graphfit, not for Keras:
        # the same setting on both sides (Keras's setter, which graphfit has too).
        gan.jit_compile = False
        logs.append(gan.fit(dataset, epochs=2, shuffle=False, verbose=0).history)
        assert gan.jit_compile is False
        assert int(gan.d_optimizer.iterations.numpy()) == 6
    expected, ours = logs
    _close(ours, expected)


# ------------------------------------------------------------------ the optimizer idioms
def test_optimizer_apply_checks_its_arguments():
    optimizer = optimizers.SGD(0.5)
    w = tf.Variable([1.0, 2.0])
    optimizer.apply([tf.constant([1.0, 1.0])], [w])
    np.testing.assert_allclose(w.numpy(), [0.5, 1.5])
    with pytest.raises(ValueError, match="needs the variables"):
        optimizer.apply([tf.constant([1.0, 1.0])])
    with pytest.raises(ValueError, match="2 gradients for 1 variables"):
        optimizer.apply([tf.constant([1.0, 1.0])] * 2, [w])
    with pytest.raises(NotImplementedError, match="takes no gradients"):
        optimizers.LevenbergMarquardt().apply([tf.constant([1.0, 1.0])], [w])


def test_compute_loss_without_a_loss_says_so():
    class NoLoss(gf.Sequential):
        def train_step(self, data):
            x, y = data
            return {"loss": self.compute_loss(y=y, y_pred=self(x, training=True))}

    model = NoLoss([layers.Dense(1)], input_shape=(8,))
    model.compile(optimizer="sgd")
    with pytest.raises(ValueError, match="has no loss to compute"):
        model.fit(X, Y, epochs=1, verbose=0)


def test_the_jit_compile_setter_checks_its_value():
    model = gf.Sequential([layers.Dense(1)], input_shape=(8,))
    model.compile(optimizer="sgd", loss="mse")
    with pytest.raises(ValueError, match="jit_compile must be True, False or 'auto'"):
        model.jit_compile = "yes"
    model.jit_compile = False
    model.fit(X, Y, epochs=1, verbose=0)
    assert model.jit_compile is False and model.get_compile_config()["jit_compile"] is False
