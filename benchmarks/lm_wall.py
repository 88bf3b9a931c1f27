"""Past the n² wall: LM with the matrix-free CG solver against Adam, a conv net of 118 186 weights.

    python benchmarks/lm_wall.py [--seeds 3] [--budget 240]

The model: a convolutional digits classifier (graphfit's digits, 8×8×1 images): Conv2D(32, 3)
and Conv2D(64, 3) with ReLU, 2×2 max pooling, Dense(96, ReLU), Dense(10) logits, float32,
118 186 parameters; sparse categorical cross-entropy from logits. The 1797 images are shuffled
with a fixed seed and split 1437 / 360 (train / validation). Contenders, each in its own
subprocess (seeds set the initial weights and the batch order):

- LM-CG: `LevenbergMarquardt(solver="cg")` at its defaults, batch 256;
- Adam: learning rate 1e-3, batch 64.

For each: the wall time from the start of training (tracing included) until the validation
accuracy after an epoch is ≥ 97 %, the epochs that took, the seconds per epoch after the first
(for LM also per step), and the peak resident memory of the process from the moment the model
is built (the kernel's high-water mark `VmHWM`, reset then through /proc/self/clear_refs:
importing TensorFlow alone can peak above what training a model of this size holds, which hid
the difference in `ru_maxrss`), next to that of a baseline process that only imports
TensorFlow and graphfit and builds the model (the difference is what training adds). The
direct solver's figure is the memory of JᵀJ alone, n²·8 bytes, for the same model. Not a
test: the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TARGET = 0.97
BATCH = {"lm_cg": 256, "adam": 64}
NAMES = {"lm_cg": "LM-CG (solver='cg', defaults, batch 256)", "adam": "Adam (lr 1e-3, batch 64)"}


def _model(seed: int):
    import graphfit as gf
    from graphfit import layers
    gf.set_seed(seed)
    return gf.Sequential([
        layers.Conv2D(32, 3, padding="same", activation="relu"),
        layers.Conv2D(64, 3, padding="same", activation="relu"),
        layers.MaxPooling2D(2), layers.Flatten(),
        layers.Dense(96, activation="relu"), layers.Dense(10)], input_shape=(8, 8, 1))


def _data():
    import numpy as np

    import graphfit as gf
    x, y = gf.datasets.load_digits(as_images=True)
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    return (x[:1437], y[:1437]), (x[1437:], y[1437:])


def _reset_peak() -> None:
    """Starts the peak resident memory afresh (Linux: writing 5 to clear_refs resets VmHWM);
    elsewhere the peak stays the process's whole-life `ru_maxrss`."""
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        pass


def _peak_mib() -> float:
    """The peak resident memory since `_reset_peak` (whole life where it cannot reset)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux


def run_contender(kind: str, seed: int, budget: float) -> dict:
    """Trains one contender (in this process) until the target or the budget; the result."""
    import keras

    from graphfit import optimizers
    model = _model(seed)
    _reset_peak()  # the import's transient peak is not training's
    result = {"kind": kind, "seed": seed, "n": model.count_params()}
    if kind == "baseline":
        return {**result, "peak_mib": _peak_mib()}
    (x, y), validation = _data()
    optimizer = optimizers.LevenbergMarquardt(solver="cg") if kind == "lm_cg" \
        else optimizers.Adam(1e-3)
    model.compile(optimizer=optimizer, metrics=["accuracy"],
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    start, epochs, accuracy, reached = time.perf_counter(), [], 0.0, None
    while time.perf_counter() - start < budget and reached is None:
        began = time.perf_counter()
        history = model.fit(x, y, batch_size=BATCH[kind], epochs=1, verbose=0,
                            validation_data=validation, shuffle=True)
        epochs.append(time.perf_counter() - began)
        accuracy = history.history["val_accuracy"][-1]
        if accuracy >= TARGET:
            reached = time.perf_counter() - start
    steady = statistics.median(epochs[1:]) if len(epochs) > 1 else float("nan")
    steps = -(-len(x) // BATCH[kind])
    return {**result, "seconds": reached, "epochs": len(epochs), "val_accuracy": accuracy,
            "epoch_s": steady, "step_s": steady / steps, "peak_mib": _peak_mib()}


def _subprocess(kind: str, seed: int, budget: float) -> dict:
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--run", kind,
                          "--seed", str(seed), "--budget", str(budget)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def wall_table(seeds: int = 3, budget: float = 240.0) -> None:
    """Runs the contenders (each seed in its own process) and prints the markdown table."""
    baseline = _subprocess("baseline", 0, budget)
    n = baseline["n"]
    print(f"\n## Past the wall: conv digits classifier, n = {n} parameters, target "
          f"{TARGET:.0%} validation accuracy, seeds 0–{seeds - 1}\n")
    print("| contender | time to 97 % (median; per seed) | epochs | s/epoch | s/step "
          "| peak RSS | over baseline |")
    print("|---|---|---|---|---|---|---|")
    for kind in ("lm_cg", "adam"):
        runs = [_subprocess(kind, seed, budget) for seed in range(seeds)]
        times = [r["seconds"] for r in runs]
        shown = "; ".join("—" if t is None else f"{t:.1f}" for t in times)
        best = _median(times)
        peak = _median([r["peak_mib"] for r in runs])
        print(f"| {NAMES[kind]} | {'not reached' if best is None else f'{best:.1f} s'} "
              f"({shown}) | {_median([r['epochs'] for r in runs])} "
              f"| {_median([r['epoch_s'] for r in runs]):.2f} "
              f"| {_median([r['step_s'] for r in runs]):.3f} | {peak:.0f} MiB "
              f"| {peak - baseline['peak_mib']:+.0f} MiB |")
    size = n * n * 8
    print(f"| LM direct (JᵀJ + Cholesky) | refused: n > max_parameters | | | | JᵀJ alone "
          f"n²·8 = {size / 2**30:.0f} GiB | |")
    print(f"\nbaseline process (imports, model built): {baseline['peak_mib']:.0f} MiB resident; "
          f"budget {budget:.0f} s per run.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budget", type=float, default=240.0)
    parser.add_argument("--run", choices=("baseline", "lm_cg", "adam"), help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        print(json.dumps(run_contender(args.run, args.seed, args.budget)))
    else:
        wall_table(args.seeds, args.budget)


if __name__ == "__main__":
    main()
