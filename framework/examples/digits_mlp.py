"""Trains an MLP with batch normalization on the built-in digits data and prints test accuracy.

    python -m graphfit.examples.digits_mlp [--epochs 20] [--seed 0]
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", type=int, default=2, choices=(0, 1, 2))
    args = parser.parse_args(argv)

    import keras

    import graphfit as gf
    from graphfit import layers, optimizers

    gf.set_seed(args.seed)
    x, y = gf.datasets.load_digits()
    order = __import__("numpy").random.default_rng(args.seed).permutation(len(x))
    x, y = x[order], y[order]
    model = gf.Sequential(
        [
            layers.Dense(64, activation="relu"),
            layers.BatchNormalization(),
            layers.Dropout(0.1),
            layers.Dense(10),
        ],
        name="digits_mlp",
    )
    model.compile(
        optimizer=optimizers.SGD(learning_rate=0.05, momentum=0.9, nesterov=True),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    model.fit(x[:1200], y[:1200], batch_size=32, epochs=args.epochs,
              validation_data=(x[1200:1500], y[1200:1500]), test_data=(x[1500:], y[1500:]),
              verbose=args.verbose)
    model.summary()
    accuracy = model.history.history["test_accuracy"][-1]
    print(f"test accuracy: {accuracy:.4f}")
    return accuracy


if __name__ == "__main__":
    main()
