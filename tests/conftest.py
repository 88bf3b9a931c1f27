"""Shared test set-up: quiet TensorFlow, a fixed seed for every test, and one process for the
scripts that compare training on two logical CPUs with one device."""

import fcntl
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Recipe runs draw their PNGs at the end; the suite trains dozens of runs, so only the tests
# that check the plots turn them on (tests/framework/cli/test_export_and_plot_commands.py).
os.environ.setdefault("GRAPHFIT_PLOTS", "0")

import pytest  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def no_tensor_float_32():
    """The tests compare float32 arithmetic with float32 references (Keras, NumPy, a tape) at
    float32's tolerances; on NVIDIA GPUs from Ampere on, TensorFlow would run float32
    products in TF32 (a 10-bit mantissa) and miss them by 1e-3. No effect on a CPU.

    A fixture, not module code: pytest-xdist's controller (`-n 2`) loads this file but runs
    no test, and TensorFlow started there prints its start-up lines after the summary."""
    import tensorflow as tf

    tf.config.experimental.enable_tensor_float_32_execution(False)


@pytest.fixture(autouse=True)
def fixed_seed():
    """Every test starts from the same Python, NumPy and TensorFlow seeds."""
    import keras

    keras.utils.set_random_seed(1234)
    yield


@pytest.fixture(scope="session")
def two_cpu_results(request, tmp_path_factory):
    """{script: its RESULT JSON or failure} for the `TWO_CPU_SCRIPT` of every test module in
    this session, all run in one fresh process (`script_results.scripts_results`): each would
    pay TensorFlow's start-up in a process of its own.

    Under pytest-xdist (`-n 2`) the workers share one run: the first worker that needs the
    results runs the scripts under a file lock and leaves them in the run's common temporary
    directory; the others wait for the lock and read them (the scripts take about 20 s)."""
    from .framework.training.script_results import scripts_results

    scripts = sorted({str(item.module.TWO_CPU_SCRIPT) for item in request.session.items
                      if hasattr(getattr(item, "module", None), "TWO_CPU_SCRIPT")})
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return scripts_results(scripts)
    shared = tmp_path_factory.getbasetemp().parent / "two_cpu_results.json"
    with open(shared.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if shared.exists():
            return json.loads(shared.read_text())
        results = scripts_results(scripts)
        shared.write_text(json.dumps(results))
    return results
