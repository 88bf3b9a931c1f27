"""`graphfit tune` and `graphfit compare` (added to the command line by `add_commands`).

    graphfit tune RECIPE [--set ...] [--study-dir DIR] [--storage URL] [--jobs N] [--mlflow [URI]]
    graphfit compare RUN_OR_STUDY... [--csv FILE]
"""

from __future__ import annotations

import argparse
import os
import sys

__all__ = ["add_commands", "COMMANDS"]

EXIT_OK, EXIT_BAD_INPUT = 0, 2


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive number of processes, got "
                                         f"{text!r}")
    return value


def add_commands(commands, recipe_command) -> None:
    """Adds `tune` and `compare` to the command line's subparsers."""
    tune = recipe_command(
        "tune", "search the hyperparameters of a recipe's tune: section (Optuna)")
    tune.add_argument("--study-dir", default=None, metavar="DIR",
                      help="the study folder: trial runs, trials.csv, best_recipe.yaml, "
                           "plots, and the SQLite study (default: studies/<study name>); "
                           "the same command again resumes the study")
    tune.add_argument("--storage", default=None, metavar="URL",
                      help="an Optuna storage URL shared by several machines, e.g. "
                           "postgresql+psycopg://user:password@host:5432/db "
                           "(default: sqlite in the study folder)")
    tune.add_argument("--jobs", type=_positive, default=1, metavar="N",
                      help="run N trial processes at once on this machine")
    tune.add_argument("--mlflow", nargs="?", const="", default=None, metavar="URI",
                      help="log the study and each trial (a nested run) to MLflow: to URI, "
                           "or to a local store in the study folder")
    tune.add_argument("--quiet", action="store_true", help="print no line per trial")
    compare = commands.add_parser(
        "compare", help="print the final metrics of runs and the hyperparameters that differ",
        description="one row per run: its final train/val/test metrics, then every recipe "
                    "setting that is not the same in all runs; a study folder stands for "
                    "its trials")
    compare.add_argument("runs", nargs="+", metavar="RUN",
                         help="run directories (or runs/<name>/latest) or study folders")
    compare.add_argument("--csv", default=None, metavar="FILE", help="also write the table")
    compare.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                         help="show Python tracebacks")


def _tune(args) -> int:
    from graphfit.tuning.optuna_objects import StudyError
    from graphfit.tuning.plan import plan_study
    from graphfit.tuning.study import StudySettings, run_study

    try:
        plan = plan_study(args.recipe, args.overrides)
    except StudyError as error:  # Optuna is not installed
        print(f"graphfit: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    threads = args.threads or (max(1, (os.cpu_count() or 1) // args.jobs)
                               if args.jobs > 1 else None)
    settings = StudySettings(args.study_dir or os.path.join("studies", plan.study_name),
                             storage=args.storage, jobs=args.jobs, verbose=not args.quiet,
                             mlflow=args.mlflow, threads=threads)
    print(f"{args.recipe}: the search space checked at {plan.corners_checked} corner "
          f"point(s); study folder {settings.study_dir}")
    try:
        run_study(plan, settings)
    except StudyError as error:
        print(f"graphfit: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return EXIT_OK


def _compare(args) -> int:
    import csv

    from graphfit.tuning.compare import comparison_table, expand_runs, load_runs, print_table

    try:
        header, rows = comparison_table(load_runs(expand_runs(args.runs)))
    except ValueError as error:
        print(f"graphfit: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print_table(header, rows)
    if args.csv:
        with open(args.csv, "w", newline="", encoding="utf-8") as handle:
            csv.writer(handle).writerows([header, *rows])
        print(f"wrote {args.csv}")
    return EXIT_OK


COMMANDS = {"tune": _tune, "compare": _compare}
