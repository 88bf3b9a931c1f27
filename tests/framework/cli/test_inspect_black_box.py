"""`graphfit inspect` on a model with a BlackBox (the shipped two-link-arm recipe): every stage
is traced, XLA is off and says which layer keeps it off, and the FLOPs say the black box is not
counted (its Python function is outside TensorFlow's graph) instead of failing."""

import os
import re

import pytest

from graphfit import cli
from graphfit.recipes import load_recipe
from graphfit.recipes.running import training_run

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RECIPE = os.path.join(REPO, "recipes", "two_link_arm.yaml")
SMALL = ["data.arguments.n_samples=160", "training.batch_size=16"]
SETS = [item for override in SMALL for item in ("--set", override)]
NOT_COUNTED = re.compile(r"FLOPs note: \d+ call\(s\) of Python code \(tf\.numpy_function or "
                         r"tf\.py_function, as in a BlackBox layer; here in layer\(s\) 'arm' "
                         r"\(BlackBox\)\) not counted")


def _mlp_forward_flops(batch: int) -> int:
    """Dense 2 -> 64 -> 64 -> 2 by hand: 2·b·in·out per MatMul, b·out per bias add (tanh
    counts 0 in TensorFlow's statistics). The black box adds nothing."""
    sizes = [(2, 64), (64, 64), (64, 2)]
    return sum(2 * batch * n_in * n_out + batch * n_out for n_in, n_out in sizes)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finished (one short epoch) run of the recipe."""
    recipe = load_recipe(RECIPE, SMALL + ["training.epochs=1"])
    folder = tmp_path_factory.mktemp("arm_inspect") / "run"
    return training_run.train(recipe, run_dir=str(folder), verbose=0).run_dir


def test_inspect_says_the_black_box_is_not_counted(capsys):
    assert cli.main(["inspect", RECIPE, *SETS]) == 0
    out = capsys.readouterr().out
    for stage in ("train", "test", "predict"):
        assert re.search(rf"\n{stage} step of model '\w+' \(x: float32\[16, 2\]", out)
    assert len(NOT_COUNTED.findall(out)) == 1  # once for the model, not per stage
    assert out.count("XLA: off (jit_compile='auto' chose no XLA, as layer(s) 'arm' "
                     "(BlackBox) cannot be XLA-compiled)") == 3
    forward = _mlp_forward_flops(16)
    assert out.count(f"forward {forward:,} (backward in training: ") == 2  # test, predict
    assert f"FLOPs (batch 16): forward (training) {forward:,} + loss " in out


def test_inspect_with_xla_forced_names_the_black_box(capsys):
    assert cli.main(["inspect", RECIPE, *SETS, "--stage", "predict",
                     "--set", "training.jit_compile=true"]) == 2
    err = capsys.readouterr().err
    assert "'arm' (BlackBox) cannot be XLA-compiled" in err
    assert "training.jit_compile" in err or "jit_compile:" in err
    assert "Traceback" not in err


def test_inspect_a_finished_run_and_its_model_flops(run, capsys):
    assert cli.main(["inspect", run, "--stage", "predict"]) == 0
    out = capsys.readouterr().out
    assert f"{run}: model " in out and "\npredict step of model " in out
    assert "train step of" not in out
    assert len(NOT_COUNTED.findall(out)) == 1
    assert f"FLOPs (batch 16): forward {_mlp_forward_flops(16):,} " in out


def test_inspect_a_folder_that_is_no_run_exits_2(tmp_path, capsys):
    assert cli.main(["inspect", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is not a graphfit run directory" in err and "Traceback" not in err
