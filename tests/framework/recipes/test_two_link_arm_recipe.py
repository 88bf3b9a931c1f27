"""The shipped two-link-arm recipe (the distal teacher through a BlackBox), at a small size:
`graphfit train` learns the arm's inverse through SPSA gradient estimates, the held-out loss is
the end-effector error (checked against NumPy), and the calls of F are counted in the run."""

import json
import math
import os

import numpy as np
import pytest

from graphfit import cli
from graphfit.examples import two_link_arm
from graphfit.recipes import load_recipe
from graphfit.recipes.running import runner

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RECIPE = os.path.join(REPO, "recipes", "two_link_arm.yaml")
SAMPLES, EPOCHS, BATCH = 512, 30, 32
TRAIN = SAMPLES - round(0.15 * SAMPLES) - round(0.15 * SAMPLES)  # the recipe's 15 % / 15 %
STEPS = EPOCHS * math.ceil(TRAIN / BATCH)
OVERRIDES = [f"data.arguments.n_samples={SAMPLES}", f"training.epochs={EPOCHS}",
             f"training.batch_size={BATCH}", f"optimizer.learning_rate.decay_steps={STEPS}"]
REACH = two_link_arm.ArmTask().reach


def _end_effector_errors(model, x):
    """Distances from F(M(x)) to x, with M the layers before the black box and F in NumPy."""
    angles = x
    for layer in model.layers[:-1]:
        angles = layer(angles)
    reached = two_link_arm.forward_kinematics(np.asarray(angles))
    return np.linalg.norm(reached - x, axis=1)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    run = tmp_path_factory.mktemp("arm") / "run"
    sets = [item for override in OVERRIDES for item in ("--set", override)]
    assert cli.main(["train", RECIPE, "--run-dir", str(run), "--verbose", "0", *sets]) == 0
    return run


def test_recipe_names_graphfit_code_for_its_data_and_black_box():
    recipe = load_recipe(RECIPE)
    assert recipe.config["data"]["function"] == "graphfit.examples.two_link_arm:arm_targets"
    box = recipe.config["model"]["layers"][-1]
    assert box["type"] == "BlackBox" and box["estimator"] == "spsa"
    assert box["function"] == "graphfit.examples.two_link_arm:forward_kinematics"


def test_distal_teacher_recipe_learns_the_inverse_through_the_black_box(trained):
    metrics = json.loads((trained / "metrics.json").read_text())
    history = json.loads((trained / "history.json").read_text())
    prepared, _ = runner.load_run(str(trained))  # rebuilt from the run, weights restored
    x_test, y_test = prepared.splits.test
    np.testing.assert_array_equal(x_test, y_test)  # the labels are the targets
    distance = _end_effector_errors(prepared.model, x_test)
    # The loss is the end-effector mse: mean over both coordinates, (Δx² + Δy²) / 2.
    assert metrics["test"]["loss"] == pytest.approx(np.mean(distance**2) / 2, rel=1e-3)

    untrained = runner.prepare(load_recipe(RECIPE, OVERRIDES)).model
    before = _end_effector_errors(untrained, x_test)
    # Untrained, the end effector misses by about 2/3 of the reach; after 30 short epochs by
    # under a tenth (the full recipe reaches under 1 %).
    assert np.mean(distance**2) < np.mean(before**2) / 20
    assert np.mean(distance) < np.mean(before) / 5
    assert np.mean(distance) / REACH < 0.15 < 0.5 < np.mean(before) / REACH

    # F's calls: 1 forward + 2 per SPSA sample each training step, plus the evaluations.
    calls = history["arm_function_calls"]
    assert len(calls) == EPOCHS and calls == sorted(calls)
    assert calls[-1] >= STEPS * (1 + 2 * 4)
    assert metrics["train"]["arm_function_calls"] == calls[-1]
