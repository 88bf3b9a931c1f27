"""The README's main job runs from a fresh process and prints the test accuracy."""

import re
import subprocess
import sys


def test_digits_example_runs_and_reports_test_accuracy():
    result = subprocess.run(
        [sys.executable, "-m", "graphfit.examples.digits_mlp", "--epochs", "3", "--verbose", "0"],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    match = re.search(r"test accuracy: (0\.\d+)", result.stdout)
    assert match, result.stdout[-2000:]
    assert float(match.group(1)) > 0.85
    assert "Update hooks (run once per training step, after the optimizer): 2" in result.stdout
