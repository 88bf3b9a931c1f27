"""Turning a resolved recipe into objects: the model, its compile arguments, the callbacks."""

from __future__ import annotations

import inspect
import os

from graphfit.core.naming import snake_case
from graphfit.recipes.reading.callback_paths import PATH_ARGUMENTS
from graphfit.recipes.reading.components import (
    CALLBACK,
    LAYER,
    LOSS,
    METRIC,
    ComponentFamily,
    import_attribute,
)
from graphfit.recipes.running import origins, run_directory

__all__ = ["build_model", "compile_arguments", "build_callbacks", "instantiate", "loss_of"]

_RESERVED = ("type", "class_path", "inputs")


def instantiate(entry, family: ComponentFamily, path: tuple | None = None):
    """The object a checked `{type: Name, ...arguments}` entry (or bare name) describes;
    with `path`, the entry's recipe key, which errors from the object will name (`origins`)."""
    if isinstance(entry, str):
        entry = {"type": entry}
    if "class_path" in entry:
        cls = import_attribute(entry["class_path"], ".")
    else:
        cls = family.lookup(entry["type"])
    made = cls(**{k: v for k, v in entry.items() if k not in _RESERVED})
    if path is not None:
        origins.record(made, path)
    return made


def _base_layers(base: dict, dtype: str) -> list:
    """The layers of a finished run's model, its weights loaded, minus its last `drop`."""
    from graphfit.recipes.reading.recipe import load_recipe

    run = base["run"]
    run_directory.use_recorded_modules(run)  # a base whose recipe imports its own modules
    recipe = load_recipe(run_directory.read_recipe(run))
    model = build_model(recipe.config)
    shape = run_directory.read_json(os.path.join(run, "preprocessing.json"))["input_shape"]
    model.build((None, *shape))
    model.load_weights(os.path.join(run, run_directory.CHECKPOINT))
    kept = model.layers[: len(model.layers) - base["drop"]] if base["drop"] else model.layers
    for layer in kept:
        layer.trainable = base["trainable"]
        origins.record(layer, ("model", "base"))
    return kept


def build_model(config: dict):
    """The model of a resolved recipe (not built yet: it builds on the data's shape)."""
    import graphfit as gf

    section, dtype = config["model"], config["training"]["dtype"]
    if "layers" in section:
        stack = _base_layers(section["base"], dtype) if section.get("base") else []
        stack += [instantiate(entry, LAYER, ("model", "layers", index))
                  for index, entry in enumerate(section["layers"])]
        return gf.Sequential(stack, name=section["name"], dtype=dtype)
    nodes = [gf.Node(instantiate(entry, LAYER, ("model", "nodes", index)), entry["inputs"])
             for index, entry in enumerate(section["nodes"])]
    inputs = section["inputs"]
    if isinstance(inputs, dict):
        inputs = {name: tuple(shape) if shape is not None else None
                  for name, shape in inputs.items()}
    return gf.GraphModel(inputs, nodes, section["outputs"], name=section["name"], dtype=dtype)


def compile_arguments(config: dict) -> dict:
    """Keyword arguments for `model.compile` from a resolved recipe."""
    from graphfit import optimizers

    training = config["training"]
    optimizer = optimizers.get(dict(config["optimizer"]))
    origins.record(optimizer, ("optimizer",))
    return {
        "optimizer": optimizer,
        "loss": loss_of(config),
        "metrics": [_metric(m, ("metrics", i)) if isinstance(m, dict) else m
                    for i, m in enumerate(config["metrics"])],
        "jit_compile": training["jit_compile"],
        "steps_per_execution": training["steps_per_execution"],
    }


def _metric(entry: dict, path: tuple | None = None):
    """A recipe's metric object, named as Keras names the first of its class: checking a
    recipe builds its metrics too, and Keras numbers each later unnamed one (`precision_1`)."""
    if entry.get("name") is None and "class_path" not in entry:
        cls = METRIC.lookup(entry["type"])
        name = inspect.signature(cls.__init__).parameters.get("name")
        if name is not None and name.default is None:
            entry = {**entry, "name": snake_case(cls.__name__)}
    return instantiate(entry, METRIC, path)


def loss_of(config: dict):
    """The recipe's loss: a Keras loss object, or the Keras loss name it gives."""
    loss = config["loss"]
    return instantiate(loss, LOSS, ("loss",)) if isinstance(loss, dict) else loss


def build_callbacks(config: dict, run_dir: str | None = None) -> list:
    """The callbacks the recipe lists, in order; relative paths in their arguments
    (`log_dir`, `filepath`, `filename`) are placed inside `run_dir` when it is given."""
    built = []
    for index, entry in enumerate(config["callbacks"]):
        entry = dict(entry)
        for key in PATH_ARGUMENTS:
            if run_dir and isinstance(entry.get(key), str) and not os.path.isabs(entry[key]):
                entry[key] = os.path.join(run_dir, entry[key])
        built.append(instantiate(entry, CALLBACK, ("callbacks", index)))
    return built
