"""Profile intervals: `fitting.intervals.profile_intervals` and the two kinds of re-fit behind it.

    python benchmarks/profile_intervals.py [--repeats 9]

The two-parameter exponential of tests/framework/fitting/test_fit_report.py (`a*exp(-k*x)`,
12 points), fitted once by `model.fit` with `LevenbergMarquardt`:

1. `profile_intervals(model, x, y)` for both parameters: the first call in the process
   (SciPy's quantiles imported before the clock) and the median of `--repeats` further
   calls, wall and CPU (`time.process_time`);
2. the re-fits it made (the held values it visited, recorded), each run again by
   `profile_refits.CurveRefits` (`fit_curve`'s Python loop, the default for a float64
   Formula) and `profile_refits.ModelRefits` (a traced `model.fit` of a clone, what every
   profile ran before): per parameter, the set-up and first re-fit (the trace) and the
   median further re-fit, CPU; and the χ² of both at each value (their largest relative
   difference).

Not a test: numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import scipy.stats  # noqa: E402,F401  (profile_intervals' quantiles, imported before the clock)

import graphfit as gf  # noqa: E402
from graphfit import layers, optimizers  # noqa: E402
from graphfit.fitting import intervals, profile_refits  # noqa: E402


def _fitted():
    x = np.linspace(0.0, 4.0, 12)
    y = 3.0 * np.exp(-0.8 * x) + np.random.default_rng(0).normal(0.0, 0.08, x.size)
    formula = layers.Formula("a*exp(-k*x)", params={"a": 1.0, "k": 0.3}, dtype="float64")
    model = gf.Sequential([formula], input_shape=(1,), dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    model.fit(x, y, batch_size=None, epochs=300, verbose=0)
    return model, formula, x, y


def _timed(function, *args):
    wall, cpu = time.perf_counter(), time.process_time()
    result = function(*args)
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args(argv)
    model, formula, x, y = _fitted()
    report = model.fit_report(x, y)
    visited = {"a": [], "k": []}
    plain = profile_refits.CurveRefits.chi_square

    def recording(self, value):
        visited[self.name].append(value)
        return plain(self, value)

    profile_refits.CurveRefits.chi_square = recording
    found, wall, cpu = _timed(lambda: intervals.profile_intervals(model, x, y, report=report))
    profile_refits.CurveRefits.chi_square = plain
    print(f"intervals: {found}")
    print(f"profile_intervals, first call: {wall:.4f} s wall, {cpu:.4f} s CPU "
          f"({sum(map(len, visited.values()))} re-fits)")
    further = [_timed(lambda: intervals.profile_intervals(model, x, y, report=report))[1:]
               for _ in range(args.repeats)]
    print(f"profile_intervals, further call (median of {args.repeats}): "
          f"{statistics.median(w for w, _ in further):.4f} s wall, "
          f"{statistics.median(c for _, c in further):.4f} s CPU")
    for name, values in visited.items():
        line = [f"{name} ({len(values)} re-fits):"]
        chi = {}
        for kind in (profile_refits.CurveRefits, profile_refits.ModelRefits):
            refits, _, setup = _timed(kind, formula, name, x, y, None, 500)
            times = []
            for value in values:
                refit, _, used = _timed(refits.chi_square, value)
                chi.setdefault(kind.__name__, []).append(refit.chi_square)
                times.append(used)
            line.append(f"{kind.__name__}: set-up + first {setup + times[0]:.4f} s CPU, "
                        f"further median {statistics.median(times[1:]) * 1e3:.2f} ms CPU;")
        a, b = (np.array(v) for v in chi.values())
        line.append(f"χ² agree to {np.max(np.abs(a - b) / b):.1e} (relative)")
        print(" ".join(line))


if __name__ == "__main__":
    main()
