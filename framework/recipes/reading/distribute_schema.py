"""The `distribute:` section: which `tf.distribute` strategy trains the recipe.

    distribute: {strategy: mirrored}                          # every GPU of this machine
    distribute: {strategy: mirrored, devices: [GPU:0, GPU:1]}
    distribute: {strategy: multi_worker}                      # the cluster from TF_CONFIG
    distribute: {strategy: multi_worker, timeout: 120}        # stop if a step waits > 120 s

Absent (or null) trains without a strategy. The section itself is checked with the rest of the
recipe; what depends on the environment (TF_CONFIG for `multi_worker`) is checked by
`environment_problems` before any strategy exists, and reported at `distribute.strategy`
naming the variable, since the recipe key is what asked for it.

Example:

    >>> import json
    >>> cluster = {"worker": ["10.0.0.1:2222", "10.0.0.2:2222"]}
    >>> environ = {"TF_CONFIG": json.dumps({"cluster": cluster,
    ...                                     "task": {"type": "worker", "index": 2}})}
    >>> [(path, message[:58]) for path, message in
    ...  environment_problems({"strategy": "multi_worker"}, environ)]
    [(('distribute', 'strategy'), "TF_CONFIG: task.index is 2, but the cluster's 'worker' job")]
    >>> cluster_role({"cluster": cluster, "task": {"type": "worker", "index": 0}})
    ('worker', 0, True)
"""

from __future__ import annotations

import json
import math
import os
import re

from graphfit.core.registry import did_you_mean
from graphfit.recipes.reading.problems import short_repr
from graphfit.recipes.reading.schema import INVALID, Checker, shown

__all__ = ["STRATEGIES", "DISTRIBUTE_DOC", "DEFAULT_TIMEOUT", "MIN_TIMEOUT", "check_distribute",
           "environment_problems", "read_tf_config", "cluster_role"]

STRATEGIES = ("mirrored", "multi_worker")
# Seconds a worker waits in one collective (an all-reduce of a step) before it gives up: a
# safety net for a peer that is alive but stuck. A peer that dies or stops answering is
# noticed sooner, by TensorFlow's heartbeats (about 10 seconds).
DEFAULT_TIMEOUT = 600.0
MIN_TIMEOUT = 5.0
DISTRIBUTE_DOC = ("{strategy: mirrored, devices: [GPU:0, ...] (default: all)} or "
                  "{strategy: multi_worker, timeout: seconds (default 600)} (cluster from "
                  "TF_CONFIG); null: one device")
_KEYS = {"mirrored": ("strategy", "devices"), "multi_worker": ("strategy", "timeout")}
# What MultiWorkerMirroredStrategy trains with: a chief (optional) and workers.
_JOBS = ("chief", "worker")
_DEVICE = re.compile(r"(/job:[\w-]+)?(/replica:\d+)?(/task:\d+)?(/?device:|/)?(cpu|gpu|tpu):\d+",
                     re.IGNORECASE)
_EXAMPLE = ('TF_CONFIG=\'{"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
            '"task": {"type": "worker", "index": 0}}\'')


def check_distribute(value, path, checker: Checker):
    """Checks a `distribute:` mapping (or a bare strategy name); returns it resolved."""
    if isinstance(value, str):
        value = {"strategy": value}
    if not isinstance(value, dict):
        checker.report(path, f"must be a mapping {{strategy: {' | '.join(STRATEGIES)}, ...}} "
                             f"or null, got {shown(value)}")
        return INVALID
    if "strategy" not in value:
        checker.report(path, f"missing required key 'strategy' ({' | '.join(STRATEGIES)})")
        return INVALID
    strategy = value["strategy"]
    if strategy not in STRATEGIES:
        hint = did_you_mean(str(strategy), STRATEGIES, "; did you mean {!r}?", otherwise=".")
        checker.report(path + ("strategy",), f"unknown strategy {short_repr(strategy)}{hint} "
                                             f"Valid strategies: {', '.join(STRATEGIES)}")
        return INVALID
    resolved = {"strategy": strategy}
    for key in value:
        if key not in _KEYS[strategy]:
            checker.report(path + (key,), _unknown_key_message(key, strategy))
    if strategy == "mirrored":
        resolved["devices"] = _check_devices(value.get("devices"), path + ("devices",), checker)
    else:
        resolved["timeout"] = _check_timeout(value.get("timeout", DEFAULT_TIMEOUT),
                                             path + ("timeout",), checker)
    return resolved


def _check_timeout(timeout, path, checker: Checker):
    if timeout is None:
        return None  # wait as long as it takes (a dead worker is still noticed)
    if (not isinstance(timeout, (int, float)) or isinstance(timeout, bool)
            or not math.isfinite(timeout) or timeout < MIN_TIMEOUT):
        checker.report(path, f"must be a number of seconds >= {MIN_TIMEOUT:g} (how long a "
                             f"worker waits for the others in one step before it stops; "
                             f"default {DEFAULT_TIMEOUT:g}), or null for no limit, got "
                             f"{shown(timeout)}")
        return INVALID
    return float(timeout)


def _unknown_key_message(key, strategy: str) -> str:
    if key == "devices":
        return ("multi_worker uses every device of each worker; 'devices' is for strategy: "
                "mirrored only (remove it, or limit a worker's GPUs with "
                "CUDA_VISIBLE_DEVICES)")
    if key == "timeout":
        return ("timeout is for strategy: multi_worker only (the replicas of one machine do "
                "not wait on a network); remove it")
    valid = _KEYS[strategy]
    hint = did_you_mean(str(key), valid, "; did you mean {!r}?", otherwise=".")
    return f"unknown key {short_repr(key)}{hint} Valid keys for {strategy}: {', '.join(valid)}"


def _check_devices(devices, path, checker: Checker):
    if devices is None:
        return None  # MirroredStrategy's default: every GPU, else the CPU
    if not isinstance(devices, list) or not devices:
        checker.report(path, f"must be a non-empty list of device names such as [GPU:0, GPU:1] "
                             f"(or null for every GPU), got {shown(devices)}")
        return INVALID
    seen, valid = set(), True
    for index, device in enumerate(devices):
        if not isinstance(device, str) or not _DEVICE.fullmatch(device.strip()):
            checker.report(path + (index,), f"must be a device name such as 'GPU:0', '/gpu:1' "
                                            f"or '/device:CPU:0', got {shown(device)}")
            valid = False
            continue
        key = device.strip().lower().split("device:")[-1].lstrip("/")
        if key in seen:
            checker.report(path + (index,), f"{short_repr(device)} is listed twice; each "
                                            f"device holds one replica")
            valid = False
        seen.add(key)
    return [device.strip() for device in devices] if valid else INVALID


def read_tf_config(environ=None) -> dict:
    """TF_CONFIG from the environment, parsed and checked.

    Raises:
        ValueError: saying what is missing or malformed, with an example of a valid value.
    """
    environ = os.environ if environ is None else environ
    text = environ.get("TF_CONFIG")
    if text is None or not text.strip():
        raise ValueError(f"TF_CONFIG is not set; multi_worker reads the cluster and this "
                         f"worker's task from it. Set it on every worker before starting "
                         f"graphfit, e.g. {_EXAMPLE}")
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"TF_CONFIG is not valid JSON ({error}); e.g. {_EXAMPLE}") from None
    if not isinstance(config, dict):
        raise ValueError(f"TF_CONFIG must be a JSON object with 'cluster' and 'task', got "
                         f"{short_repr(config)}")
    for key in ("cluster", "task"):
        if not isinstance(config.get(key), dict):
            what = "missing" if key not in config else f"not an object ({short_repr(config[key])})"
            raise ValueError(f"TF_CONFIG: '{key}' is {what}; it needs both 'cluster' (job name "
                             f"-> list of host:port) and 'task' ({{type, index}}), e.g. "
                             f"{_EXAMPLE}")
    _check_cluster(config["cluster"])
    _check_task(config["task"], config["cluster"])
    return config


def _check_cluster(cluster: dict) -> None:
    if "worker" not in cluster and "chief" not in cluster:
        raise ValueError(f"TF_CONFIG: the cluster has no 'worker' or 'chief' job (it has "
                         f"{', '.join(map(str, cluster)) or 'none'}); e.g. {_EXAMPLE}")
    for job, addresses in cluster.items():
        if job not in _JOBS:
            hint = did_you_mean(str(job), _JOBS, " (did you mean {!r}?)")
            raise ValueError(f"TF_CONFIG: cluster job {short_repr(job)}{hint} is not one "
                             f"multi_worker trains with; use {' and '.join(_JOBS)}")
        if not isinstance(addresses, list) or not addresses:
            raise ValueError(f"TF_CONFIG: cluster.{job} must be a non-empty list of "
                             f"'host:port' strings, got {short_repr(addresses)}")
        for index, address in enumerate(addresses):
            _check_address(address, f"cluster.{job}[{index}]")
    if len(cluster.get("chief", [])) > 1:
        raise ValueError("TF_CONFIG: cluster.chief must list one address (there is one chief)")
    seen: dict = {}
    for job, addresses in cluster.items():
        for index, address in enumerate(addresses):
            where = f"cluster.{job}[{index}]"
            if address in seen:  # two tasks cannot serve on one port: the start would hang
                raise ValueError(f"TF_CONFIG: {where} and {seen[address]} are both "
                                 f"{address}; each task needs its own host:port")
            seen[address] = where


def _check_address(address, where: str) -> None:
    host, _, port = address.rpartition(":") if isinstance(address, str) else ("", "", "")
    if not host:
        raise ValueError(f"TF_CONFIG: {where} must be 'host:port', got {short_repr(address)}")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"TF_CONFIG: {where} has the port {short_repr(port)}; a port is an "
                         f"integer from 1 to 65535 (got {short_repr(address)})")


def _check_task(task: dict, cluster: dict) -> None:
    kind, index = task.get("type"), task.get("index")
    if kind not in cluster:
        hint = did_you_mean(str(kind), cluster, " (did you mean {!r}?)")
        raise ValueError(f"TF_CONFIG: task.type {short_repr(kind)}{hint} is not a job of the "
                         f"cluster ({', '.join(map(str, cluster))})")
    if not isinstance(index, int) or isinstance(index, bool):
        raise ValueError(f"TF_CONFIG: task.index must be an integer, got {short_repr(index)}")
    count = len(cluster[kind])
    if not 0 <= index < count:
        raise ValueError(f"TF_CONFIG: task.index is {index}, but the cluster's {kind!r} job "
                         f"has {count} address(es), so the index must be 0 to {count - 1}")


def environment_problems(distribute, environ=None) -> list[tuple[tuple, str]]:
    """What the environment lacks for the resolved `distribute` section: [(path, message)].

    TF_CONFIG's problems are reported at `distribute.strategy` (the key that reads it).
    """
    if not isinstance(distribute, dict) or distribute.get("strategy") != "multi_worker":
        return []
    try:
        read_tf_config(environ)
    except ValueError as error:
        return [(("distribute", "strategy"), str(error))]
    return []


def cluster_role(tf_config: dict) -> tuple[str, int, bool]:
    """(task type, task index, is chief) of a checked TF_CONFIG: the chief is the task of
    type 'chief', or worker 0 when the cluster has no chief."""
    kind, index = tf_config["task"]["type"], tf_config["task"]["index"]
    has_chief = "chief" in tf_config["cluster"]
    return kind, index, kind == "chief" or (not has_chief and kind == "worker" and index == 0)
