"""`run_fit_optimizer_test`: the optimizer contract, checked through `model.fit`.

Some optimizers need more than a loss value: Levenberg–Marquardt linearizes the model's
residuals, so its `minimize` needs the batch that `Model.train_step` passes and refuses a bare
loss function. Those are checked here on a tiny float64 model fitted to a smooth curve: the
loss goes down, state variables are created once, eager and compiled training agree, the
state survives a checkpoint, and the config round trip gives an optimizer that trains the
same. Any optimizer can be checked this way; first-order ones also go through
`run_optimizer_test`.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Callable

import numpy as np
import tensorflow as tf

from graphfit import layers, optimizers
from graphfit.models.sequential import Sequential

__all__ = ["run_fit_optimizer_test"]

OptimizerFactory = Callable[[], optimizers.Optimizer]

_X = np.linspace(-1.0, 1.0, 16)[:, None]
_Y = np.sin(2.0 * _X)
# Fixed starting weights, so every model in the checks starts at the same point.
_WEIGHTS = [
    np.array([[0.6, -0.4, 0.3]]),
    np.array([0.1, -0.2, 0.05]),
    np.array([[0.5], [-0.3], [0.2]]),
    np.array([0.0]),
]


def _fitted_model(make_optimizer: OptimizerFactory, epochs: int, *, run_eagerly: bool = False,
                  jit_compile: bool = False, optimizer=None) -> Sequential:
    model = Sequential([layers.Dense(3, activation="tanh"), layers.Dense(1)], input_shape=(1,),
                       dtype="float64")
    model.set_weights(_WEIGHTS)
    model.compile(optimizer=optimizer or make_optimizer(), loss="mse", jit_compile=jit_compile,
                  run_eagerly=run_eagerly)
    if epochs:
        model.fit(_X, _Y, batch_size=None, epochs=epochs, shuffle=False, verbose=0)
    return model


def _loss(weights: list[np.ndarray]) -> float:
    # By hand in NumPy: predict would trace one more function per model.
    kernel, bias, head, head_bias = weights
    predictions = np.tanh(_X @ kernel + bias) @ head + head_bias
    return float(np.mean((predictions - _Y) ** 2))


def _assert_close_weights(got: Sequential, want: Sequential, what: str, tolerance=1e-6) -> None:
    for index, (a, b) in enumerate(zip(got.get_weights(), want.get_weights())):
        np.testing.assert_allclose(a, b, rtol=tolerance, atol=tolerance,
                                   err_msg=f"{what}: weight {index} differs")


def run_fit_optimizer_test(make_optimizer: OptimizerFactory, epochs: int = 3,
                           run_xla: bool = True) -> None:
    """Checks an optimizer through `compile` and `fit` on a tiny float64 model.

    Checks, in order: the loss goes down over `epochs` full-batch epochs; `optimizer.variables`
    holds the iteration counter and is not extended by further training; eager
    (`run_eagerly=True`), compiled and (if `run_xla`) XLA-compiled training end on the same
    weights; a checkpoint of the model and the optimizer restores into a fresh pair that
    then trains identically; `from_config(get_config())` and `get(serialize())` give equal,
    JSON-serializable configs and an optimizer that trains identically.

    Args:
        make_optimizer: returns a new optimizer each call.
        epochs: the epochs each fit runs (one step each).
        run_xla: whether to compare with `jit_compile=True` training.

    Raises:
        AssertionError: naming the check that fails.

    Example:

        >>> from graphfit import optimizers, testing
        >>> testing.run_fit_optimizer_test(lambda: optimizers.SGD(0.1), epochs=1,
        ...                                run_xla=False)
    """
    compiled = _fitted_model(make_optimizer, epochs)
    before, after = _loss(_WEIGHTS), _loss(compiled.get_weights())
    assert after < before, f"{epochs} epochs did not lower the loss ({before:.4g} -> {after:.4g})"
    eager = _fitted_model(make_optimizer, epochs, run_eagerly=True)
    _assert_close_weights(eager, compiled, "eager and compiled training")
    # Against the eager run: the same exact comparison, without tracing one more train step.
    _check_config(make_optimizer, eager, epochs, run_eagerly=True)
    if run_xla:
        xla = _fitted_model(make_optimizer, epochs, jit_compile=True)
        _assert_close_weights(xla, compiled, "XLA and compiled training")
    _check_state_variables(compiled, epochs)  # trains one more epoch
    _check_checkpoint(make_optimizer, compiled, epochs)


def _check_state_variables(model: Sequential, epochs: int) -> None:
    optimizer = model.optimizer
    state = optimizer.variables
    assert any(v is optimizer.iterations for v in state), (
        "optimizer.variables must hold the iterations counter"
    )
    assert int(optimizer.iterations) == epochs, (
        f"iterations is {int(optimizer.iterations)} after {epochs} one-step epochs"
    )
    model.fit(_X, _Y, batch_size=None, epochs=1, shuffle=False, verbose=0)
    assert [id(v) for v in optimizer.variables] == [id(v) for v in state], (
        "training went on to create optimizer variables after the first step"
    )


def _check_checkpoint(make_optimizer: OptimizerFactory, trained: Sequential,
                      epochs: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = tf.train.Checkpoint(model=trained, optimizer=trained.optimizer).write(
            os.path.join(directory, "ckpt"))
        restored = _fitted_model(make_optimizer, 0)
        restored.optimizer.build(restored.trainable_variables)
        tf.train.Checkpoint(model=restored, optimizer=restored.optimizer).read(path) \
            .assert_existing_objects_matched()
    saved = [v.numpy() for v in trained.optimizer.variables]
    for index, (got, want) in enumerate(zip(restored.optimizer.variables, saved)):
        np.testing.assert_array_equal(got.numpy(), want,
                                      err_msg=f"optimizer variable {index} not restored")
    for model in (trained, restored):
        model.fit(_X, _Y, batch_size=None, epochs=1, shuffle=False, verbose=0)
    _assert_close_weights(restored, trained, "an epoch after restoring", tolerance=0)


def _check_config(make_optimizer: OptimizerFactory, trained: Sequential, epochs: int, *,
                  run_eagerly: bool) -> None:
    """The rebuilt optimizer trains exactly like `trained`'s, made by `make_optimizer`;
    `run_eagerly` says how `trained` was trained, so both run the same code."""
    optimizer = make_optimizer()
    config = optimizer.get_config()
    try:
        json.dumps(config)
    except TypeError as error:
        raise AssertionError(f"get_config() is not JSON-serializable: {error}") from None
    clone = type(optimizer).from_config(config)
    assert type(clone) is type(optimizer) and clone.get_config() == config, (
        "from_config(get_config()) changed the config"
    )
    again = optimizers.get(optimizers.serialize(optimizer))
    assert type(again) is type(optimizer) and again.get_config() == config, (
        "optimizers.get(optimizers.serialize(optimizer)) changed the config"
    )
    rebuilt = _fitted_model(make_optimizer, epochs, optimizer=clone,
                            run_eagerly=run_eagerly)
    _assert_close_weights(rebuilt, trained, "the optimizer rebuilt from its config",
                          tolerance=0)
