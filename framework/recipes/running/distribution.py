"""The `tf.distribute` strategy a recipe's `distribute:` section asks for.

`check_environment` runs first, before TensorFlow creates any strategy or starts a collective:
a bad TF_CONFIG or a device this machine lacks is a recipe problem at its key (exit code 2),
not a hang or a TensorFlow error later. `strategy_for` creates the strategy once per process
(MultiWorkerMirroredStrategy must be created once, at program start-up, before other ops:
`start_early` does so from the `distribute:` section alone, before the recipe's full check
runs any op), and the model is then built and compiled inside its `scope()`. `is_chief` says
whether this process writes the run's files (see `graphfit.recipes.running.workers`).

Example:

    >>> strategy_for(None) is None
    True
"""

from __future__ import annotations

import os
import subprocess
import sys

from graphfit.recipes.reading.distribute_schema import (
    check_distribute,
    environment_problems,
    read_tf_config,
)
from graphfit.recipes.reading.overrides import apply_overrides
from graphfit.recipes.reading.problems import Problem, RecipeError
from graphfit.recipes.reading.schema import INVALID, Checker
from graphfit.recipes.reading.yaml_source import MAX_BYTES, parse_yaml

__all__ = ["check_environment", "strategy_for", "start_early", "start_early_from", "is_chief",
           "describe_worker"]

_CREATED: dict = {}  # (strategy, devices, timeout) -> the strategy made for it in this process


def check_environment(recipe) -> None:
    """Raises a RecipeError for what the environment lacks for the recipe's `distribute`:
    TF_CONFIG (multi_worker), or devices that are not on this machine (mirrored)."""
    distribute = recipe.config.get("distribute")
    if not distribute:
        return
    problems = [Problem(path, message, recipe.position(path))
                for path, message in environment_problems(distribute)]
    if not problems and distribute["strategy"] == "mirrored" and distribute.get("devices"):
        problems = _missing_devices(recipe, distribute["devices"])
    if problems:
        raise RecipeError(problems)


def _missing_devices(recipe, devices: list[str]) -> list[Problem]:
    import tensorflow as tf

    available = {(d.device_type, tf.DeviceSpec.from_string(d.name).device_index): d.name
                 for d in tf.config.list_logical_devices()}
    problems = []
    for index, device in enumerate(devices):
        spec = tf.DeviceSpec.from_string(device if "/" in device else "/device:" + device)
        if (spec.device_type.upper(), spec.device_index) not in available:
            path = ("distribute", "devices", index)
            names = ", ".join(name.split("device:")[-1] for name in available.values())
            problems.append(Problem(path, f"no device {device!r} on this machine (it has "
                                          f"{names}); list devices it has, or leave devices "
                                          f"out to use every GPU", recipe.position(path)))
    return problems


def strategy_for(distribute):
    """The strategy for a resolved `distribute` section (None for none), created once."""
    if not distribute:
        return None
    import tensorflow as tf

    devices = distribute.get("devices")
    key = (distribute["strategy"], tuple(devices) if devices else None,
           distribute.get("timeout"))
    if key not in _CREATED:
        if distribute["strategy"] == "mirrored":
            _CREATED[key] = tf.distribute.MirroredStrategy(devices)
        else:
            _CREATED[key] = _multi_worker(tf, distribute.get("timeout"))
    return _CREATED[key]


# Seconds of waiting for the other workers before saying so (they may start a little later).
_WAIT_NOTICE = 10.0

# The watchdog process: stdin closes when the strategy exists (or this process ends).
_WATCHDOG = """
import os, select, signal, sys
parent, notice, timeout, waiting, failed = sys.argv[1:6]
def done_within(seconds):
    return bool(select.select([sys.stdin], [], [], seconds)[0])
if not done_within(float(notice)):
    print(waiting, file=sys.stderr, flush=True)
    if timeout and not done_within(max(float(timeout) - float(notice), 0.0)):
        print(failed, file=sys.stderr, flush=True)
        os.kill(int(parent), signal.SIGKILL)
"""


def _multi_worker(tf, timeout):
    """MultiWorkerMirroredStrategy, whose creation waits for every task of TF_CONFIG.

    TensorFlow waits for absent workers without limit, inside a call that holds Python's GIL
    and where neither Ctrl-C nor SIGTERM ends the process: a small watchdog process says whom
    it waits for after a few seconds and ends this one once `timeout` passes (nothing is
    written before this point).
    """
    others = ", ".join(_other_addresses())
    waiting = f"graphfit: waiting for the other workers of TF_CONFIG to start ({others})"
    failed = (f"graphfit: train failed: the cluster did not start within distribute.timeout="
              f"{timeout or 0:g} s: not every worker of TF_CONFIG answered ({others}). Start "
              f"graphfit on every worker, each with its own TF_CONFIG task, and check the "
              f"addresses and ports.")
    watchdog = subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(min(_WAIT_NOTICE, timeout or
                                                                    _WAIT_NOTICE)),
         "" if timeout is None else str(timeout), waiting, failed], stdin=subprocess.PIPE)
    try:
        options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=timeout)
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    finally:
        watchdog.stdin.close()
        watchdog.wait()


def _other_addresses() -> list[str]:
    """The addresses in TF_CONFIG of the tasks other than this one."""
    config = read_tf_config()
    task = config["task"]
    mine = config["cluster"][task["type"]][task["index"]]
    return [address for addresses in config["cluster"].values() for address in addresses
            if address != mine]


def is_chief(strategy) -> bool:
    """Whether this process writes the run's files: True without a strategy or with one
    process; under several workers, the chief only (task type "chief", or worker 0 when the
    cluster has none), as TensorFlow's own `should_checkpoint` says."""
    return strategy is None or bool(strategy.extended.should_checkpoint)


def describe_worker(strategy) -> str:
    """'worker 1 of 2' (or 'the chief'): this process's place in the cluster."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return "this process"
    if resolver.task_type == "chief":
        return "the chief"
    count = len(resolver.cluster_spec().as_dict().get(resolver.task_type, []))
    return f"{resolver.task_type} {resolver.task_id} of {count}"


def start_early(path: str, overrides=()):
    """Creates a recipe's MultiWorkerMirroredStrategy before anything runs a TensorFlow op.

    Checking the whole recipe constructs its optimizer (variables: eager ops), after which
    TensorFlow refuses to configure collectives ("Collective ops must be configured at
    program startup"). So the command line reads only the `distribute:` section first (with
    the overrides) and creates the strategy from it; a section with problems is left to the
    full check, which reports it with its position.

    Args:
        path: the recipe file.
        overrides: the `key=value` overrides given with `--set`.

    Returns:
        The strategy, or None when the recipe asks for no multi-worker training (or its
        `distribute:` section or TF_CONFIG has problems the full check will report).
    """
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
        if len(raw) > MAX_BYTES:
            return None  # the full read refuses it
        document = parse_yaml(raw.decode("utf-8-sig"), path, keep_going=True)
        apply_overrides(document, list(overrides))
    except (OSError, UnicodeDecodeError, RecipeError):
        return None
    return start_early_from(document)


def start_early_from(document):
    """`start_early` of a recipe already read (a `Document`, its overrides applied: a
    `Draft`'s), which the command line reads before TensorFlow starts."""
    value = document.data.get("distribute") if isinstance(document.data, dict) else None
    if value is None:
        return None
    checker = Checker(document)
    resolved = check_distribute(value, ("distribute",), checker)
    if (checker.problems or resolved is INVALID or resolved["strategy"] != "multi_worker"
            or environment_problems(resolved)):
        return None
    return strategy_for(resolved)
