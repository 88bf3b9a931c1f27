"""`LevenbergMarquardt.evaluations` and `jacobian_evaluations` (SciPy's nfev and njev, the
convention of `fitting.fit_many`), counted by hand on a case whose trials are known, and
shown by `fit_report`.

The case: Dense(1) on y = 3x + 1 exactly, x symmetric on [-1, 1] (so JᵀJ is diagonal, and
with D = diag(JᵀJ) every damped step is the Gauss–Newton step (3 − k₀, 1 − b₀) over 1 + λ),
from kernel 0.1 and bias 0. A trial is kept when its scaled length is at most 10 times the
point's (`update.step_within_bound`): at the start √(a·2.9² + 1) / (1 + λ) ≤ 10·√a·0.1 with
a = mean(x²) = 0.347 needs λ ≥ 2.36. λ runs 1e-3, 2e-3, 8e-3, 0.064, 1.024 (ν doubling),
all too long (rejected: the start point evaluated, no geodesic correction), then 32.768: kept
(a linear model's gain ratio is 1). Step 2 starts at λ = 32.768 / 3 and its first trial is
short enough: kept. So step 1 runs 6 trials and step 2 one:

- plain steps: nfev = (1 + 6) + (1 + 1) = 9, njev = 2 (one linearization per step);
- geodesic acceleration: the two kept trials each evaluate 2 more points, nfev = 13.
"""

import numpy as np
import pytest

import graphfit as gf
from graphfit import layers, optimizers

X = np.linspace(-1.0, 1.0, 50)[:, None]
Y = 3.0 * X + 1.0


def _fit(geodesic, epochs):
    model = gf.Sequential([layers.Dense(1)], input_shape=(1,), dtype="float64")
    optimizer = optimizers.LevenbergMarquardt(geodesic_acceleration=geodesic)
    model.compile(optimizer=optimizer, loss="mse")
    model.set_weights([np.array([[0.1]]), np.array([0.0])])
    model.fit(X, Y, batch_size=None, epochs=epochs, verbose=0)
    return model, optimizer


def _counts(optimizer):
    return (int(optimizer.iterations.numpy()), int(optimizer.evaluations.numpy()),
            int(optimizer.jacobian_evaluations.numpy()))


@pytest.mark.parametrize("geodesic, first, second", [(False, 7, 9), (True, 9, 13)])
def test_evaluations_are_counted_as_by_hand(geodesic, first, second):
    model, optimizer = _fit(geodesic, 1)
    assert _counts(optimizer) == (1, first, 1)
    model.fit(X, Y, batch_size=None, epochs=1, verbose=0)  # the counts go on, as iterations
    assert _counts(optimizer) == (2, second, 2)
    report = model.fit_report(X, Y)
    assert report.fit["function_evaluations"] == second
    assert report.fit["jacobian_evaluations"] == 2 and report.fit["steps"] == 2
    text = str(report)
    assert f"# function evals   = {second}\n" in text
    assert "# Jacobian evals   = 2\n" in text and "# steps            = 2\n" in text


def _fit_saving(geodesic, epochs, directory):
    model = gf.Sequential([layers.Dense(1)], input_shape=(1,), dtype="float64")
    optimizer = optimizers.LevenbergMarquardt(geodesic_acceleration=geodesic)
    model.compile(optimizer=optimizer, loss="mse")
    model.set_weights([np.array([[0.1]]), np.array([0.0])])
    model.fit(X, Y, batch_size=None, epochs=epochs, verbose=0,
              callbacks=[gf.callbacks.ModelCheckpoint(directory, monitor="loss")])
    return model, optimizer


def test_the_counts_are_checkpointed_and_older_checkpoints_without_them_restore(
        tmp_path, monkeypatch):
    from graphfit.saving import checkpoints

    _fit_saving(False, 1, str(tmp_path / "new"))
    model, optimizer = _fit(False, 2)  # counts (2, 9, 2)
    assert checkpoints.restore_latest(model, str(tmp_path / "new"))["epoch"] == 1
    assert _counts(optimizer)[1:] == (7, 1)
    # A checkpoint written before the counts were saved: the optimizer alone.
    monkeypatch.setattr(optimizers.LevenbergMarquardt, "checkpoint_parts",
                        lambda self: {"optimizer": self})
    _fit_saving(False, 1, str(tmp_path / "old"))
    monkeypatch.undo()
    model, optimizer = _fit(False, 2)
    assert checkpoints.restore_latest(model, str(tmp_path / "old"))["epoch"] == 1
    assert _counts(optimizer)[1:] == (9, 2)  # not in the checkpoint: kept as they were
