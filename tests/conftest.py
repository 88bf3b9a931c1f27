"""Shared test set-up: quiet TensorFlow, a fixed seed for every test, and one process for the
scripts that compare training on two logical CPUs with one device."""

import json
import os
import pathlib
import subprocess
import sys
import time

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


# The `TWO_CPU_SCRIPT`s of the collected tests' modules, run in one process of their own in
# the background from the end of the collection on (`pytest_collection_finish`): they take
# about a minute and a half on a loaded machine, which a worker used to spend waiting, and the
# other worker too when it needed them (it waited on the first one's file lock).
_TWO_CPU_RUN: dict = {}  # the process, in the pytest process that started it


def _two_cpu_folder(config) -> pathlib.Path:
    """Where this run's two-CPU results go, in pytest's temporary folder (old ones are removed
    by pytest): one folder for all pytest-xdist workers of a run (the run's folder, above each
    worker's own), or one for this process alone."""
    base = config._tmp_path_factory.getbasetemp()  # what the tmp_path_factory fixture gives
    shared = "PYTEST_XDIST_WORKER" in os.environ
    folder = (base.parent if shared else base) / "two_cpu_results"
    folder.mkdir(exist_ok=True)
    return folder


def _two_cpu_scripts(items) -> list[str]:
    """The scripts of the modules of the tests that use the results (directly or through
    another fixture): none when `-k` or a test's name picks none of them."""
    return sorted({str(item.module.TWO_CPU_SCRIPT) for item in items
                   if "two_cpu_results" in getattr(item, "fixturenames", ())
                   and hasattr(getattr(item, "module", None), "TWO_CPU_SCRIPT")})


def pytest_collection_finish(session):
    """Starts the two-CPU scripts in the background (the first worker of a run that gets here
    starts them, once; the fixture `two_cpu_results` waits for their file)."""
    scripts = _two_cpu_scripts(session.items)
    if not scripts or session.config.option.collectonly:
        return
    folder = _two_cpu_folder(session.config)
    try:  # the one process that creates the marker starts the scripts
        os.close(os.open(folder / "started", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    from .framework.training import script_results

    log = open(folder / "runner.log", "w")
    _TWO_CPU_RUN["process"] = subprocess.Popen(
        [sys.executable, script_results.__file__, str(folder / "results.json"), *scripts],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    log.close()


def pytest_sessionfinish(session):
    """Writes the measured seconds per file (when asked, below); the process that started the
    two-CPU scripts waits for them before it ends: another worker may still need them."""
    _write_measured_seconds()
    process = _TWO_CPU_RUN.pop("process", None)
    if process is not None:
        try:
            process.wait(timeout=900)
        except subprocess.TimeoutExpired:
            process.kill()


@pytest.fixture(scope="session")
def two_cpu_results(request):
    """{script: its RESULT JSON or failure} for the `TWO_CPU_SCRIPT` of every test module in
    this session, all run in one fresh process (`script_results.scripts_results`, started in
    the background when the tests were collected): each would pay TensorFlow's start-up in a
    process of its own. Under pytest-xdist (`-n 2`) the workers share that one run."""
    scripts = _two_cpu_scripts(request.session.items)
    results = _two_cpu_folder(request.config) / "results.json"
    if not (results.parent / "started").exists():  # not collected with its module's tests
        pytest_collection_finish(request.session)
    deadline = time.monotonic() + 120 + 180 * len(scripts)
    while not results.exists():
        if time.monotonic() > deadline:
            pytest.fail(f"the two-CPU scripts wrote no {results} in time: "
                        f"{(results.parent / 'runner.log').read_text()[-3000:]}")
        time.sleep(0.2)
    return json.loads(results.read_text())


# Scheduling under pytest-xdist (`-n 2 --dist loadfile`): the workers take whole files in the
# order of the collection, the longest first (`test_file_seconds.json`, seconds per file as
# measured: LPT order), so that no long file starts last and leaves one worker running alone
# while the other idles. Files the table does not list follow, those with most tests first
# (pytest-xdist's own order, which is switched off here: it would put a long file of one test
# last). `GRAPHFIT_TEST_SECONDS=FILE.json python -m pytest ...` writes the table from a run.
_SECONDS = pathlib.Path(__file__).with_name("test_file_seconds.json")
_MEASURED: dict = {}


def pytest_configure(config):
    if getattr(config.option, "loadscopereorder", None) is not None:
        config.option.loadscopereorder = False  # our order, below


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


@pytest.hookimpl(trylast=True)  # after pytest's own reordering (kept within each file)
def pytest_collection_modifyitems(session, config, items):
    seconds = json.loads(_SECONDS.read_text()) if _SECONDS.exists() else {}
    counts: dict = {}
    for item in items:
        counts[_file_of(item.nodeid)] = counts.get(_file_of(item.nodeid), 0) + 1
    order = sorted(counts, key=lambda file: (-seconds.get(file, 0.0), -counts[file]))
    rank = {file: index for index, file in enumerate(order)}
    items.sort(key=lambda item: rank[_file_of(item.nodeid)])  # stable within a file


def pytest_runtest_logreport(report):
    if os.environ.get("GRAPHFIT_TEST_SECONDS") and "PYTEST_XDIST_WORKER" not in os.environ:
        file = _file_of(report.nodeid)
        _MEASURED[file] = _MEASURED.get(file, 0.0) + report.duration


def _write_measured_seconds():
    target = os.environ.get("GRAPHFIT_TEST_SECONDS")
    if target and _MEASURED and "PYTEST_XDIST_WORKER" not in os.environ:
        table = {file: round(spent, 1) for file, spent in
                 sorted(_MEASURED.items(), key=lambda entry: -entry[1])}
        pathlib.Path(target).write_text(json.dumps(table, indent=1) + "\n")
