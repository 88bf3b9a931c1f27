"""Preparing recipes to run, and reloading finished runs to evaluate or predict with.

Everything that can be checked is checked before the run directory is created: the recipe,
then the data (loaded and split), the model (built on the data's shape), the labels against
the loss. A recipe that fails there leaves nothing behind.

Training into a run directory is `graphfit.recipes.running.training_run`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any

from graphfit.core.data_checks import DataCheckError
from graphfit.core.log_values import scalar_logs
from graphfit.datasets.graph_set import GraphSet
from graphfit.recipes.reading.components import clean_message
from graphfit.recipes.reading.problems import Problem, RecipeError
from graphfit.recipes.reading.recipe import Recipe, load_recipe
from graphfit.recipes.running import distribution, origins, run_directory
from graphfit.recipes.running.builder import build_model, compile_arguments
from graphfit.recipes.running.data_loading import DataError, Splits, load_splits
from graphfit.training.input_checks import (
    NonFiniteData,
    OptimizerMismatch,
)
from graphfit.training.stage_metrics import MetricMismatch

__all__ = ["Prepared", "prepare", "evaluate_run", "load_run", "sample_shape"]


@dataclasses.dataclass
class Prepared:
    """A recipe's model (compiled, built on the data) and its data, ready to train."""

    recipe: Recipe
    model: Any
    splits: Splits
    strategy: Any = None  # the tf.distribute strategy the model was built in (or None)


def _error(recipe: Recipe, path: tuple, error: Exception) -> Exception:
    """The error at `path`, or at the entry inside it whose object raised it (`origins`):
    `model` becomes `model.layers[2]`; the user's own code's error keeps its file and line."""
    inner = origins.entry_of(error)
    if inner is not None and inner[: len(path)] == path:
        return origins.failure(error, recipe, inner)
    return RecipeError([Problem(path, clean_message(error), recipe.position(path))])


def prepare(recipe: Recipe, distribute: bool = True, record: dict | None = None) -> Prepared:
    """Loads the data, builds and compiles the model and checks them against each other.

    Args:
        recipe: the checked recipe.
        distribute: build the model inside the strategy of the recipe's `distribute:`
            section (False: on one device, as a finished run is evaluated).
        record: a finished run's `preprocessing.json`, whose statistics of a table are
            reused (evaluate, resume) instead of adapted again.

    Raises:
        RecipeError: naming the recipe key to fix (data, model, loss, ...).
        EntryFailed: the user's code behind an entry failed (a `class_path` layer's build).
    """
    with origins.reported(recipe):
        return _prepare(recipe, distribute, record)


def _prepare(recipe: Recipe, distribute: bool, record: dict | None) -> Prepared:
    import graphfit as gf
    from graphfit.training.stage_data import check_inputs

    config = recipe.config
    if distribute:  # before TensorFlow creates any strategy or starts a collective
        distribution.check_environment(recipe)
    strategy = distribution.strategy_for(config.get("distribute") if distribute else None)
    _check_base_split(recipe)
    gf.set_seed(config["seed"])
    try:
        splits = load_splits(config, record, strategy)
    except DataError as error:
        raise _error(recipe, error.path, error) from None
    except (ValueError, OSError) as error:
        raise _error(recipe, ("data",), error) from None
    _check_batched(recipe, splits)
    # Variables are made when the model is built and compiled: inside the strategy's scope.
    with strategy.scope() if strategy else contextlib.nullcontext():
        model = _build_and_compile(recipe, splits)
    training = config["training"]
    for stage, pair in (("train", splits.train), ("val", splits.val), ("test", splits.test)):
        if pair is None:
            continue
        x, y = _pair(pair)
        if stage == "train" and splits.steps_per_epoch is not None:
            x = x.take(splits.steps_per_epoch)  # one epoch of a dataset that repeats
        try:
            check_inputs(model, x, y, stage=stage, batch_size=training["batch_size"],
                         check_finite=training["check_finite"])
        except ValueError as error:
            if isinstance(error, DataCheckError) and " fails it alone" in error.where:
                error = DataCheckError(error.reason, error.layer,
                                       f"{error.where}; {_rows_counted(config, stage)}")
            raise _error(recipe, _stage_key(config, stage, error, model), error) from None
        _check_first_batch(recipe, model, stage, x)
    _check_tap_names(recipe, model)
    _check_monitors(recipe, model, splits)
    _check_callbacks(recipe, model)
    return Prepared(recipe, model, splits, strategy)


def _rows_counted(config, stage: str) -> str:
    """How a data check's row numbers count: within the stage's split of the data, which
    `data.shuffle` shuffles before splitting (the file's row is found by its values)."""
    split = {"train": "training", "val": "validation", "test": "test"}[stage]
    shuffled = config["data"].get("shuffle", False)
    order = ("shuffled before the split (data.shuffle: false keeps the file's order); find "
             "the row by its values" if shuffled else "in the file's order")
    return f"rows count from 0 within the {split} split, {order}"


def _check_first_batch(recipe: Recipe, model, stage: str, data) -> None:
    """A dataset's values are seen only once it runs: its first batch gets the checks that
    arrays get in full (labels against the outputs, integer ids for an Embedding, ...)."""
    import tensorflow as tf

    from graphfit.training.stage_data import check_inputs

    if not isinstance(data, tf.data.Dataset):
        return
    element = next(iter(data.take(1)), None)
    if not (isinstance(element, tuple) and len(element) == 2):
        return  # (x, y, sample_weight), or no batch at all: checked as it runs
    x, y = tf.nest.map_structure(lambda tensor: tensor.numpy(), element)
    training = recipe.config["training"]
    try:
        check_inputs(model, x, y, stage=stage, batch_size=None,
                     check_finite=training["check_finite"])
    except ValueError as error:
        key = _stage_key(recipe.config, stage, error, model)
        raise RecipeError([Problem(key, f"{clean_message(error)} (in the first batch of the "
                                        f"dataset the data source returned)",
                                   recipe.position(key))]) from None


def _check_batched(recipe: Recipe, splits: Splits) -> None:
    """A `data.function` that returns a tf.data.Dataset batches its samples itself: the
    recipe's `training.batch_size` must then be null (left out, it becomes null)."""
    import tensorflow as tf

    training = recipe.config["training"]
    if not isinstance(splits.train, tf.data.Dataset) or training["batch_size"] is None \
            or recipe.config["data"]["source"] != "function":  # others batch by batch_size
        return
    if recipe.positions.get(("training", "batch_size")) is None:
        training["batch_size"] = None  # the default: the dataset's own batches
        return
    path = ("training", "batch_size")
    raise RecipeError([Problem(path, (
        f"is {training['batch_size']}, but data.function ({recipe.config['data']['function']}) "
        f"returned a tf.data.Dataset, which is already batched (it sets its own batch size); "
        f"set batch_size: null (or leave it out), or return arrays (x, y) instead"),
        recipe.position(path))])


def _compiled_model(recipe: Recipe):
    """The recipe's model, compiled, not built."""
    config = recipe.config
    try:
        model = build_model(config)
    except (ValueError, TypeError, OSError) as error:
        raise _error(recipe, ("model",), error) from None
    try:
        model.compile(**compile_arguments(config))
    except (ValueError, TypeError) as error:
        raise _error(recipe, _compile_key(error), error) from None
    return model


def _build_and_compile(recipe: Recipe, splits: Splits):
    model = _compiled_model(recipe)
    config = recipe.config
    try:
        _build_on(model, splits.train)
    except ValueError as error:
        raise _error(recipe, _model_key(config), error) from None
    return model


# compile's messages open with the argument they refuse; the recipe key that sets it.
_COMPILE_KEYS = {"jit_compile": ("training", "jit_compile"),
                 "steps_per_execution": ("training", "steps_per_execution"),
                 "metrics": ("metrics",), "Layer ": ("model",)}


def _compile_key(error: Exception) -> tuple:
    text = str(error)
    for opening, key in _COMPILE_KEYS.items():
        if text.startswith(opening):
            return key
    return ("optimizer",)


# What decides which rows land in which split (see data_loading): the data must be split
# the same way as the base run's, or the base's training rows leak into this run's test rows.
_SPLIT_KEYS = (("seed",), ("data", "shuffle"), ("data", "stratify"),
               ("training", "validation_split"),
               ("training", "test_split"), ("training", "validation_data"),
               ("training", "test_data"))


def _get(config: dict, path: tuple):
    for key in path:
        config = config.get(key) if isinstance(config, dict) else None
    return config


def _data_identity(config: dict) -> dict:
    return {k: v for k, v in (config.get("data") or {}).items()
            if k not in ("shuffle", "standardize", "stratify")}


def _check_base_split(recipe: Recipe) -> None:
    """A fine-tuning run (`model.base`) on the base run's data must split it as the base run
    did, else its test rows were (partly) the base's training rows and its numbers lie."""
    base = recipe.config["model"].get("base")
    if not base or not os.path.isfile(run_directory.read_recipe(base["run"])):
        return
    base_config = run_directory.read_yaml(run_directory.read_recipe(base["run"]), dict)
    if _data_identity(base_config) != _data_identity(recipe.config):
        return  # other data: the base's training rows are not among this run's rows
    problems = []
    for path in _SPLIT_KEYS:
        mine, theirs = _get(recipe.config, path), _get(base_config, path)
        if mine != theirs:
            key = ".".join(path)
            problems.append(Problem(path, (
                f"is {mine!r} but the base run {base['run']} split the same data with "
                f"{key}: {theirs!r}; a different split would put rows the base trained on "
                f"into this run's validation and test splits (its numbers would be too "
                f"good). Set {key}: {theirs!r} to reuse the base run's split"),
                recipe.position(path)))
    if problems:
        raise RecipeError(problems)


def _check_tap_names(recipe: Recipe, model) -> None:
    """TensorBoard's `gradient_taps` and `activation_gradient_taps` name layers, which exist
    only once the model is built."""
    from graphfit.training import node_taps

    checks = {"gradient_taps": node_taps.check_names,
              "activation_gradient_taps": lambda names, model: node_taps.check_layer_names(
                  names, model, "activation_gradient_taps")}
    for index, entry in enumerate(recipe.config["callbacks"]):
        for key, check in checks.items():
            names = entry.get(key) if isinstance(entry, dict) else None
            if not names:
                continue
            try:
                check(names, model)
            except ValueError as error:
                raise _error(recipe, ("callbacks", index, key), error) from None


def _check_monitors(recipe: Recipe, model, splits: Splits) -> None:
    """A callback watching a quantity whose direction it cannot tell (a misspelt
    `monitor` in mode "auto") fails at the end of the first epoch, as in Keras; found here
    instead, before any training, with the keys the run will log."""
    from graphfit.callbacks.early_stopping import MonitorCallback
    from graphfit.recipes.reading.components import CALLBACK
    from graphfit.recipes.running.builder import instantiate

    names = model.metrics_names
    logs = dict.fromkeys(names + [f"{stage}_{name}" for stage, data in
                                  (("val", splits.val), ("test", splits.test))
                                  if data is not None for name in names])
    for index, entry in enumerate(recipe.config["callbacks"]):
        if not isinstance(entry, dict) or "type" not in entry:
            continue
        cls = CALLBACK.lookup(entry["type"])
        if not (isinstance(cls, type) and issubclass(cls, MonitorCallback)):
            continue
        callback = instantiate(entry, CALLBACK, ("callbacks", index))
        callback.set_model(model)
        try:
            callback.resolve_direction(logs)
        except ValueError as error:
            raise _error(recipe, ("callbacks", index, "monitor"), error) from None


def _check_callbacks(recipe: Recipe, model) -> None:
    """Each callback's own check of the compiled model (`Callback.check_model`: SwapEMAWeights
    needs an optimizer with `use_ema`), reported at the callback's entry."""
    from graphfit.callbacks.callback import Callback
    from graphfit.recipes.reading.components import CALLBACK
    from graphfit.recipes.running.builder import instantiate

    for index, entry in enumerate(recipe.config["callbacks"]):
        if not isinstance(entry, dict) or "type" not in entry:
            continue
        cls = CALLBACK.lookup(entry["type"])
        if not (isinstance(cls, type) and issubclass(cls, Callback)) \
                or cls.check_model is Callback.check_model:
            continue  # built only when it checks something: no side effect otherwise
        try:
            instantiate(entry, CALLBACK, ("callbacks", index)).check_model(model)
        except ValueError as error:
            raise _error(recipe, ("callbacks", index), error) from None


def _build_on(model, train) -> None:
    """Builds the model on the training inputs (the shape errors belong to the model)."""
    import tensorflow as tf

    from graphfit.training.array_data import spec_of

    x = train.element_spec[0] if isinstance(train, tf.data.Dataset) else _pair(train)[0]
    if isinstance(x, GraphSet):  # graphs: the spec of a batch, index inputs int32
        model.build_for(x.input_spec(), "x")
        return
    model.build_for(x if isinstance(train, tf.data.Dataset) else
                     tf.nest.map_structure(spec_of, x), "x")


def _model_key(config) -> tuple:
    return ("model", "inputs") if isinstance(config["model"].get("inputs"), dict) else ("model",)


def _stage_key(config, stage: str, error: Exception, model=None) -> tuple:
    """The recipe key behind a stage's data problem: a separate source, else `data` for bad
    values and `loss` for labels that do not fit the loss (`metrics` and `optimizer` for
    what cannot work with them)."""
    if isinstance(error, MetricMismatch):
        return ("metrics",)
    if str(error).startswith("jit_compile"):  # refused once the model is known
        return ("training", "jit_compile")
    if isinstance(error, OptimizerMismatch):
        return ("optimizer",)
    if isinstance(error, DataCheckError) and error.layer is not None:  # at the layer's entry
        layer = _layer_key(config, error.layer, model)
        if layer is not None:
            return layer
    separate = {"val": "validation_data", "test": "test_data"}.get(stage)
    if separate and config["training"][separate] is not None:
        return ("training", separate)
    return ("data",) if isinstance(error, NonFiniteData) else ("loss",)


def _layer_key(config, layer, model) -> tuple | None:
    """The recipe key of `layer`'s entry: the entry named as it is (model.layers[i] or
    model.nodes[i]), else, for an unnamed entry of a list of layers, the entry at the layer's
    place among the model's layers counted from the last (a base run's layers come before the
    recipe's list)."""
    for section in ("layers", "nodes"):
        for index, entry in enumerate(config["model"].get(section) or []):
            if isinstance(entry, dict) and entry.get("name") == layer.name:
                return ("model", section, index)
    entries = config["model"].get("layers") or []
    top = [] if model is None else [id(item) for item in model.layers]
    if id(layer) in top and len(top) - 1 - top.index(id(layer)) < len(entries):
        return ("model", "layers", len(entries) - 1 - (len(top) - 1 - top.index(id(layer))))
    return None

def _pair(data):
    return data if isinstance(data, tuple) else (data, None)


def sample_shape(model) -> list[int] | dict:
    spec = model.built_input_spec
    if isinstance(spec, dict):
        return {name: s.shape.as_list()[1:] for name, s in spec.items()}
    return spec.shape.as_list()[1:]


def sample_dtype(model) -> str | dict:
    """The dtype name of the model's input (a dict by name), recorded with `sample_shape` so
    that a finished run's model builds without its data (integer graph indices stay int)."""
    spec = model.built_input_spec
    if isinstance(spec, dict):
        return {name: s.dtype.name for name, s in spec.items()}
    return spec.dtype.name


def _recorded_input_spec(preprocessing: dict):
    """The input spec recorded by `sample_shape` and `sample_dtype`, or None (a run from
    before input dtypes were recorded)."""
    import tensorflow as tf

    shape, dtype = preprocessing.get("input_shape"), preprocessing.get("input_dtype")
    if shape is None or dtype is None:
        return None
    if isinstance(shape, dict):
        return {name: tf.TensorSpec([None, *shape[name]], dtype[name]) for name in shape}
    return tf.TensorSpec([None, *shape], dtype)


def load_run(run: str, data: bool = True) -> tuple[Prepared, dict]:
    """Rebuilds a finished run from its directory alone: recipe, data, model, weights.

    Args:
        run: the run directory.
        data: load the recipe's data too (to evaluate on its splits). False (to predict or
            export): the model is built from the input shape and dtype the run recorded, so
            the training data may be gone; `splits` is then None. A run from before the
            dtypes were recorded loads its data either way.

    Returns:
        The `Prepared` run (weights loaded) and its preprocessing record.

    Raises:
        ValueError: if `run` is not a finished run directory.
        RecipeError: if its recipe no longer checks (a data file moved, ...).
    """
    run = run_directory.find_run(run)  # also puts the run's user modules back on sys.path
    preprocessing = run_directory.read_json(os.path.join(run, "preprocessing.json"))
    spec = None if data else _recorded_input_spec(preprocessing)
    recipe = load_recipe(run_directory.read_recipe(run), data_files=spec is None)
    if spec is None:
        # A finished run: on one device, with the statistics it trained with.
        prepared = prepare(recipe, distribute=False, record=preprocessing)
    else:
        model = _compiled_model(recipe)
        model.build_for(spec, "x")
        prepared = Prepared(recipe, model, None)
    _load_final_weights(prepared, run)
    return prepared, preprocessing


def _load_final_weights(prepared: Prepared, run: str) -> None:
    """Loads the final weights; when they cannot be read (a damaged file), the newest intact
    training checkpoint of the run instead, with a warning naming both."""
    import warnings

    from graphfit.saving import checkpoint_files

    final = os.path.join(run, run_directory.CHECKPOINT)
    reason = checkpoint_files.unreadable_reason(final)
    if reason is None:
        prepared.model.load_weights(final)
        return
    from graphfit.recipes.running.training_run import checkpoint_folder

    folder, warned = checkpoint_folder(prepared.recipe.config, run), set()
    # The newest intact checkpoint of latest/, else of best/ (save_best_only writes only it).
    latest = (checkpoint_files.newest_intact(os.path.join(folder, "latest"), warned, False)
              or checkpoint_files.newest_intact(os.path.join(folder, "best"), warned, False))
    if latest is None:
        raise ValueError(f"the final weights {final} cannot be read ({reason}) and the run "
                         f"has no intact training checkpoint to fall back to; train it again")
    warnings.warn(f"the final weights {final} cannot be read ({reason}): using the newest "
                  f"intact training checkpoint {latest} instead (the weights of its epoch).",
                  RuntimeWarning, stacklevel=3)
    prepared.model.load_weights(latest)


def _writable_log_dir(log_dir: str) -> str:
    """`log_dir` if test logs can be written there; else a new temporary folder, with a
    note (a run on a read-only file system is still evaluated)."""
    import sys
    import tempfile

    try:
        os.makedirs(log_dir, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=log_dir, prefix=".graphfit-write-test-"):
            pass
        return log_dir
    except OSError as error:
        elsewhere = tempfile.mkdtemp(prefix="graphfit-evaluate-logs-")
        why = error.strerror or type(error).__name__
        print(f"graphfit: note: cannot write test logs into {log_dir} ({why}); writing them "
              f"to {elsewhere} instead", file=sys.stderr)
        return elsewhere


def evaluate_run(run: str, verbose: int = 0,
                 write_logs: bool = True) -> dict[str, dict[str, float]]:
    """Re-evaluates a finished run on its validation and test splits: {stage: {metric: value}}.

    With `write_logs`, the test numbers are also written to the run's TensorBoard `logs/test`
    (to a temporary folder, with a note, when the run cannot be written to).
    """
    from graphfit.callbacks import TensorBoard

    run = run_directory.find_run(run)
    prepared, _ = load_run(run)
    results = {}
    batch_size = prepared.recipe.training["batch_size"]
    for stage, data in (("val", prepared.splits.val), ("test", prepared.splits.test)):
        if data is not None:
            x, y = _pair(data)
            board = []
            if write_logs and stage == "test":
                board = [TensorBoard(_writable_log_dir(_log_dir(prepared.recipe.config, run)))]
                # The test point of the run's last epoch, as fit wrote it.
                board[0].evaluation_step = max(_epochs_trained(run) - 1, 0)
            # Checked when the data loaded, as training.check_finite says.
            results[stage] = scalar_logs(prepared.model.evaluate(
                x, y, batch_size=batch_size if isinstance(data, tuple) else None,  # batched
                stage=stage, verbose=verbose, return_dict=True,
                callbacks=board, check_finite=False))
    return results


def _log_dir(config: dict, run: str) -> str:
    """Where the run's TensorBoard wrote: the recipe's own TensorBoard, or logs/."""
    for entry in config["callbacks"]:
        if entry.get("type") == "TensorBoard" and isinstance(entry.get("log_dir"), str):
            return os.path.join(run, entry["log_dir"])
    return os.path.join(run, run_directory.LOGS)


def _epochs_trained(run: str) -> int:
    history = os.path.join(run, "history.json")
    return len(run_directory.read_json(history).get("loss", [])) if os.path.isfile(history) else 0
