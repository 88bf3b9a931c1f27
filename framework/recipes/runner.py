"""Running recipes: train into a new run directory, and evaluate or predict from one.

Everything that can be checked is checked before the run directory is created: the recipe,
then the data (loaded and split), the model (built on the data's shape), the labels against
the loss. A recipe that fails there leaves nothing behind.

Example (Python, the same as `graphfit train`):

    >>> import graphfit as gf
    >>> recipe = gf.recipes.recipe_from_text(
    ...     "data: {source: moons, n_samples: 200}\\n"
    ...     "model: [{type: Dense, units: 8, activation: relu}, {type: Dense, units: 1}]\\n"
    ...     "loss: {type: BinaryCrossentropy, from_logits: true}\\n"
    ...     "metrics: [accuracy]\\n"
    ...     "training: {epochs: 2}\\n", "moons.yaml", default_name="moons")
    >>> import tempfile, os
    >>> run = gf.recipes.train(recipe, run_dir=os.path.join(tempfile.mkdtemp(), "run"), verbose=0)
    >>> sorted(run.metrics)
    ['test', 'train', 'val']
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from graphfit.recipes import run_directory
from graphfit.recipes.builder import build_callbacks, build_model, compile_arguments
from graphfit.recipes.components import clean_message
from graphfit.recipes.data_loading import DataError, Splits, Standardizer, load_splits
from graphfit.recipes.problems import Problem, RecipeError
from graphfit.recipes.recipe import Recipe, load_recipe

__all__ = ["Prepared", "RunResult", "prepare", "train", "evaluate_run", "load_run"]


@dataclasses.dataclass
class Prepared:
    """A recipe's model (compiled, built on the data) and its data, ready to train."""

    recipe: Recipe
    model: Any
    splits: Splits
    callbacks: list


@dataclasses.dataclass
class RunResult:
    """What `train` produced: the run directory, the final numbers and the trained model."""

    run_dir: str
    metrics: dict[str, dict[str, float]]
    history: dict[str, list]
    model: Any


def _error(recipe: Recipe, path: tuple, error: Exception) -> RecipeError:
    return RecipeError([Problem(path, clean_message(error), recipe.position(path))])


def prepare(recipe: Recipe) -> Prepared:
    """Loads the data, builds and compiles the model and checks them against each other.

    Raises:
        RecipeError: naming the recipe key to fix (data, model, loss, ...).
    """
    import graphfit as gf
    from graphfit.training_loop import check_inputs

    config = recipe.config
    gf.set_seed(config["seed"])
    try:
        splits = load_splits(config)
    except DataError as error:
        raise _error(recipe, error.path, error) from None
    except (ValueError, OSError) as error:
        raise _error(recipe, ("data",), error) from None
    try:
        model = build_model(config)
    except (ValueError, TypeError, OSError) as error:
        raise _error(recipe, ("model",), error) from None
    try:
        model.compile(**compile_arguments(config))
        callbacks = build_callbacks(config)
    except (ValueError, TypeError) as error:
        raise _error(recipe, ("optimizer",), error) from None
    training = config["training"]
    try:
        _build_on(model, splits.train)
    except ValueError as error:
        raise _error(recipe, _model_key(config), error) from None
    for stage, pair in (("train", splits.train), ("val", splits.val), ("test", splits.test)):
        if pair is None:
            continue
        x, y = _pair(pair)
        try:
            check_inputs(model, x, y, stage=stage, batch_size=training["batch_size"],
                         check_finite=training["check_finite"])
        except ValueError as error:
            raise _error(recipe, _stage_key(config, stage), error) from None
    return Prepared(recipe, model, splits, callbacks)


def _build_on(model, train) -> None:
    """Builds the model on the training inputs (the shape errors belong to the model)."""
    import tensorflow as tf

    from graphfit.data_adapter import spec_of

    x = train.element_spec[0] if isinstance(train, tf.data.Dataset) else _pair(train)[0]
    model._build_for(x if isinstance(train, tf.data.Dataset) else
                     tf.nest.map_structure(spec_of, x), "x")


def _model_key(config) -> tuple:
    return ("model", "inputs") if isinstance(config["model"].get("inputs"), dict) else ("model",)


def _stage_key(config, stage: str) -> tuple:
    """The recipe key behind a stage's data problem: a separate source, else the labels/loss."""
    separate = {"val": "validation_data", "test": "test_data"}.get(stage)
    if separate and config["training"][separate] is not None:
        return ("training", separate)
    return ("loss",)


def _pair(data):
    return data if isinstance(data, tuple) else (data, None)


def train(recipe: Recipe, run_dir: str | None = None, verbose: int = 2,
          runs_root: str = "runs") -> RunResult:
    """Trains a recipe into a new run directory (see `graphfit.recipes.run_directory`).

    Args:
        recipe: a loaded `Recipe`.
        run_dir: where to write the run (default: the recipe's `run_dir`, else
            `<runs_root>/<name>/<timestamp>`). It must not hold files yet.
        verbose: 0 silent, 1 progress bar, 2 one line per epoch.

    Raises:
        RecipeError: for anything wrong with the recipe, before any training.
    """
    from graphfit.callbacks.tensorboard import TensorBoard

    prepared = prepare(recipe)
    config, model, splits = recipe.config, prepared.model, prepared.splits
    try:
        run = run_directory.create_run(config["name"], run_dir or config["run_dir"], runs_root)
    except (ValueError, OSError) as error:
        raise _error(recipe, ("run_dir",), error) from None
    run_directory.write_yaml(os.path.join(run, "recipe.yaml"), config)
    run_directory.write_yaml(os.path.join(run, "overrides.yaml"), list(recipe.overrides))
    run_directory.write_json(os.path.join(run, "versions.json"), run_directory.versions())
    x, y = _pair(splits.train)
    run_directory.write_json(os.path.join(run, "preprocessing.json"), {
        "input_shape": _sample_shape(model),
        "feature_names": splits.feature_names,
        "standardize": splits.standardizer.to_json() if splits.standardizer else None,
    })
    training = config["training"]
    callbacks = prepared.callbacks + [TensorBoard(os.path.join(run, run_directory.LOGS))]
    history = model.fit(x, y, batch_size=training["batch_size"], epochs=training["epochs"],
                        verbose=verbose, callbacks=callbacks, validation_data=splits.val,
                        test_data=splits.test, shuffle=training["shuffle"],
                        check_finite=training["check_finite"])
    model.save_weights(os.path.join(run, run_directory.CHECKPOINT))
    metrics = _final_metrics(history.history)
    run_directory.write_json(os.path.join(run, "history.json"), history.history)
    run_directory.write_json(os.path.join(run, "metrics.json"), metrics)
    return RunResult(run, metrics, history.history, model)


def _sample_shape(model) -> list[int] | dict:
    spec = model._signature.inputs
    if isinstance(spec, dict):
        return {name: s.shape.as_list()[1:] for name, s in spec.items()}
    return spec.shape.as_list()[1:]


def _final_metrics(history: dict) -> dict[str, dict[str, float]]:
    final: dict[str, dict[str, float]] = {"train": {}}
    for key, values in history.items():
        stage = next((s for s in ("val", "test") if key.startswith(s + "_")), "train")
        name = key[len(stage) + 1:] if stage != "train" else key
        final.setdefault(stage, {})[name] = float(values[-1])
    return final


def load_run(run: str) -> tuple[Prepared, dict]:
    """Rebuilds a finished run from its directory alone: recipe, data, model, weights.

    Returns:
        The `Prepared` run (weights loaded) and its preprocessing record.

    Raises:
        ValueError: if `run` is not a finished run directory.
        RecipeError: if its recipe no longer checks (a data file moved, ...).
    """
    run = run_directory.find_run(run)
    recipe = load_recipe(run_directory.read_recipe(run))
    prepared = prepare(recipe)
    prepared.model.load_weights(os.path.join(run, run_directory.CHECKPOINT))
    preprocessing = run_directory.read_json(os.path.join(run, "preprocessing.json"))
    return prepared, preprocessing


def evaluate_run(run: str, verbose: int = 0) -> dict[str, dict[str, float]]:
    """Re-evaluates a finished run on its validation and test splits: {stage: {metric: value}}."""
    prepared, _ = load_run(run)
    results = {}
    batch_size = prepared.recipe.training["batch_size"]
    for stage, data in (("val", prepared.splits.val), ("test", prepared.splits.test)):
        if data is not None:
            x, y = _pair(data)
            results[stage] = prepared.model.evaluate(x, y, batch_size=batch_size, stage=stage,
                                                     verbose=verbose, return_dict=True)
    return results


def standardizer_of(preprocessing: dict) -> Standardizer | None:
    record = preprocessing.get("standardize")
    return Standardizer.from_json(record) if record else None

