"""Runs a comparison script in its own process and returns the JSON it prints.

Logical CPU devices must be set before TensorFlow starts, so the strategy comparisons run in a
fresh process; each prints one line `RESULT {json}`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys


def script_results(script) -> dict:
    """The `RESULT` JSON of `python script`, or a failed assertion with its stderr."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=240, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-4000:]
    return json.loads(lines[-1][len("RESULT "):])
