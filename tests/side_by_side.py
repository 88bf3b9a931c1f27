"""Independent commands run side by side, for the test modules that check several processes.

Most of a `graphfit` or `python` process is its start-up (Python imports, often TensorFlow's),
which runs on one core; the suite's machine has two. A module whose tests each check their own
process starts them all at once in a fixture, and each test then checks its own result.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time


def run_side_by_side(commands: dict, timeout: float = 300) -> dict:
    """{name: subprocess.CompletedProcess} of `commands`, {name: (argv, Popen keywords)},
    all started at once (text mode, stdout and stderr captured). One that outlives `timeout`
    seconds is killed, and its result is its output so far with returncode -9."""
    processes = {}
    try:
        for name, (argv, keywords) in commands.items():
            processes[name] = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                               stderr=subprocess.PIPE, text=True,
                                               start_new_session=True, **keywords)
        deadline = time.monotonic() + timeout
        done = {}
        for name, process in processes.items():
            try:
                out, err = process.communicate(timeout=max(deadline - time.monotonic(), 1))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                out, err = process.communicate()
            done[name] = subprocess.CompletedProcess(process.args, process.returncode, out, err)
        return done
    finally:
        for process in processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
