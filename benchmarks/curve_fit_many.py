"""Small fits and many fits: graphfit's `fitting` against SciPy's `curve_fit`.

    python benchmarks/curve_fit_many.py [--curves 10000] [--sizes 100,1000,10000,100000]
                                        [--repeats 3] [--skip-small] [--skip-many]

1. Small fits (issue 44, item 5), NIST's Misra1a (14 points, 2 parameters, start 1):
   - the first fit in a fresh process (TensorFlow and graphfit already imported, from the
     formula to the fitted parameters): `fitting.fit_curve` (its default, the Python loop
     of `python_lm` with the formula evaluated in NumPy), the same loop with every trial
     evaluated by TensorFlow's trial function (`python_lm.EVALUATION = "tensorflow"`, the
     default before NumPy's), `fit_curve(loop="traced")` (the traced loop of `batched_lm`)
     and, for reference, the same fit through `model.fit` with `LevenbergMarquardt` (a
     `layers.Formula` model); medians over `--repeats` processes, the kinds interleaved;
   - a further fit of the same formula on new data (Misra1a's y scaled by 1 + 0.001·i),
     median of `--further` (30) interleaved rounds: the `fit_curve` paths, a second
     `model.fit` model, and SciPy's `curve_fit`; each with its CPU time (the load distorts
     it less than the wall) and its ratio to SciPy's in the same run.
2. Many fits (item 6): `--curves` noisy Misra1a-like curves (each its own b1, b2 and 1 %
   noise on Misra1a's x) fitted in one `fitting.fit_many` call against a loop of
   `curve_fit` over them (SciPy's defaults tightened to xtol = ftol = 1e-14 so that both
   converge to the last digits): the time (graphfit: median of `--repeats` calls after the
   first, which traces; the first call too), the speed-up, and the parameters' agreement
   (digits of the largest relative difference). Then the time per curve for each of
   `--sizes` (graphfit: median of the calls after the first, which traces or compiles that
   shape; SciPy's per-curve time measured on up to 1000 curves). `fit_many` runs under XLA
   from 50 000 data values on (`jit_compile="auto"`): 10 000 and 100 000 curves here.
Not a test: numbers depend on the machine and its load; the script prints both.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import contextlib  # noqa: E402

import numpy as np  # noqa: E402

from benchmarks.machine import cpu_model  # noqa: E402

MISRA = "b1*(1-exp(-b2*x))"
START = {"b1": 500.0, "b2": 1e-4}
# The first-fit kinds (each a fresh process) and how the further fits label them.
FIRST_FITS = ("fit_curve", "fit_curve tf-trials", "fit_curve traced", "model.fit")
LABELS = {"fit_curve": "graphfit fit_curve (Python loop, NumPy trials: the default)",
          "fit_curve tf-trials": "graphfit fit_curve, Python loop, TensorFlow trials (before)",
          "fit_curve traced": "graphfit fit_curve(loop='traced')",
          "model.fit": "graphfit model.fit, LevenbergMarquardt",
          "fit_curve xla": "graphfit fit_curve(jit_compile=True), after its compile"}


def _misra(x, b1, b2):
    return b1 * (1 - np.exp(-b2 * x))


def _problem():
    from tests.optimizers.levenberg_marquardt import nist

    return nist.read(nist.DATA / "Misra1a.dat")


@contextlib.contextmanager
def _evaluation(kind: str):
    """The Python loop's trials by TensorFlow's trial function for the "tf-trials" kinds."""
    from graphfit.fitting import python_lm

    before = python_lm.EVALUATION
    python_lm.EVALUATION = "tensorflow" if kind.endswith("tf-trials") else "numpy"
    try:
        yield
    finally:
        python_lm.EVALUATION = before


def _first_fit(kind: str) -> dict:
    """One fit in this (fresh) process: {'seconds', 'b1'}."""
    import tensorflow as tf  # noqa: F401  (imported before the clock, as the issue says)

    import graphfit as gf
    from graphfit import fitting, layers, optimizers

    problem = _problem()
    start, cpu = time.perf_counter(), time.process_time()
    if kind.startswith("fit_curve"):
        loop = "traced" if kind.endswith("traced") else "auto"
        with _evaluation(kind):
            b1 = fitting.fit_curve(MISRA, problem.x[:, 0], problem.y, p0=START,
                                   loop=loop).values["b1"]
    else:
        formula = layers.Formula(MISRA, params=START, dtype="float64")
        model = gf.Sequential([formula], dtype="float64")
        model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
        model.fit(problem.x, problem.y[:, None], batch_size=None, epochs=2000, verbose=0)
        b1 = formula.values()["b1"]
    return {"seconds": time.perf_counter() - start, "cpu": time.process_time() - cpu, "b1": b1}


def _in_fresh_process(kind: str) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--first-fit", kind]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _further_fits(repeats: int = 30) -> dict:
    """Median seconds of a further fit on new data (wall, and CPU as "... cpu"): the
    fit_curve paths, model.fit, SciPy; each round runs every path once, interleaved."""
    from scipy.optimize import curve_fit

    import graphfit as gf
    from graphfit import fitting, layers, optimizers

    problem = _problem()
    x = problem.x[:, 0]
    names = ("fit_curve", "fit_curve tf-trials", "fit_curve traced", "curve_fit", "model.fit",
             "fit_curve xla")
    times = {key: [] for name in names for key in (name, name + " cpu")}
    fitting.fit_curve(MISRA, x, problem.y, p0=START, jit_compile=True)  # XLA's compile
    fitting.fit_curve(MISRA, x, problem.y, p0=START)  # the formula's parse
    with _evaluation("tf-trials"):
        fitting.fit_curve(MISRA, x, problem.y, p0=START)  # the trial function's trace
    fitting.fit_curve(MISRA, x, problem.y, p0=START, loop="traced")
    for i in range(repeats):
        y = problem.y * (1 + 0.001 * (i + 1))
        for name, run in (("fit_curve", lambda y=y: fitting.fit_curve(MISRA, x, y, p0=START)),
                          ("fit_curve tf-trials", lambda y=y: fitting.fit_curve(
                              MISRA, x, y, p0=START)),
                          ("fit_curve traced", lambda y=y: fitting.fit_curve(
                              MISRA, x, y, p0=START, loop="traced")),
                          ("curve_fit", lambda y=y: curve_fit(_misra, x, y,
                                                              p0=[START["b1"], START["b2"]]))):
            with _evaluation(name):
                start, cpu = time.perf_counter(), time.process_time()
                run()
            times[name].append(time.perf_counter() - start)
            times[name + " cpu"].append(time.process_time() - cpu)
        start, cpu = time.perf_counter(), time.process_time()
        fitting.fit_curve(MISRA, x, y, p0=START, jit_compile=True)
        times["fit_curve xla"].append(time.perf_counter() - start)
        times["fit_curve xla cpu"].append(time.process_time() - cpu)
    for i in range(min(3, repeats)):  # model.fit: a new model traces again (seconds each)
        y = problem.y * (1 + 0.001 * (i + 1))
        start, cpu = time.perf_counter(), time.process_time()
        formula = layers.Formula(MISRA, params=START, dtype="float64")
        model = gf.Sequential([formula], dtype="float64")
        model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
        model.fit(problem.x, y[:, None], batch_size=None, epochs=2000, verbose=0)
        times["model.fit"].append(time.perf_counter() - start)
        times["model.fit cpu"].append(time.process_time() - cpu)
    return {name: float(np.median(values)) for name, values in times.items()}


def small_table(repeats: int, further_repeats: int = 30) -> None:
    load = os.getloadavg()[0]
    runs = {kind: [] for kind in FIRST_FITS}
    for _ in range(repeats):  # interleaved, so that a change of load hits every kind
        for kind in FIRST_FITS:
            runs[kind].append(_in_fresh_process(kind))
    first = {kind: np.median([run["seconds"] for run in values]) for kind, values in
             runs.items()}
    first_cpu = {kind: np.median([run["cpu"] for run in values]) for kind, values in
                 runs.items()}
    further = _further_fits(further_repeats)
    print(f"\nSmall fits: NIST Misra1a (14 points, 2 parameters), start 1, float64; "
          f"{cpu_model()}, load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} "
          f"at the end")
    print(f"| path | first fit in a process, wall (CPU), median of {repeats} | further fit, "
          f"new data, wall (CPU), median of {further_repeats} | further / SciPy, wall (CPU) |")
    print("|---|---:|---:|---:|")
    scipy_time, scipy_cpu = further["curve_fit"], further["curve_fit cpu"]
    for kind, label in LABELS.items():
        head = (f"{first[kind]:.3f} s ({first_cpu[kind]:.3f} s)" if kind in first else "-")
        print(f"| {label} | {head} | {further[kind] * 1e3:.2f} ms "
              f"({further[kind + ' cpu'] * 1e3:.2f} ms) | {further[kind] / scipy_time:.1f}x "
              f"({further[kind + ' cpu'] / scipy_cpu:.1f}x) |")
    print(f"| SciPy curve_fit | - | {scipy_time * 1e3:.2f} ms ({scipy_cpu * 1e3:.2f} ms) | "
          f"1.0x |")
    print("Targets: first fit <= 0.3 s (CPU here); further fit <= 10x SciPy's curve_fit.")


def _curves(count: int, seed: int = 0):
    x = _problem().x[:, 0]
    rng = np.random.default_rng(seed)
    truth = np.stack([rng.uniform(150, 350, count), rng.uniform(3e-4, 9e-4, count)], -1)
    clean = _misra(x[None], truth[:, :1], truth[:, 1:])
    return x, clean * (1 + 0.01 * rng.standard_normal(clean.shape))


def _scipy_loop(x, y):
    from scipy.optimize import curve_fit

    out = np.empty((len(y), 2))
    for i, row in enumerate(y):
        out[i] = curve_fit(_misra, x, row, p0=[START["b1"], START["b2"]], xtol=1e-14,
                           ftol=1e-14, maxfev=10000)[0]
    return out


def _graphfit_many(x, y, repeats: int):
    from graphfit import fitting

    times, cpus, fits = [], [], None
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        fits = fitting.fit_many(MISRA, x, y, p0=START)
        times.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    _graphfit_many.cpu = float(np.median(cpus[1:])) if len(cpus) > 1 else cpus[0]
    return fits, times


def many_table(curves: int, sizes: list[int], repeats: int) -> None:
    x, y = _curves(curves)
    fits, times = _graphfit_many(x, y, repeats + 1)  # the first call traces the formula
    ours_cpu = _graphfit_many.cpu
    start, cpu = time.perf_counter(), time.process_time()
    reference = _scipy_loop(x, y)
    scipy_time = time.perf_counter() - start
    scipy_cpu = time.process_time() - cpu
    ours = float(np.median(times[1:]))
    difference = np.max(np.abs(fits.params - reference) / np.abs(reference))
    print(f"\nMany fits: {curves} noisy Misra1a-like curves (14 points, 2 parameters each), "
          f"float64; {cpu_model()}, load average {os.getloadavg()[0]:.1f}")
    print("| | time | per curve | speed-up |")
    print("|---|---:|---:|---:|")
    print(f"| graphfit fit_many, one call (median of {repeats}) | {ours:.3f} s | "
          f"{ours / curves * 1e6:.1f} µs | {scipy_time / ours:.1f}x |")
    print(f"| graphfit fit_many, first call (traces) | {times[0]:.3f} s | "
          f"{times[0] / curves * 1e6:.1f} µs | {scipy_time / times[0]:.1f}x |")
    print(f"| SciPy curve_fit loop | {scipy_time:.3f} s | {scipy_time / curves * 1e6:.1f} µs "
          f"| 1.0x |")
    print(f"Process CPU time of a graphfit call (median) {ours_cpu:.3f} s, of the SciPy loop "
          f"{scipy_cpu:.3f} s ({scipy_cpu / ours_cpu:.1f}x).")
    print(f"Converged: {int(fits.converged.sum())} of {curves}; largest relative difference "
          f"of the parameters to SciPy's: {difference:.1e} "
          f"({-np.log10(max(difference, 1e-16)):.1f} digits). Target: >= 20x, 6 digits.")
    print("\n| curves | graphfit per curve (CPU) | its first call (traces, compiles) | SciPy "
          "per curve (CPU) | speed-up (CPU) | graphfit steps (median, max) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for count in sizes:
        xs, ys = _curves(count, seed=1)
        fits, times = _graphfit_many(xs, ys, 1 + (repeats if count <= 10_000 else 1))
        ours = float(np.median(times[1:])) / count
        ours_cpu = _graphfit_many.cpu / count
        sample = ys[:min(count, 1000)]
        start, cpu = time.perf_counter(), time.process_time()
        _scipy_loop(xs, sample)
        theirs = (time.perf_counter() - start) / len(sample)
        theirs_cpu = (time.process_time() - cpu) / len(sample)
        print(f"| {count} | {ours * 1e6:.1f} µs ({ours_cpu * 1e6:.1f}) | {times[0]:.2f} s | "
              f"{theirs * 1e6:.1f} µs ({theirs_cpu * 1e6:.1f}) | {theirs / ours:.1f}x "
              f"({theirs_cpu / ours_cpu:.1f}x) | {int(np.median(fits.steps))}, "
              f"{int(fits.steps.max())} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--curves", type=int, default=10_000)
    parser.add_argument("--sizes", default="100,1000,10000,100000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--further", type=int, default=30,
                        help="rounds of further fits (each path once per round)")
    parser.add_argument("--skip-small", action="store_true")
    parser.add_argument("--skip-many", action="store_true")
    parser.add_argument("--first-fit", choices=FIRST_FITS,
                        help=argparse.SUPPRESS)  # the child process of the first-fit timing
    args = parser.parse_args()
    if args.first_fit:
        print(json.dumps(_first_fit(args.first_fit)))
        return
    if not args.skip_small:
        small_table(args.repeats, args.further)
    if not args.skip_many:
        many_table(args.curves, [int(s) for s in args.sizes.split(",")], args.repeats)


if __name__ == "__main__":
    main()
