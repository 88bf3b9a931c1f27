"""`graphfit inspect RECIPE`: what TensorFlow and XLA make of a recipe's compiled steps.

    graphfit inspect recipes/quickstart.yaml [--stage train|test|predict|all] [--set k=v ...]
    graphfit inspect runs/quickstart/latest      # a finished run: the recipe it was trained from

Builds and compiles the recipe's model on its data exactly as `graphfit validate` does, traces
each step for the recipe's batch size (no step runs, nothing is trained or written), and prints
per step: ops before and after Grappler with the top op types, what each Grappler pass folded
or merged, whether XLA is on with its HLO counts and fusions, the FLOPs (with notes on what
they leave out, such as a BlackBox layer's Python function), and the model's trainable /
non-trainable / update-hook counts.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

__all__ = ["add_arguments", "recipe_file", "run"]

STAGE_CHOICES = ("train", "test", "predict", "all")


def add_arguments(command: argparse.ArgumentParser) -> None:
    """Adds `inspect`'s own options to its subparser (the recipe and --set come from cli)."""
    command.add_argument("--stage", choices=STAGE_CHOICES, default="all",
                         help="which compiled step to show (default: all three)")


def _batch_and_labels(prepared):
    """(the batch size the steps are traced for, the training labels or their spec)."""
    import tensorflow as tf

    train = prepared.splits.train
    batch_size = prepared.recipe.config["training"]["batch_size"]
    if isinstance(train, tf.data.Dataset):
        spec = train.element_spec
        spec = spec if isinstance(spec, tuple) else (spec,)
        first = tf.nest.flatten(spec[0])[0]
        return first.shape[0], (spec[1] if len(spec) > 1 else None)
    x, y = train
    samples = len(tf.nest.flatten(x)[0])
    return (samples if batch_size is None else min(batch_size, samples)), y


def _graph_batch(prepared, batch_size):
    """(the first training batch of a graph data set, what the steps are traced for), or
    (None, "batch size N") for other data: a graph batch's rows are its nodes and edges, so
    tracing every input at N rows would count N one-node graphs."""
    from graphfit.datasets import GraphSet

    train = prepared.splits.train
    graphs = train[0] if isinstance(train, tuple) else None
    if not isinstance(graphs, GraphSet) or batch_size is None:
        return None, f"batch size {batch_size if batch_size is not None else 'any'}"
    first = graphs.batch(range(batch_size))
    return first, (f"the first training batch: {batch_size} graphs, "
                   f"{len(first['node_features'])} nodes, {len(first['senders'])} edges")


def recipe_file(path: str) -> str | None:
    """The recipe to inspect: `path` itself, or the saved recipe of the run directory `path`
    names (None, after saying why, for a directory that is not a finished run)."""
    import os

    from graphfit.recipes.running import run_directory

    if not os.path.isdir(path):
        return path  # load_recipe reports a missing or bad file at its place
    try:
        return run_directory.read_recipe(run_directory.find_run(path))
    except ValueError as error:
        print(f"graphfit: {error}; give a recipe's .yaml file or a finished run's directory",
              file=sys.stderr)
        return None


def run(args, recipe) -> int:
    """Runs `graphfit inspect` on the checked `recipe` (of `recipe_file(args.recipe)`);
    returns the exit code."""
    from graphfit import inspect as gf_inspect
    from graphfit.recipes.running import runner

    if "fit_many" in recipe.config:
        print(f"graphfit: {args.recipe} is a fit_many recipe: it has no model whose steps "
              f"could be inspected (graphfit train fits its formula to every data set)",
              file=sys.stderr)
        return 2
    prepared = runner.prepare(recipe)
    model = prepared.model
    batch_size, y = _batch_and_labels(prepared)
    x, traced_for = _graph_batch(prepared, batch_size)
    if x is not None:
        y = y[:batch_size]
    stages = gf_inspect.STAGES if args.stage == "all" else (args.stage,)
    # Counted on the compiled train step's graph, traced here once: its report reuses it.
    flops, notes = gf_inspect.step_flops(model, batch_size, x=x, y=y, keep_shapes=x is not None)
    print(f"{args.recipe}: model {model.name!r} ({len(model.layers)} layers, dtype policy "
          f"{model.dtype_policy.name}), steps traced for {traced_for}; nothing was run or "
          f"trained.")
    print(gf_inspect.ModelCounts.of(model).line())
    if flops is not None and flops.get("method"):
        print(f"FLOPs method: {flops['method']}")
    for note in (flops or {}).get("notes", ()):  # once for the model: e.g. what is not counted
        print(f"FLOPs note: {note}")
    for stage in stages:
        report = gf_inspect.step_graph(model, stage, batch_size, x=x, y=y, flops=False,
                                       keep_shapes=x is not None)
        report = dataclasses.replace(report, flops=flops, notes=report.notes + tuple(notes))
        print()
        print("\n".join(report.lines(model_details=False)))
    return 0
