"""The `graphfit` command line.

    graphfit train RECIPE [--set key=value ...] [--run-dir DIR]
    graphfit validate RECIPE [--set ...]        check everything, train nothing
    graphfit print-config RECIPE [--set ...]    the resolved recipe, every default shown
    graphfit inspect RECIPE|RUN_DIR [--stage STAGE] [--set ...]   the traced steps: ops
                                                before/after Grappler, XLA fusions, FLOPs;
                                                train nothing
    graphfit evaluate RUN_DIR                   re-evaluate a finished run
    graphfit predict RUN_DIR --input FILE --output FILE
    graphfit list layers|optimizers|losses|metrics|datasets|callbacks
    graphfit export RUN_DIR [--format saved_model|tflite|onnx] [--serving-dir DIR]
    graphfit serve RUN_DIR|EXPORT_DIR [--port 8501]   TF Serving's REST API

Exit codes: 0 success; 2 a bad recipe, override, run directory or command line (every problem
listed as file:line:col: key: message, no traceback); 1 a failure while running (the
traceback with --debug).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import warnings

__all__ = ["main"]

from graphfit.cli import listing, threads

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse exits 2 too; keep its usage line, drop nothing
        self.print_usage(sys.stderr)
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {message}\n")


@functools.cache  # built once per process: in-process callers (tests, tools) call main often
def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="graphfit", description="Train, check and use graphfit recipes.")
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks")
    threads.add_option(parser, default=None)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def recipe_command(name, help_text, optional=False):
        command = commands.add_parser(name, help=help_text, description=help_text)
        command.add_argument("recipe", help="the recipe's YAML file",
                             nargs="?" if optional else None)
        command.add_argument("--set", dest="overrides", action="append", default=[],
                             metavar="KEY=VALUE", help="override a key, e.g. training.epochs=3")
        command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                             help="show Python tracebacks")
        threads.add_option(command)
        return command

    train = recipe_command("train", "train a recipe into a new run directory", optional=True)
    train.add_argument("--run-dir", help="where to write the run (must not hold files yet)")
    train.add_argument("--resume", metavar="RUN_DIR",
                       help="continue an interrupted run from its latest checkpoint (only "
                            "--set training.epochs=N, --set training.dtype=P between float32 "
                            "and the mixed policies, and --set distribute=... may change it)")
    train.add_argument("--verbose", type=int, choices=(0, 1, 2), default=2,
                       help="0 silent, 1 progress bar, 2 one line per epoch (default)")
    validate = recipe_command("validate", "check a recipe, its data and its model; train nothing")
    validate.add_argument("--safe", action="store_true",
                          help="import and run none of the recipe's own code (imports:, "
                               "class_path:, data.function:); list it instead")
    recipe_command("print-config", "print the resolved recipe with every default")
    from graphfit.cli import inspect_command as cli_inspect

    cli_inspect.add_arguments(recipe_command(
        "inspect", "show the traced steps: ops before/after Grappler, XLA, FLOPs; train nothing"))
    evaluate = commands.add_parser("evaluate", help="re-evaluate a finished run")
    evaluate.add_argument("run", help="the run directory (or runs/<name>/latest)")
    evaluate.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                          help="show Python tracebacks")
    threads.add_option(evaluate)
    predict = commands.add_parser("predict", help="predict with a finished run")
    predict.add_argument("run", help="the run directory (or runs/<name>/latest)")
    predict.add_argument("--input", required=True, help="a CSV (with header) or .npz file")
    predict.add_argument("--output", required=True, help="the CSV file to write")
    predict.add_argument("--id-column", default=None, metavar="NAME",
                         help="copy this input column (or .npz array) to the output's first "
                              "column; it is not a feature")
    predict.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                         help="show Python tracebacks")
    threads.add_option(predict)
    plot = commands.add_parser(
        "plot", help="draw a run's learning curves, or compare several runs",
        description="one run: learning_curves.png in the run directory (or --output); several "
                    "runs: comparison_<metric>.png per metric in --output (default: here). "
                    "Needs matplotlib: pip install graphfit[plots]")
    plot.add_argument("runs", nargs="+", metavar="RUN",
                      help="run directories (or runs/<name>/latest)")
    plot.add_argument("--output", default=None, metavar="DIR", help="folder for the PNG files")
    plot.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                      help="show Python tracebacks")
    export = commands.add_parser(
        "export", help="write a finished run as a SavedModel, TFLite or ONNX for serving",
        description="a SavedModel with serving_default, predict, classify (classifiers) and "
                    "one signature per --layer (or a .tflite / .onnx file of "
                    "serving_default); the run's standardization runs inside it")
    export.add_argument("run", help="the run directory (or runs/<name>/latest)")
    export.add_argument("--output", default=None, metavar="DIR",
                        help="a new folder or file (default: RUN/saved_model, "
                             "RUN/model.tflite, RUN/model.onnx)")
    export.add_argument("--layer", dest="layers", action="append", default=[], metavar="NAME",
                        help="also export this layer's output as a signature (repeatable)")
    from graphfit.cli import serve_command

    serve_command.add_export_arguments(export)
    export.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show Python tracebacks")
    from graphfit.tuning import cli as tuning_cli  # tune, compare

    tuning_cli.add_commands(commands, recipe_command)
    serve = commands.add_parser(
        "serve", help="serve a run or an export over HTTP (TF Serving's REST API)",
        description="POST /v1/models/NAME:predict with instances or inputs, GET "
                    "/v1/models/NAME, /metrics; needs pip install 'graphfit[serve]'")
    serve_command.add_serve_arguments(serve)
    serve.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help="show Python tracebacks")
    listing_command = commands.add_parser("list", help="list what recipes can name")
    listing_command.add_argument("kind", choices=listing.KINDS)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Runs one command; returns its exit code (the console script exits with it)."""
    args = _parser().parse_args(argv)  # --help and bad arguments end here, before TensorFlow
    if args.command == "list":
        return _list(args)
    if not args.debug:  # --debug shows warnings in full (and TensorFlow's start-up lines)
        # graphfit's warnings are whole sentences: one line each, without Python's source echo.
        warnings.formatwarning = _one_line_warning
    if args.command not in _DRAFT_FIRST:
        _start_tensorflow(args)
    from graphfit.recipes.reading.problems import RecipeError
    from graphfit.recipes.running import disk_faults
    from graphfit.recipes.running.disk_faults import DiskFault
    from graphfit.recipes.running.origins import EntryFailed
    from graphfit.recipes.running.run_directory import DamagedRunFile

    try:
        return _COMMANDS[args.command](args)
    except RecipeError as error:
        if args.debug:
            raise
        print(str(error), file=sys.stderr)
        count = len(error.problems)
        print(f"graphfit: {count} problem{'s' if count != 1 else ''} found; nothing was run.",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    except EntryFailed as error:  # the user's code behind a recipe entry: where and what
        if args.debug:
            raise
        print(str(error), file=sys.stderr)
        where = "in the code that entry names" if error.user_code else "at that recipe entry"
        print(f"graphfit: {args.command} failed {where} (run again with --debug for the "
              f"traceback)", file=sys.stderr)
        return EXIT_FAILED
    except (_BadInput, DamagedRunFile) as error:
        if args.debug:
            raise
        print(f"graphfit: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("graphfit: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # a failure while running: say what, trace on request
        if args.debug:
            raise
        fault = str(error) if isinstance(error, DiskFault) else disk_faults.describe(error)
        what = fault or f"{type(error).__name__}: {error}"
        print(f"graphfit: {args.command} failed: {what}\n"
              f"(run again with --debug for the traceback)", file=sys.stderr)
        return EXIT_FAILED


def _start_tensorflow(args) -> None:
    """Imports TensorFlow (quietly, unless --debug: then its start-up lines show) and sizes
    its thread pools; once per command, before anything runs a TensorFlow op."""
    if not args.debug:
        from graphfit.cli.quiet_tensorflow import import_tensorflow

        import_tensorflow()
    if args.threads is not None:
        threads.use_threads(args.threads)


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    return f"graphfit: warning: {message}\n"


class _BadInput(Exception):
    """A bad run directory or input file named on the command line (exit code 2)."""


def _resume(args):
    from graphfit.recipes.reading.overrides import parse_key
    from graphfit.recipes.running import run_directory, training_run

    if args.recipe or args.run_dir:
        raise _BadInput("--resume continues a run from its own recipe and directory; give no "
                        "recipe file and no --run-dir")
    epochs, dtype, distribute = None, None, []
    for text in args.overrides:
        key, _, value = text.partition("=")
        try:
            path = parse_key(key.strip())
            if path[:1] == ("distribute",):  # where it runs, not what it computes
                distribute.append(text)
                continue
            if path == ("training", "dtype"):  # float32 <-> mixed: the same variables
                dtype = value.strip()
                continue
            if path != ("training", "epochs"):
                raise ValueError
            epochs = int(value)
        except ValueError:
            raise _BadInput(f"--set {text}: a resumed run keeps its recipe; only "
                            f"training.epochs=N (an integer), training.dtype=P (float32 and "
                            f"the mixed policies) and distribute=... (e.g. distribute=null to "
                            f"continue on one device) may be set") from None
    try:
        return training_run.resume(args.resume, epochs=epochs, verbose=args.verbose,
                                   distribute=distribute, dtype=dtype)
    except ValueError as error:
        if type(error) is not ValueError and not isinstance(error, run_directory.RunBusy):
            raise  # a RecipeError keeps its own report
        raise _BadInput(error) from None


def _checked_recipe(args, safe: bool = False, start_workers: bool = False,
                    path: str | None = None):
    """`args.recipe` (or `path`) with `args.overrides`, checked (`check_draft`). Its file,
    YAML and `--set` mistakes are reported before TensorFlow starts; `start_workers`: a
    multi-worker recipe's strategy is created before the check runs any TensorFlow op."""
    from graphfit.recipes.reading.draft import read_draft

    draft = read_draft(path or args.recipe, args.overrides)
    _start_tensorflow(args)
    from graphfit.recipes.reading.recipe import check_draft

    if start_workers:
        from graphfit.recipes.running import distribution

        distribution.start_early_from(draft.document)
    return check_draft(draft, safe=safe)


def _train(args) -> int:
    if args.resume:
        _start_tensorflow(args)
        result = _resume(args)
    elif args.recipe is None:
        raise _BadInput("train needs a recipe file, or --resume RUN_DIR")
    else:
        _check_run_dir_argument(args.run_dir)
        recipe = _checked_recipe(args, start_workers=True)
        from graphfit.recipes.running import many_fits_run, run_directory, training_run

        if many_fits_run.is_many_fits(recipe.config):  # one formula, many data sets
            return _fit_many(recipe, args.run_dir)
        try:
            result = training_run.train(recipe, run_dir=args.run_dir, verbose=args.verbose)
        except run_directory.RunBusy as error:
            raise _BadInput(error) from None
    from graphfit.callbacks.chief import is_chief

    if not is_chief(result.model):
        return EXIT_OK  # another worker than the chief: the chief reports the run
    print(f"run directory: {result.run_dir}")
    if result.restored_epoch is not None:
        # The train numbers are that epoch's too, not the last epoch's of the progress lines.
        print(f"final weights: epoch {result.restored_epoch + 1}'s, restored by EarlyStopping; "
              f"the numbers below are theirs (train: that epoch's running means)")
    for stage, values in result.metrics.items():
        print(f"{stage}: " + ", ".join(f"{k}={v:.4f}" for k, v in values.items()))
    if getattr(result, "fit_report", None) is not None:
        print(f"fit report (also in {os.path.join(result.run_dir, 'fit_report.txt')}):")
        print(result.fit_report)
    return EXIT_OK


def _fit_many(recipe, run_dir: str | None) -> int:
    """`graphfit train` of a `fit_many:` recipe: every data set fitted, a table written."""
    from graphfit.recipes.running import many_fits_run, run_directory

    try:
        run = many_fits_run.fit_recipe(recipe, run_dir=run_dir)
    except run_directory.RunBusy as error:
        raise _BadInput(error) from None
    print("\n".join(many_fits_run.summary_lines(run)))
    return EXIT_OK


def _check_run_dir_argument(run_dir: str | None) -> None:
    if run_dir is None:
        return
    if not run_dir.strip():
        raise _BadInput("--run-dir is empty; give the directory to write the run to (new or "
                        "empty), or leave the option out for runs/<name>/<time>")
    if os.path.exists(run_dir) and not os.path.isdir(run_dir):
        raise _BadInput(f"--run-dir {run_dir} is a file, not a directory; give a new or "
                        f"empty directory")


def _validate(args) -> int:
    recipe = _checked_recipe(args, safe=args.safe)
    from graphfit.core.variables import count_parameters
    from graphfit.recipes.running import distribution, many_fits_run, runner

    if many_fits_run.is_many_fits(recipe.config):  # no user code: its data alone is loaded
        curves = many_fits_run.load_curves(recipe)
        section = recipe.config["fit_many"]
        print(f"{args.recipe}: OK. fit_many: {len(curves.ids)} data sets of "
              f"{curves.points} points, {section['formula']} with {len(section['params'])} "
              f"parameters; nothing was fitted.")
        return EXIT_OK
    base = recipe.config["model"].get("base") if isinstance(recipe.config["model"], dict) \
        else None
    if args.safe and (recipe.user_code or base):
        # Loading the data or building the model would run that code: stop at the checks.
        print(f"{args.recipe}: OK as far as it can be checked without running any code of "
              f"the recipe's; data and model were not loaded.")
        if recipe.user_code:
            print("Training or validating it without --safe imports and runs:")
            for reference in recipe.user_code:
                print(f"  {reference}")
        if base:
            print(f"  model.base: loads the run {base.get('run')!r}, and any code its "
                  f"recipe names")
        return EXIT_OK
    if recipe.config.get("tune") is not None:  # every point of the search space, as tune
        from graphfit.tuning.plan import plan_study

        plan = plan_study(args.recipe, args.overrides)
        print(f"  tune: the search space checked at {plan.corners_checked} corner(s); metric "
              f"{plan.metric} ({plan.direction})")
    distribute = recipe.config.get("distribute") or {}
    if distribute.get("strategy") == "multi_worker":
        # TF_CONFIG is checked; the model is built on one device: validating starts no
        # cluster (the other workers are not waiting for it).
        distribution.check_environment(recipe)
    prepared = runner.prepare(recipe, distribute=distribute.get("strategy") != "multi_worker")
    splits, model = prepared.splits, prepared.model
    files = splits.record.get("image_folder", {}).get("files", {})  # a dataset per split
    sizes = _sizes({stage: files.get(stage) or _count(data) for stage, data in
                    (("train", splits.train), ("val", splits.val), ("test", splits.test))
                    if data is not None})
    parameters = count_parameters(model.trainable_variables)
    print(f"{args.recipe}: OK. data: {sizes}; model: {len(model.layers)} layers, "
          f"{parameters:,} trainable parameters; nothing was trained.")
    if splits.table is not None:
        _print_table_schema(splits.table)
    elif splits.record.get("class_names"):
        print("  classes (id: name): " + ", ".join(
            f"{index}: {name}" for index, name in enumerate(splits.record["class_names"])))
    return EXIT_OK


def _print_table_schema(record: dict) -> None:
    """The typed columns of a table (declared or inferred) and what the model receives."""
    from graphfit.tabular import Column, describe

    columns = [Column.from_record(c) for c in record["preprocessor"]["columns"]]
    sizes = record.get("vocabulary_sizes")
    print("columns (statistics from the training split):")
    print("\n".join(describe(columns, sizes)))
    if record.get("target"):
        classes = record.get("class_names")
        print(f"  target {record['target']}: " + (f"classes {', '.join(classes)} (ids 0..)"
                                                  if classes else "numbers"))
    names = record["input_names"]
    print(f"model input: {len(names)} features ({', '.join(names[:8])}"
          f"{', ...' if len(names) > 8 else ''})")


def _count(data) -> str | None:
    """The number of samples of arrays; None for a dataset (a stream is counted as it is read)."""
    if not isinstance(data, tuple):
        return None
    x = data[0]
    return str(len(next(iter(x.values())) if isinstance(x, dict) else x))


def _sizes(counts: dict) -> str:
    """"train 28, val 6, test 6 samples"; a split streamed from a dataset says so instead."""
    if all(counts.values()):
        return ", ".join(f"{stage} {count}" for stage, count in counts.items()) + " samples"
    return ", ".join(f"{stage} {count} samples" if count else f"{stage} streamed"
                     for stage, count in counts.items()) + \
        " (a stream's size is known once it is read)"


def _print_config(args) -> int:
    print(_checked_recipe(args).to_yaml(), end="")
    return EXIT_OK


def _find(run: str) -> str:
    from graphfit.recipes.running import run_directory

    if not run.strip():
        raise _BadInput("the run directory is empty text; give a run directory such as "
                        "runs/quickstart/latest")
    try:
        return run_directory.find_run(run)
    except ValueError as error:
        raise _BadInput(error) from None


def _evaluate(args) -> int:
    from graphfit.recipes.running import many_fits_run, runner

    fitted = _fit_many_summary(args.run, many_fits_run)
    if fitted is not None:
        print("\n".join(fitted))
        return EXIT_OK
    run = _find(args.run)
    results = runner.evaluate_run(run)
    print(f"run directory: {run}")
    for stage, values in results.items():
        print(f"{stage}: " + ", ".join(f"{k}={v:.4f}" for k, v in values.items()))
    report = os.path.join(run, "fit_report.txt")
    if os.path.isfile(report):  # a curve-fit run: the report written when it finished
        print(f"fit report ({report}):")
        with open(report, encoding="utf-8") as handle:
            print(handle.read(), end="")
    return EXIT_OK


def _fit_many_run(run: str) -> str | None:
    """The directory of a finished `fit_many:` run (one with its summary), or None."""
    from graphfit.recipes.running import many_fits_run

    path = os.path.abspath(os.path.expanduser(run))
    if os.path.basename(path) == "latest" and os.path.exists(path):
        path = os.path.realpath(path)
    return path if os.path.isfile(os.path.join(path, many_fits_run.SUMMARY_FILE)) else None


def _fit_many_summary(run: str, many_fits_run) -> list[str] | None:
    """A `fit_many:` run's saved summary, introduced as such (it has no model to evaluate),
    or None for any other run."""
    path = _fit_many_run(run)
    lines = None if path is None else many_fits_run.saved_summary_lines(path)
    if lines is None:
        return None
    return [f"{path} is a fit_many run: it has no model to evaluate; the fits it saved "
            f"(re-fit with `graphfit train {os.path.join(path, 'recipe.yaml')}`):", *lines]


def _predict(args) -> int:
    from graphfit.recipes.running import prediction, runner, source_inputs
    from graphfit.recipes.running.builder import loss_of

    run = _find(args.run)
    try:
        prediction.check_output(args.output)  # before the model loads: fail fast
    except (ValueError, OSError) as error:
        raise _BadInput(f"--output {args.output}: {error}") from None
    prepared, preprocessing = runner.load_run(run, data=False)  # the training data may be gone
    form = prediction.InputFormat.of_run(prepared.recipe.config["data"], args.id_column)
    table = preprocessing.get("table")
    try:
        if table is not None:  # raw rows: typed columns by name
            x, ids = prediction.read_table_inputs(args.input, table, form)
        elif source_inputs.reads_own_inputs(preprocessing):  # images, time-series windows
            x, ids, id_name = source_inputs.read_source_inputs(
                args.input, preprocessing, prepared.recipe.config["data"].get("on_corrupt", "fail"))
            form = prediction.InputFormat(id_column=id_name)
        else:
            x = prediction.read_inputs(args.input, preprocessing, form)
            ids = None if form.id_column is None else prediction.read_ids(args.input, form,
                                                                          len(x))
    except (ValueError, OSError) as error:
        raise _BadInput(f"--input {args.input}: {error}") from None
    outputs = prepared.model.predict(x, verbose=0)
    names, rows = prediction.prediction_table(outputs, loss_of(prepared.recipe.config))
    class_names = (table or {}).get("class_names") or preprocessing.get("class_names")
    names = prediction.named_columns(names, class_names)
    try:
        prediction.write_csv(args.output, names, rows, ids, form.id_column, class_names)
    except (ValueError, OSError) as error:
        raise _BadInput(f"--output {args.output}: {error}") from None
    if class_names and "class" in names and ids is not None:
        for shown_id, row in list(zip(ids, rows))[:20]:
            print(f"{shown_id}: {class_names[int(row[0])]}")
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    print(f"wrote {len(rows)} predictions ({shown})"
          f" to {args.output}")
    return EXIT_OK


def _plot(args) -> int:
    from graphfit import plots

    fit_many = [path for path in map(_fit_many_run, args.runs) if path is not None]
    if fit_many and len(args.runs) > 1:
        raise _BadInput(f"{fit_many[0]} is a fit_many run: it trains no model, so it has no "
                        f"learning curves to compare; plot it alone (`graphfit plot "
                        f"{fit_many[0]}` draws its first curves with their fits)")
    runs = fit_many or [_find(run) for run in args.runs]
    try:
        if fit_many:
            return _plot_fit_many(fit_many[0], args.output, plots)
        written = plots.plot_command(runs, args.output)
    except plots.PlotsUnavailable as error:
        print(f"graphfit: {error}", file=sys.stderr)
        return EXIT_FAILED
    except ValueError as error:  # no history.json, --output a file
        raise _BadInput(error) from None
    for path in written:
        print(f"wrote {path}")
    return EXIT_OK


def _plot_fit_many(run: str, output: str | None, plots) -> int:
    """`graphfit plot` of a finished `fit_many:` run: fit.png of its first data sets and
    their fits (it has no learning curves: it trains no model)."""
    import json

    from graphfit.recipes.running import many_fits_run

    with open(os.path.join(run, many_fits_run.SUMMARY_FILE), encoding="utf-8") as handle:
        count = json.load(handle)["curves"]
    about = (f"{run} is a finished fit_many run ({count} data sets, one row each in "
             f"{os.path.join(run, many_fits_run.TABLE_FILE)}; `graphfit evaluate {run}` "
             f"summarizes them). It trains no model, so it has no learning curves")
    if not plots.has_fitted_curve(run):
        print(f"{about}, and it holds no fitted_curve.json to draw (a formula of several "
              f"input columns has no curve over one x; a run made before graphfit wrote one: "
              f"`graphfit train {os.path.join(run, 'recipe.yaml')}` fits it again): graphfit "
              f"plot draws nothing for it.")
        return EXIT_OK
    if output is not None and os.path.exists(output) and not os.path.isdir(output):
        raise _BadInput(f"--output {output} is a file, not a folder; give a folder for the "
                        f"PNG files")
    result = plots.fitted_curve(run, None if output is None else os.path.join(
        output, plots.FIT_PLOT))
    shown = len(result.data["data_sets"])
    print(f"{about}; fit.png draws its first {shown} data set(s) with their fits.")
    for path in result.paths:
        print(f"wrote {path}")
    return EXIT_OK


def _export(args) -> int:
    from graphfit.cli import serve_command

    run = _find(args.run)
    try:
        print(serve_command.export(args, run))
    except ValueError as error:  # an existing --output, an unknown layer, a BlackBox layer
        raise _BadInput(error) from None
    return EXIT_OK


def _serve(args) -> int:
    from graphfit.cli import serve_command

    try:
        serve_command.serve(args)
    except ImportError as error:
        print(f"graphfit: serve needs Starlette and uvicorn ({error}): pip install "
              f"'graphfit[serve]'", file=sys.stderr)
        return EXIT_FAILED
    except ValueError as error:  # not a SavedModel or run, bad options
        raise _BadInput(error) from None
    return EXIT_OK


def _inspect(args) -> int:
    from graphfit.cli import inspect_command as cli_inspect

    path = cli_inspect.recipe_file(args.recipe)
    if path is None:
        return EXIT_BAD_INPUT
    return cli_inspect.run(args, _checked_recipe(args, path=path))


def _tuning(args) -> int:  # graphfit tune, graphfit compare
    from graphfit.tuning import cli as tuning_cli

    return tuning_cli.COMMANDS[args.command](args)


def _list(args) -> int:
    for name, summary in listing.entries(args.kind):
        print(f"{name:34s} {summary}" if summary else name)
    return EXIT_OK


# Commands that read a recipe's draft (file, YAML, overrides, outline) before they start
# TensorFlow themselves: its mistakes are reported in a fraction of a second.
_DRAFT_FIRST = frozenset({"train", "validate", "print-config", "inspect"})

_COMMANDS = {"train": _train, "validate": _validate, "print-config": _print_config,
             "evaluate": _evaluate, "predict": _predict, "list": _list, "inspect": _inspect,
             "plot": _plot, "export": _export, "tune": _tuning, "compare": _tuning,
             "serve": _serve}


if __name__ == "__main__":
    sys.exit(main())
