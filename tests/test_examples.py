"""The digits example (`python -m graphfit.examples.digits_mlp`) trains and prints the test
accuracy. It runs in this process, as `python -m` runs it (`runpy` with `__main__`): a fresh
process would only add a TensorFlow import; the console script's own process is tested in
tests/framework/recipes/test_recipe_runs.py (the README's main job)."""

import re
import runpy
import sys


def test_digits_example_runs_and_reports_test_accuracy(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["digits_mlp", "--epochs", "3", "--verbose", "0"])
    runpy.run_module("graphfit.examples.digits_mlp", run_name="__main__", alter_sys=True)
    out = capsys.readouterr().out
    match = re.search(r"test accuracy: (0\.\d+)", out)
    assert match, out[-2000:]
    assert float(match.group(1)) > 0.85
    assert "Update hooks (run once per training step, after the optimizer): 2" in out
