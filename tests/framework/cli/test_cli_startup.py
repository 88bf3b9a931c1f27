"""The command line starts quietly and fast: `--help` and `list` never import TensorFlow,
TensorFlow's start-up lines stay off the terminal while real errors stay visible, and the
shipped `list` snapshot matches the registries."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from graphfit import cli
from graphfit.cli import listing, quiet_tensorflow

from ...side_by_side import run_side_by_side

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
GRAPHFIT = os.path.join(os.path.dirname(sys.executable), "graphfit")

_PROBE = """
import sys
from graphfit.cli import main
try:
    main({argv!r})
except SystemExit:
    pass
print("TENSORFLOW IMPORTED" if "tensorflow" in sys.modules else "NO TENSORFLOW")
"""


@pytest.mark.parametrize("argv", [["--help"], ["list", "layers"], ["list", "datasets"],
                                  ["train", "--help"], ["list", "nonsense"]])
def test_help_and_list_do_not_import_tensorflow(argv):
    result = subprocess.run([sys.executable, "-c", _PROBE.format(argv=argv)],
                            capture_output=True, text=True, timeout=120)
    assert result.stdout.strip().endswith("NO TENSORFLOW"), result.stdout + result.stderr


_THREADS_PROBE = """
import tensorflow as tf
from graphfit.cli import main
code = main(["--threads", "1", "validate", {recipe!r}])
print("exit", code, "threads", tf.config.threading.get_intra_op_parallelism_threads(),
      tf.config.threading.get_inter_op_parallelism_threads())
"""


@pytest.fixture(scope="module")
def started() -> dict:
    """{name: finished process} of the three tests below that each check a fresh process
    (each mostly TensorFlow's start-up), run side by side."""
    recipe = os.path.join(REPO, "recipes", "quickstart.yaml")
    # A fresh interpreter: classes that other tests register are not built-ins.
    catalog = ("import json; from graphfit.cli import listing; "
               "print(json.dumps(listing.live_catalog()))")
    return run_side_by_side({
        "catalog": ([sys.executable, "-c", catalog], {}),
        "validate": ([GRAPHFIT, "validate", recipe],
                     {"env": {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0"}}),
        "threads": ([sys.executable, "-c", _THREADS_PROBE.format(recipe=recipe)], {}),
    })


def test_list_snapshot_matches_the_registries(started):
    result = started["catalog"]
    assert result.returncode == 0, result.stderr
    live = json.loads(result.stdout.strip().splitlines()[-1])
    assert live == {kind: [list(pair) for pair in listing.entries(kind)]
                    for kind in listing.KINDS}, (
        "graphfit list is stale: run `python -m graphfit.cli.listing --write`")


def test_list_prints_the_snapshot(capsys):
    assert cli.main(["list", "optimizers"]) == 0
    printed = capsys.readouterr().out
    assert "LevenbergMarquardt" in printed and "SGD" in printed


@pytest.mark.parametrize("line, noise", [
    ("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
     True),
    ("I0000 00:00:1795480700.919494   32259 port.cc:153] oneDNN custom operations are on.", True),
    ("E0000 00:00:1795480710.562396   32288 cuda_platform.cc:52] failed call to cuInit: "
     "INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)", True),
    ("To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild", True),
    ("E0000 00:00:1795480710.562396   32288 some_kernel.cc:12] Out of memory", False),
    ("Traceback (most recent call last):", False),
    ("ValueError: something real", False),
])
def test_startup_noise_is_recognised(line, noise):
    assert quiet_tensorflow.is_startup_noise(line) is noise


def test_quiet_stderr_keeps_real_errors(capfd):
    with quiet_tensorflow.quiet_stderr():
        os.write(2, b"I0000 00:00:1.5 1 port.cc:153] oneDNN custom operations are on.\n")
        os.write(2, b"E0000 00:00:1.5 1 kernel.cc:9] a real failure\n")
        print("python says so too", file=sys.stderr)
    err = capfd.readouterr().err
    assert "oneDNN" not in err
    assert "a real failure" in err and "python says so too" in err


def test_a_command_prints_no_tensorflow_startup_lines(started):
    result = started["validate"]  # `graphfit validate` with TF_CPP_MIN_LOG_LEVEL=0
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr
    assert "OK" in result.stdout


@pytest.mark.parametrize("run_dir, message", [("", "--run-dir is empty"),
                                               (__file__, "is a file, not a directory")])
def test_run_dir_argument_mistakes_exit_2(run_dir, message, capsys):
    recipe = os.path.join(REPO, "recipes", "quickstart.yaml")
    assert cli.main(["train", recipe, "--run-dir", run_dir]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("command", ["evaluate", "predict"])
def test_an_empty_run_directory_argument_exits_2(command, capsys, tmp_path):
    extra = ["--input", "x.csv", "--output", str(tmp_path / "p.csv")] if command == "predict" \
        else []
    assert cli.main([command, "", *extra]) == 2
    assert "run directory is empty text" in capsys.readouterr().err


def test_threads_sizes_tensorflows_pools_before_it_starts(started):
    result = started["threads"]
    assert result.stdout.strip().splitlines()[-1] == "exit 0 threads 1 1", result.stderr


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_a_bad_thread_count_exits_2(value, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "recipe.yaml", "--threads", value])
    assert exit_info.value.code == 2
    assert "--threads: must be a positive number of threads" in capsys.readouterr().err


def test_threads_after_tensorflow_started_is_ignored_with_a_warning(tmp_path):
    import tensorflow as tf

    tf.reduce_sum(tf.ones([2]))  # TensorFlow has started in this process: its pools are fixed
    with pytest.warns(UserWarning, match="--threads 2 was ignored"):
        code = cli.main(["--threads", "2", "evaluate", str(tmp_path / "no_such_run")])
    assert code == 2  # and the command itself still ran (and refused the missing run)
