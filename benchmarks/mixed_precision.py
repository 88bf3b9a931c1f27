"""Does mixed precision cost accuracy? The digits recipes trained in float32 and mixed_bfloat16.

Each recipe runs as a user runs it (`graphfit train RECIPE --set training.dtype=P --set
seed=S`), through the same `training_run.train`, for every seed and policy, in one process;
the table prints the test accuracy of every run, the median over seeds per policy, and the
difference of the medians. The project's target (printed, never asserted): mixed_bfloat16
at most 0.5 accuracy points below float32 on both recipes.

The digits test split is 270 images, so one image is 0.37 points: the medians over seeds are
what to compare, not single runs.

Usage:

    python benchmarks/mixed_precision.py                  # both recipes, seeds 0-2
    python benchmarks/mixed_precision.py --seeds 5 --recipes quickstart.yaml
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from graphfit.recipes import load_recipe  # noqa: E402
from graphfit.recipes.running import training_run  # noqa: E402

RECIPES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "recipes")
DEFAULT_RECIPES = ("quickstart.yaml", "digits_cnn_batchnorm.yaml")
POLICIES = ("float32", "mixed_bfloat16")
TARGET_POINTS = 0.5


def run(recipe_name: str, policy: str, seed: int, folder: str) -> tuple[float, float]:
    """(test accuracy in %, seconds) of one recipe run."""
    recipe = load_recipe(os.path.join(RECIPES, recipe_name),
                         [f"training.dtype={policy}", f"seed={seed}"])
    started = time.perf_counter()
    result = training_run.train(recipe, run_dir=os.path.join(folder, f"{policy}-{seed}"),
                                verbose=0)
    return 100.0 * result.metrics["test"]["accuracy"], time.perf_counter() - started


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipes", nargs="+", default=list(DEFAULT_RECIPES))
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1")
    args = parser.parse_args(argv)
    print("| recipe | policy | test accuracy per seed (%) | median (%) | median run (s) |")
    print("|---|---|---|---:|---:|")
    verdicts = []
    for recipe_name in args.recipes:
        medians = {}
        with tempfile.TemporaryDirectory() as folder:
            # Interleaved: seed by seed, both policies, so a slow spell hits both alike.
            runs = {policy: [] for policy in POLICIES}
            for seed in range(args.seeds):
                for policy in POLICIES:
                    runs[policy].append(run(recipe_name, policy, seed, folder))
        for policy in POLICIES:
            accuracies = [a for a, _ in runs[policy]]
            medians[policy] = statistics.median(accuracies)
            print(f"| {recipe_name} | {policy} | {', '.join(f'{a:.2f}' for a in accuracies)} "
                  f"| {medians[policy]:.2f} | "
                  f"{statistics.median(t for _, t in runs[policy]):.1f} |")
        gap = medians["mixed_bfloat16"] - medians["float32"]
        met = "met" if gap >= -TARGET_POINTS else "MISSED"
        verdicts.append(f"{recipe_name}: mixed_bfloat16 - float32 = {gap:+.2f} points "
                        f"(target: at most {TARGET_POINTS} points below float32, {met})")
    print()
    for line in verdicts:
        print(line)


if __name__ == "__main__":
    main()
