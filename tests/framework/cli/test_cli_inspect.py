"""`graphfit inspect`: every shipped recipe's steps, traced without training; exit codes."""

import os
import re

import pytest

from graphfit import cli
from graphfit import inspect as gf_inspect
from graphfit.recipes import load_recipe
from graphfit.recipes.running import training_run

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RECIPES = os.path.join(REPO, "recipes")
# fit_many recipes fit a formula, with no model to train or inspect (tests/fitting).
SHIPPED = sorted(f for f in os.listdir(RECIPES) if f.endswith(".yaml")
                 and not f.endswith("_many_fits.yaml"))
BROKEN = os.path.join(REPO, "tests", "framework", "recipes", "broken", "dropout_bad_rate.yaml")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A working directory holding runs/quickstart/latest, the base finetune_frozen needs."""
    folder = tmp_path_factory.mktemp("inspect")
    previous = os.getcwd()
    os.chdir(folder)
    try:
        recipe = load_recipe(os.path.join(RECIPES, "quickstart.yaml"),
                             ["training.epochs=1", "training.jit_compile=false"])
        training_run.train(recipe, verbose=0)
        yield folder
    finally:
        os.chdir(previous)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_recipe_is_inspected(name, workdir, capsys, train_step_traces):
    before = sorted(os.listdir(workdir / "runs"))
    assert cli.main(["inspect", os.path.join(RECIPES, name)]) == 0
    out = capsys.readouterr().out
    # The compiled train step is traced once, for its report and its FLOPs; a probed copy of
    # the step besides only where that graph is not the one counted (Levenberg-Marquardt,
    # a dataset's unknown batch size, at which no FLOPs can be counted).
    assert train_step_traces.count("compiled") == 1, train_step_traces
    for stage in gf_inspect.STAGES:
        assert re.search(rf"\n{stage} step of model '\w+' \(x: ", out)
    assert out.count("  Grappler (TensorFlow's graph optimizer") == 3
    assert out.count("XLA: on (") + out.count("XLA: off (") == 3
    assert "nothing was run or trained" in out and "\nvariables: " in out
    assert sorted(os.listdir(workdir / "runs")) == before  # nothing written
    if name == "quickstart.yaml":
        assert train_step_traces == ["compiled"], "inspect traced the training step twice"
        # Dense 64 -> BatchNormalization -> Dropout -> Dense 10 on 64 pixels.
        assert re.search(r"variables: 6 trainable \(4,938 parameters\), 2 non-trainable \(128 "
                         r"values\), 2 update hooks \((batch_normalization\w*)/moving_mean "
                         r"\(moving_average\), \1/moving_variance \(moving_average\)\)", out)
        assert re.search(r"train step of model '\w+' \(x: float32\[32, 64\], y: int32\[32\], "
                         r"sample_weight: None\)", out)
        assert out.count("XLA: on (jit_compile='auto' chose XLA)") == 3  # XLA-friendly layers
        assert "fusions: " in out and "constant folding: " in out
        assert "common-subexpression elimination: " in out
        if "FLOPs method" in out:
            assert "FLOPs (batch 32): forward " in out and " + backward " in out


def test_stage_and_overrides(workdir, capsys):
    assert cli.main(["inspect", os.path.join(RECIPES, "quickstart.yaml"), "--stage", "predict",
                     "--set", "training.batch_size=16", "--set", "training.jit_compile=false"]
                    ) == 0
    out = capsys.readouterr().out
    assert "dtype policy float32), steps traced for batch size 16" in out
    assert re.search(r"\npredict step of model '\w+' \(x: float32\[16, 64\]\)\n"
                     r"  XLA: off \(jit_compile=False\)", out)
    assert "train step of" not in out and "test step of" not in out


def test_a_bad_recipe_exits_2_like_validate(capsys):
    assert cli.main(["inspect", BROKEN]) == 2
    err = capsys.readouterr().err
    assert "dropout_bad_rate.yaml:" in err and "nothing was run" in err
    assert "Traceback" not in err
    with pytest.raises(SystemExit) as exit_info:  # argparse: a bad command line
        cli.main(["inspect", BROKEN, "--stage", "eval"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'eval'" in capsys.readouterr().err


def test_a_failure_exits_1(workdir, capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("tracing went wrong")

    monkeypatch.setattr(gf_inspect, "step_graph", broken)
    assert cli.main(["inspect", os.path.join(RECIPES, "regression_sinc.yaml")]) == 1
    assert "graphfit: inspect failed: RuntimeError: tracing went wrong" in capsys.readouterr().err
