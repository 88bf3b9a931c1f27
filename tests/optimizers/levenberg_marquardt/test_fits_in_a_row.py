"""A second `fit` that carries the first one's state (no `reset_state()`)."""

import numpy as np

import graphfit as gf
from graphfit import layers, optimizers


def test_a_float32_fit_after_one_on_tiny_batches_still_descends():
    # The first fit leaves λ far below float32's resolution of JᵀJ (9e-15). The second's
    # first trial is a step past the bound, not evaluated, with a negative (rounding)
    # prediction: the ftol test read "no reduction, none predicted" and stopped the fit at
    # its first epoch (a review).
    x = np.random.default_rng(0).normal(size=(200, 3)).astype("float32")
    y = (x @ np.array([[1.0], [2.0], [3.0]]) + 0.5).astype("float32")
    gf.set_seed(0)
    model = gf.Sequential([layers.Dense(8, activation="tanh"), layers.Dense(1)],
                          input_shape=(3,))
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    model.fit(x, y, batch_size=5, epochs=2, verbose=0)
    history = model.fit(x, y, batch_size=None, epochs=5, verbose=0)
    losses = history.history["loss"]
    assert len(losses) == 5 and losses[-1] < losses[0] / 10, losses
