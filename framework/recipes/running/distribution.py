"""The `tf.distribute` strategy a recipe's `distribute:` section asks for.

`check_environment` runs first, before TensorFlow creates any strategy or starts a collective:
a bad TF_CONFIG or a device this machine lacks is a recipe problem at its key (exit code 2),
not a hang or a TensorFlow error later. `strategy_for` creates the strategy once per process
(MultiWorkerMirroredStrategy must be created once, at program start-up, before other ops), and
the model is then built and compiled inside its `scope()`.

Example:

    >>> strategy_for(None) is None
    True
"""

from __future__ import annotations

from graphfit.recipes.reading.distribute_schema import environment_problems
from graphfit.recipes.reading.problems import Problem, RecipeError

__all__ = ["check_environment", "strategy_for", "MULTI_WORKER_READY"]

# The training engine does not run MultiWorkerMirroredStrategy yet: refusing is better than a
# run that hangs in its first all-reduce.
MULTI_WORKER_READY = False

_CREATED: dict = {}  # (strategy, devices) -> the strategy made for it in this process


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
    if not problems and distribute["strategy"] == "multi_worker" and not MULTI_WORKER_READY:
        path = ("distribute", "strategy")
        problems = [Problem(path, "multi_worker is not supported yet in this version (the "
                                  "training engine does not run MultiWorkerMirroredStrategy); "
                                  "use strategy: mirrored to train on the devices of one "
                                  "machine", recipe.position(path))]
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
    key = (distribute["strategy"], tuple(devices) if devices else None)
    if key not in _CREATED:
        if distribute["strategy"] == "mirrored":
            _CREATED[key] = tf.distribute.MirroredStrategy(devices)
        else:
            _CREATED[key] = tf.distribute.MultiWorkerMirroredStrategy()
    return _CREATED[key]
