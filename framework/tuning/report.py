"""The study folder's report: the trials table (trials.csv and printed), the best point as a
runnable recipe (best_recipe.yaml), Optuna's plots as PNG and TensorBoard's HParams set-up.

Written from the storage, so it holds every process's trials (other machines' too), and
rewritten after every `graphfit tune` of the study.
"""

from __future__ import annotations

import csv
import math
import os
import warnings

from graphfit.tuning import optuna_objects as objects
from graphfit.tuning.plan import StudyPlan, trial_recipe

__all__ = ["write_report", "trial_rows", "PLOTS"]

PLOTS = ("optimization_history", "param_importances", "parallel_coordinate")


def trial_rows(study, plan: StudyPlan) -> tuple[list[str], list[list]]:
    """(header, rows) of the trials table, one row per trial in number order."""
    keys = plan.space.keys()
    header = ["trial", "state", plan.metric, "epochs", "seconds", *keys, "run_dir", "reason"]
    rows = []
    for trial in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number):
        state = trial.state.name.lower()
        seconds = (trial.datetime_complete - trial.datetime_start).total_seconds() \
            if trial.datetime_complete and trial.datetime_start else None
        value = trial.value if trial.value is not None else (
            trial.intermediate_values[max(trial.intermediate_values)]
            if trial.intermediate_values else None)
        reason = objects.fail_reason(trial) if state == "fail" else ""
        rows.append([trial.number, state, value, len(trial.intermediate_values) or None,
                     None if seconds is None else round(seconds, 1),
                     *[trial.params.get(key) for key in keys],
                     trial.user_attrs.get(objects.RUN_DIR, ""), reason])
    return header, rows


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}" if math.isfinite(value) else str(value)
    return str(value)


def _print_table(header: list[str], rows: list[list]) -> None:
    shown = [[_cell(value) for value in row[:-2]] for row in rows]  # no paths and reasons
    names = [name.split(".")[-1] if "." in name else name for name in header[:-2]]
    widths = [max([len(name)] + [len(row[i]) for row in shown]) for i, name in
              enumerate(names)]
    print("  ".join(name.rjust(width) for name, width in zip(names, widths)))
    for row in shown:
        print("  ".join(value.rjust(width) for value, width in zip(row, widths)))


def _best(study):
    try:
        return study.best_trial
    except ValueError:  # no complete trial yet
        return None


def _write_best_recipe(study, plan: StudyPlan, study_dir: str) -> str | None:
    best = _best(study)
    if best is None:
        return None
    assignment = plan.space.suggest(objects.optuna().trial.FixedTrial(best.params))
    recipe = trial_recipe(plan.recipe_path, plan.overrides, assignment)
    path = os.path.join(study_dir, "best_recipe.yaml")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(f"# the best trial ({best.number}) of the study {plan.study_name!r}: "
                     f"{plan.metric}={best.value:.6g}\n"
                     f"#   graphfit train {path}\n")
        handle.write(recipe.to_yaml())
    return path


def _write_plots(study, study_dir: str) -> list[str]:
    """Optuna's matplotlib plots as PNG (a plot that needs more trials is left out)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    optuna = objects.optuna()
    from optuna.visualization import matplotlib as plots

    states = optuna.trial.TrialState
    if len(study.get_trials(deepcopy=False, states=(states.COMPLETE,))) < 2:
        return []
    written = []
    makers = {"optimization_history": plots.plot_optimization_history,
              "param_importances": lambda s: plots.plot_param_importances(
                  s, evaluator=optuna.importance.PedAnovaImportanceEvaluator()),
              "parallel_coordinate": plots.plot_parallel_coordinate}
    for name in PLOTS:
        path = os.path.join(study_dir, f"{name}.png")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Optuna's "experimental" notes
            try:
                axes = makers[name](study)
            except (ValueError, RuntimeError, ZeroDivisionError) as error:
                print(f"graphfit: note: no {name}.png: {error}")
                continue
        figure = axes.figure if hasattr(axes, "figure") else axes.flat[0].figure
        figure.set_size_inches(9, 5.5)
        figure.tight_layout()
        figure.savefig(path, dpi=100)
        plt.close(figure)
        written.append(path)
    return written


def _write_hparams_config(plan: StudyPlan, study_dir: str, metric_names: list[str]) -> None:
    """TensorBoard's HParams experiment: the tuned keys and the metrics of every stage, at
    the study folder's top (`tensorboard --logdir STUDY_DIR` shows every trial)."""
    import tensorflow as tf
    from tensorboard.plugins.hparams import api as hp

    hparams = []
    for key in plan.space.keys():
        spec = _spec(plan.space.space, key)
        if spec["type"] == "choice" and all(isinstance(c, (bool, int, float, str))
                                            for c in spec["choices"]):
            domain = hp.Discrete(spec["choices"])
        elif spec["type"] == "int":
            domain = hp.IntInterval(spec["low"], spec["high"])
        elif spec["type"] == "float":
            domain = hp.RealInterval(float(spec["low"]), float(spec["high"]))
        else:
            domain = None
        hparams.append(hp.HParam(key, domain))
    metrics = [hp.Metric(name, group=stage, display_name=f"{stage}/{name}")
               for stage in ("train", "val", "test") for name in metric_names]
    folder = os.path.join(study_dir, "hparams")
    with tf.summary.create_file_writer(folder).as_default():
        hp.hparams_config(hparams=hparams, metrics=metrics)


def _spec(space: dict, key: str) -> dict:
    for top, spec in space.items():
        if top == key:
            return spec
        for branch in (spec.get("branches") or {}).values():
            if key in (branch or {}):
                return branch[key]
    raise KeyError(key)


def write_report(study, plan: StudyPlan, study_dir: str, verbose: bool = True) -> None:
    """Writes (and prints) the study's report into `study_dir`."""
    header, rows = trial_rows(study, plan)
    with open(os.path.join(study_dir, "trials.csv"), "w", newline="",
              encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows([["" if v is None else v for v in row] for row in rows])
    best = _write_best_recipe(study, plan, study_dir)
    plots = _write_plots(study, study_dir)
    metric_name = plan.metric[4:] if plan.metric.startswith("val_") else plan.metric
    _write_hparams_config(plan, study_dir, sorted({"loss", metric_name}))
    if not verbose:
        return
    _print_table(header, rows)
    failed = [row for row in rows if row[1] == "fail"]
    for row in failed:
        print(f"trial {row[0]} failed: {row[-1].splitlines()[0] if row[-1] else '?'}")
    print(f"trials table: {os.path.join(study_dir, 'trials.csv')}")
    if best:
        trial = _best(study)
        print(f"best trial: {trial.number} ({plan.metric}={trial.value:.4f}); its recipe: "
              f"{best}")
    if plots:
        print(f"plots: {', '.join(os.path.basename(p) for p in plots)} in {study_dir}")
    print(f"TensorBoard (HParams tab): tensorboard --logdir {study_dir}")
