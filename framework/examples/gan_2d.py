"""A two-optimizer model: a small GAN that learns a 2-D Gaussian, through `train_step`.

The generator maps noise to points; the discriminator tells them from samples of
N((2, -1), 0.5² I). One training step updates the discriminator with its own optimizer,
then the generator with another, as in Keras's GAN guide; `fit` reports both losses.

    python -m graphfit.examples.gan_2d [--epochs 100] [--seed 0]
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

TARGET_MEAN = (2.0, -1.0)
TARGET_STD = 0.5


def build_gan(noise_dim: int = 2, seed: int = 0):
    """A GAN model with `d_optimizer` and `g_optimizer` of its own."""
    import keras
    import tensorflow as tf

    import graphfit as gf
    from graphfit import layers, optimizers
    from graphfit.core.step_types import StepResult, unpack_data

    bce = keras.losses.BinaryCrossentropy(from_logits=True)

    class GAN(gf.Model):
        def __init__(self):
            super().__init__()
            self.noise_dim = noise_dim
            self.generator = gf.Sequential([layers.Dense(16, activation="relu"),
                                            layers.Dense(2)], name="generator")
            self.discriminator = gf.Sequential([layers.Dense(16, activation="relu"),
                                                layers.Dense(1)], name="discriminator")
            self.d_optimizer = optimizers.Adam(0.005, beta_1=0.5)
            self.g_optimizer = optimizers.Adam(0.005, beta_1=0.5)
            self.noise = tf.random.Generator.from_seed(seed)

        def call(self, x, training=False):  # a batch of noise -> generated points
            return self.generator(x, training=training)

        def build(self, input_shape=None, dtype=None):
            super().build(input_shape, dtype)
            if input_shape is not None:  # the discriminator reads points of the data's shape
                self.discriminator.build(input_shape)

        def train_step(self, data):
            real, _, _ = unpack_data(data)
            size = tf.shape(real)[0]
            d_vars = self.discriminator.trainable_variables
            g_vars = self.generator.trainable_variables
            noise = self.noise.normal([size, self.noise_dim])
            with tf.GradientTape() as tape:
                fake = self.generator(noise, training=True)
                real_logits = self.discriminator(real, training=True)
                fake_logits = self.discriminator(fake, training=True)
                d_loss = (bce(tf.ones_like(real_logits), real_logits)
                          + bce(tf.zeros_like(fake_logits), fake_logits))
            self.d_optimizer.apply_gradients(zip(tape.gradient(d_loss, d_vars), d_vars))
            noise = self.noise.normal([size, self.noise_dim])
            with tf.GradientTape() as tape:
                fake_logits = self.discriminator(self.generator(noise, training=True),
                                                 training=True)
                g_loss = bce(tf.ones_like(fake_logits), fake_logits)
            self.g_optimizer.apply_gradients(zip(tape.gradient(g_loss, g_vars), g_vars))
            return StepResult(g_loss, logs={"d_loss": d_loss})

    return GAN()


def sample_target(n: int, seed: int):
    import numpy as np

    rng = np.random.default_rng(seed)
    return (np.asarray(TARGET_MEAN) + TARGET_STD * rng.normal(size=(n, 2))).astype("float32")


def main(argv: list[str] | None = None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", type=int, default=2, choices=(0, 1, 2))
    args = parser.parse_args(argv)

    import numpy as np

    import graphfit as gf

    gf.set_seed(args.seed)
    gan = build_gan(seed=args.seed)
    gan.compile()  # no loss: train_step computes both
    history = gan.fit(sample_target(2048, args.seed), batch_size=128, epochs=args.epochs,
                      verbose=args.verbose)
    samples = gan.predict(np.random.default_rng(args.seed).normal(size=(2000, 2)), verbose=0)
    mean, std = samples.mean(axis=0), samples.std(axis=0)
    print(f"d_loss {history.history['d_loss'][-1]:.3f}, g_loss {history.history['loss'][-1]:.3f}; "
          f"generated mean ({mean[0]:.2f}, {mean[1]:.2f}), std ({std[0]:.2f}, {std[1]:.2f}); "
          f"target mean {TARGET_MEAN}, std {TARGET_STD}")
    return mean, std


if __name__ == "__main__":
    main()
