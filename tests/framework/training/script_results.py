"""Runs comparison scripts in a fresh process and returns the JSON each prints.

Logical CPU devices must be set before TensorFlow starts, so the strategy comparisons run in a
fresh process; each script prints one line `RESULT {json}`. The scripts that need the same two
logical CPUs share one process (`tests/conftest.py`, fixture `two_cpu_results`): each pays
TensorFlow's start-up otherwise. They run one after another, each as `python script` would run
it (`runpy`, as `__main__`); a script that fails reports its traceback and the next one runs.

`python script_results.py OUT.json SCRIPT...` writes their results to OUT.json (whole, or not at
all: the fixture starts it in the background as soon as the tests are collected and waits for the
file only when a test needs it).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

_RUNNER = r"""
import contextlib, io, json, runpy, sys, traceback

for script in sys.argv[1:]:
    printed = io.StringIO()
    sys.argv = [script]
    try:
        with contextlib.redirect_stdout(printed):
            runpy.run_path(script, run_name="__main__")
        lines = [line for line in printed.getvalue().splitlines() if line.startswith("RESULT ")]
        result = json.loads(lines[-1][len("RESULT "):]) if lines else \
            f"{script} printed no RESULT line:\n{printed.getvalue()[-3000:]}"
    except BaseException:
        result = f"{script} failed:\n{traceback.format_exc()[-4000:]}"
    print("RESULT " + json.dumps({"script": script, "result": result}), flush=True)
"""


def scripts_results(scripts) -> dict:
    """{script: the `RESULT` JSON it printed, or the text of its failure}, all `scripts` run
    in turn in one fresh process."""
    scripts = [str(script) for script in scripts]
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run([sys.executable, "-c", _RUNNER, *scripts], capture_output=True,
                          text=True, timeout=120 + 180 * len(scripts), env=env)
    reports = [json.loads(line[len("RESULT "):]) for line in done.stdout.splitlines()
               if line.startswith("RESULT ")]
    found = {report["script"]: report["result"] for report in reports}
    failure = f"the process ended with {done.returncode}:\n{done.stderr[-4000:]}"
    return {script: found.get(script, failure) for script in scripts}


def script_results(script, results: dict | None = None) -> dict:
    """The `RESULT` JSON of `python script` (taken from `results` of `scripts_results` when
    given, else run now), or a failed assertion with what went wrong."""
    result = (results if results is not None and str(script) in results
              else scripts_results([script]))[str(script)]
    assert isinstance(result, dict), result
    return result


if __name__ == "__main__":
    out = pathlib.Path(sys.argv[1])
    try:
        found = scripts_results(sys.argv[2:])
    except BaseException as error:  # noqa: BLE001 - told to every test that reads the file
        found = {script: f"the scripts did not finish: {error!r}" for script in sys.argv[2:]}
    partial = out.with_suffix(".partial")
    partial.write_text(json.dumps(found))
    os.replace(partial, out)  # whole or not at all: the readers poll for the file
