"""`graphfit tune` on the digits MLP: the median pruner against none, and --jobs 2 against 1.

The study is recipes/digits_tune.yaml (learning rate x width x dropout, TPE with the same
seed) made larger by overrides: `--trials` trials of `--epochs` epochs. Three studies run as
`graphfit tune` processes, each in a fresh folder:

    pruned     tune.pruner={type: median, n_startup_trials: 5, n_warmup_steps: 2}, --jobs 1
    unpruned   tune.pruner=none, --jobs 1
    jobs 2     the pruned study with --jobs 2

and the table gives each one's wall time, its trials' states and the best validation
accuracy. The targets (issue 46): the pruned study reaches the unpruned one's best validation
accuracy within 0.5 points in at most half its wall time; --jobs 2 against --jobs 1 on this
machine, the ratio stated. Trial runs draw no PNGs (GRAPHFIT_PLOTS=0), as a search would not
look at them; each trial still writes its run directory, checkpoints and TensorBoard logs.

This is a benchmark, not a test: pytest never runs it and nothing asserts on time.

Usage:

    python benchmarks/tune.py                         # 40 trials of 10 epochs (the target)
    python benchmarks/tune.py --trials 16 --epochs 6  # a shorter run
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from machine import cpu_model  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPE = os.path.join(ROOT, "recipes", "digits_tune.yaml")
SCRIPT = os.path.join(os.path.dirname(sys.executable), "graphfit")
MEDIAN = "tune.pruner={type: median, n_startup_trials: 5, n_warmup_steps: 2}"


def _study(folder: str, trials: int, epochs: int, pruner: str, jobs: int) -> dict:
    command = [SCRIPT, "tune", RECIPE, "--study-dir", folder, "--quiet", "--jobs", str(jobs),
               "--set", f"tune.n_trials={trials}", "--set", f"training.epochs={epochs}",
               "--set", pruner]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True,
                          env={**os.environ, "GRAPHFIT_PLOTS": "0"})
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
    with open(os.path.join(folder, "trials.csv"), newline="") as handle:
        rows = list(csv.DictReader(handle))
    states = {state: sum(row["state"] == state for row in rows)
              for state in ("complete", "pruned", "fail")}
    best = max(float(row["val_accuracy"]) for row in rows if row["state"] == "complete")
    epochs_run = sum(int(row["epochs"] or 0) for row in rows)
    return {"seconds": seconds, "states": states, "best": best, "epochs": epochs_run}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--epochs", type=int, default=10)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="graphfit-tune-bench-")
    cases = [("pruned (median)", MEDIAN, 1), ("unpruned", "tune.pruner=none", 1),
             ("pruned, --jobs 2", MEDIAN, 2)]
    results = {}
    for name, pruner, jobs in cases:
        folder = os.path.join(root, name.split()[0] + str(jobs))
        results[name] = _study(folder, args.trials, args.epochs, pruner, jobs)
        print(f"{name}: {results[name]['seconds']:.0f} s", file=sys.stderr, flush=True)
    print(f"graphfit tune, digits MLP, {args.trials} trials x {args.epochs} epochs, TPE seed "
          f"0; {cpu_model()}, {os.cpu_count()} cores")
    print()
    print("| study | wall time | complete / pruned / failed | epochs trained | best val "
          "accuracy |")
    print("|---|---|---|---|---|")
    for name, result in results.items():
        states = result["states"]
        print(f"| {name} | {result['seconds']:.0f} s | {states['complete']} / "
              f"{states['pruned']} / {states['fail']} | {result['epochs']} | "
              f"{100 * result['best']:.2f} % |")
    pruned, unpruned = results["pruned (median)"], results["unpruned"]
    jobs2 = results["pruned, --jobs 2"]
    print()
    print(f"pruned / unpruned wall time: {pruned['seconds'] / unpruned['seconds']:.2f} "
          f"(target <= 0.5); best val accuracy difference: "
          f"{100 * (pruned['best'] - unpruned['best']):+.2f} points (target within 0.5)")
    print(f"--jobs 2 / --jobs 1 wall time (pruned): "
          f"{jobs2['seconds'] / pruned['seconds']:.2f}")


if __name__ == "__main__":
    main()
