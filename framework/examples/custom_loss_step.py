"""An overridden `train_step` whose loss needs the inputs: fitting a curve and its slope.

The model learns y = sin(x) from values and slopes: the loss adds the mismatch between the
model's derivative dy/dx (taken with an inner `GradientTape` on the inputs) and the known
slope cos(x), a Sobolev-style loss that `compile(loss=...)` cannot express because a loss
function sees only (y_true, y_pred).

    python -m graphfit.examples.custom_loss_step [--epochs 60] [--seed 0]
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def build_model(slope_weight: float = 1.0):
    """A 1-32-32-1 tanh MLP whose `train_step` fits values and slopes."""
    import tensorflow as tf

    import graphfit as gf
    from graphfit import layers
    from graphfit.core.step_types import StepResult, unpack_data

    class SlopeFit(gf.Model):
        def __init__(self):
            super().__init__()
            self.hidden = [layers.Dense(32, activation="tanh"),
                           layers.Dense(32, activation="tanh")]
            self.out = layers.Dense(1)

        def call(self, x, training=False):
            for layer in self.hidden:
                x = layer(x, training=training)
            return self.out(x)

        def slope_loss(self, x, y):
            """(value loss, slope loss, y_pred): y holds [value, slope] columns."""
            with tf.GradientTape(watch_accessed_variables=False) as inner:
                inner.watch(x)
                y_pred = self(x, training=True)
            slope = inner.gradient(y_pred, x)
            value_loss = tf.reduce_mean(tf.square(y_pred - y[:, :1]))
            return value_loss, tf.reduce_mean(tf.square(slope - y[:, 1:])), y_pred

        def train_step(self, data):
            x, y, _ = unpack_data(data)
            with tf.GradientTape() as tape:
                value_loss, slope_loss, y_pred = self.slope_loss(x, y)
                loss = value_loss + slope_weight * slope_loss
            variables = self.trainable_variables
            self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
            return StepResult(loss, logs={"value_loss": value_loss, "slope_loss": slope_loss})

        def test_step(self, data):
            x, y, _ = unpack_data(data)
            value_loss, slope_loss, _ = self.slope_loss(x, y)
            return StepResult(value_loss + slope_weight * slope_loss,
                              logs={"value_loss": value_loss, "slope_loss": slope_loss})

    return SlopeFit()


def make_data(n: int, seed: int):
    """x in [-3, 3]; y = [sin x, cos x] (value and slope)."""
    import numpy as np

    x = np.random.default_rng(seed).uniform(-3.0, 3.0, size=(n, 1)).astype("float32")
    return x, np.concatenate([np.sin(x), np.cos(x)], axis=1)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", type=int, default=2, choices=(0, 1, 2))
    args = parser.parse_args(argv)

    import graphfit as gf
    from graphfit import optimizers

    gf.set_seed(args.seed)
    x, y = make_data(512, args.seed)
    x_val, y_val = make_data(128, args.seed + 1)
    model = build_model()
    model.compile(optimizer=optimizers.Adam(0.01))  # the loss lives in train_step
    history = model.fit(x, y, batch_size=64, epochs=args.epochs, verbose=args.verbose,
                        validation_data=(x_val, y_val))
    final = {key: values[-1] for key, values in history.history.items()}
    print("final:", ", ".join(f"{k}={v:.4g}" for k, v in sorted(final.items())))
    return final


if __name__ == "__main__":
    main()
