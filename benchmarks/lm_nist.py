"""NIST StRD: graphfit's LevenbergMarquardt against SciPy on all 27 nonlinear problems.

    python benchmarks/lm_nist.py [--only-16]     (also section 2 of benchmarks/lm.py)

The 27 problems shipped in tests/optimizers/levenberg_marquardt/nist_data: the 16 the tests
fit first, then the 11 others, never used to choose the defaults (`--only-16`
skips them). Each from both of NIST's starts, the model written as a `layers.Formula`
(`nist.FORMULAS`; Nelson's is for log y): graphfit LM (defaults, float64, full batch) against
`scipy.optimize.least_squares(method="lm")` with default tolerances (when SciPy is installed).
Per run: the certified digits reached (NIST's LRE: the smallest over the parameters, and that
of the residual sum of squares) and the work (graphfit: LM steps; SciPy: function
evaluations). Per problem: the RSS's LRE at NIST's certified parameters, evaluated in
float64. A run whose parameters reach 6 digits but whose RSS does not, where NIST's own
parameters do no better in float64 and float64 cannot resolve an RSS that small, is marked ‡
with a note (Lanczos1: certified RSS 1.4e-25); with mpmath installed, the note gives the RSS
at graphfit's parameters in 40-digit arithmetic on NIST's decimal data. Summaries on the 16
and on all 27. Not a test: the step counts depend on the machine's rounding.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from tests.optimizers.levenberg_marquardt import nist  # noqa: E402


def _formula(problem, parameters):
    """The problem's model as a float64 `layers.Formula` at `parameters`, built."""
    from graphfit import layers

    formula = layers.Formula(nist.FORMULAS[problem.name],
                             params=dict(zip(problem.parameter_names, map(float, parameters))),
                             dtype="float64")
    formula(problem.x)  # builds the variables
    return formula


def _rss(formula, problem) -> float:
    return float(np.sum((formula(problem.x).numpy()[:, 0] - problem.response) ** 2))


def _graphfit(problem, start):
    import graphfit as gf
    from graphfit import optimizers

    formula = _formula(problem, start)
    model = gf.Sequential([formula], dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse", jit_compile=False)
    history = model.fit(problem.x, problem.response[:, None], batch_size=None, epochs=2000,
                        verbose=0)
    values = formula.values()
    estimate = np.array([values[n] for n in problem.parameter_names])
    return estimate, _rss(formula, problem), len(history.epoch)


def _scipy(problem, start):
    try:
        from scipy.optimize import least_squares
    except ImportError:
        return None
    formula = _formula(problem, start)

    def residuals(b):
        for variable, value in zip(formula.trainable_variables, b):
            variable.assign(value)
        return formula(problem.x).numpy()[:, 0] - problem.response

    result = least_squares(residuals, np.asarray(start, np.float64), method="lm")
    rss = float(np.sum(residuals(result.x) ** 2))
    return result.x, rss, result.nfev


def _digits(problem, estimate, rss):
    """(smallest LRE over the parameters, LRE of the residual sum of squares)."""
    lre = min(nist.log_relative_error(e, c) for e, c in zip(estimate, problem.certified))
    return lre, nist.log_relative_error(rss, problem.residual_sum_of_squares)


def _rss_limits(problem) -> tuple[float, float, float]:
    """What float64 shows of the certified RSS: (the RSS at NIST's certified parameters in
    float64, its LRE, and about how many digits float64 resolves of an RSS that small:
    -log10(ε·rms(y) / √RSS), as each residual is rounded at about ε·|y| and the RSS's error
    2·Σ rᵢeᵢ averages over the rows)."""
    at_certified = _rss(_formula(problem, problem.certified), problem)
    certified = problem.residual_sum_of_squares
    rms = float(np.sqrt(np.mean(problem.response ** 2)))
    resolved = -np.log10(np.finfo(np.float64).eps * rms / np.sqrt(certified))
    return at_certified, nist.log_relative_error(at_certified, certified), float(resolved)


def _exact_rss(problem, parameters) -> float | None:
    """The RSS at `parameters` (their exact float64 values) in 40-digit arithmetic on NIST's
    decimal data, or None without mpmath. NIST's data have at most 15 significant digits, so
    the shortest repr of their float64 values gives back NIST's decimals."""
    try:
        import mpmath
    except ImportError:
        return None
    functions = {"exp": mpmath.exp, "cos": mpmath.cos, "sin": mpmath.sin,
                 "arctan": mpmath.atan, "pi": mpmath.pi}
    with mpmath.workdps(40):
        values = {n: mpmath.mpf(float(v)) for n, v in zip(problem.parameter_names, parameters)}
        names = ["x"] if problem.x.shape[1] == 1 else [
            f"x{i + 1}" for i in range(problem.x.shape[1])]
        total = mpmath.mpf(0)
        for row, y in zip(problem.x, problem.y):
            scope = {**functions, **values,
                     **{n: mpmath.mpf(repr(float(v))) for n, v in zip(names, row)}}
            y = mpmath.mpf(repr(float(y)))
            response = mpmath.log(y) if problem.log_response else y
            # A trusted constant expression of nist.FORMULAS, in mpmath's arithmetic.
            total += (eval(nist.FORMULAS[problem.name], {"__builtins__": {}}, scope)
                      - response) ** 2
        return float(total)


def _note(problem, start_index, estimate, lre, lre_rss, limits) -> str:
    at_certified, certified_lre, resolved = limits
    certified = problem.residual_sum_of_squares
    note = (f"‡ {problem.name} start {start_index + 1}: the parameters reach {lre:.1f} digits, "
            f"the RSS {lre_rss:.1f}. NIST's certified parameters (printed to 11 digits) give, "
            f"in float64, RSS {at_certified:.3g} against the certified {certified:.5g} (LRE "
            f"{certified_lre:.1f}); float64 resolves an RSS that small to about {resolved:.1f} "
            f"digits (residuals of rms {np.sqrt(certified / len(problem.y)):.2g}, each rounded "
            f"at about ε·|y|)")
    exact = _exact_rss(problem, estimate)
    if exact is not None:
        note += (f"; in 40-digit arithmetic on NIST's decimal data the RSS at graphfit's "
                 f"parameters is {exact:.7g} (LRE "
                 f"{nist.log_relative_error(exact, certified):.1f})")
    return note + ": the float64 limit, not the optimizer's."


def _scipy_cells(problem, start):
    """SciPy's cells (LRE params, LRE RSS, nfev) and whether it reached 6 digits."""
    result = _scipy(problem, start)
    if result is None:
        return ("not installed", "-", "-"), False
    values, rss, nfev = result
    lre, lre_rss = _digits(problem, values, rss)
    return (f"{lre:.1f}", f"{lre_rss:.1f}", nfev), min(lre, lre_rss) >= 6


def _rows(names, label, notes):
    """Prints the rows of `names`; returns (graphfit ok, scipy ok, ‡) per run."""
    outcomes = []
    for name in names:
        problem = nist.read(nist.DATA / f"{name}.dat")
        limits = _rss_limits(problem)
        for index, start in enumerate(problem.starts):
            estimate, rss, steps = _graphfit(problem, start)
            lre, lre_rss = _digits(problem, estimate, rss)
            # Right parameters, an RSS off, and neither NIST's own parameters in float64 nor
            # float64's resolution do better: the certified RSS is out of float64's reach.
            limited = lre >= 6 > lre_rss and max(limits[1], limits[2]) < 6
            if limited:
                notes.append(_note(problem, index, estimate, lre, lre_rss, limits))
            scipy_cells, scipy_ok = _scipy_cells(problem, start)
            outcomes.append((min(lre, lre_rss) >= 6, scipy_ok, limited))
            print(f"| {name} | {label} | {index + 1} | {lre:.1f} | {lre_rss:.1f}"
                  f"{' ‡' if limited else ''} | {steps} | {limits[1]:.1f} | "
                  + " | ".join(map(str, scipy_cells)) + " |", flush=True)
    return outcomes


def _summary(label, outcomes, scipy_installed) -> None:
    runs = len(outcomes)
    ours, theirs, limited = (sum(column) for column in zip(*outcomes))
    scipy = f"scipy lm {theirs} of {runs}" if scipy_installed else "scipy lm not installed"
    extra = (f" (and {limited} ‡: parameters >= 6 digits, the certified RSS beyond float64)"
             if limited else "")
    print(f"{label}: >= 6 digits on every parameter and the RSS: graphfit {ours} of {runs}"
          f"{extra}, {scipy}")


def nist_table(only_16: bool = False) -> None:
    """Prints the table, its notes and the summaries (on the 16, and on all 27)."""
    try:
        import scipy  # noqa: F401
        scipy_installed = True
    except ImportError:
        scipy_installed = False
    print("\nNIST StRD, float64, model as layers.Formula; LRE = certified digits reached "
          "(params: smallest over the parameters; RSS: residual sum of squares). set: 'tests' "
          "= the 16 problems the tests fit; 'other' = the 11 others, never used to choose the "
          "defaults. 'RSS LRE at certified': the RSS's LRE at NIST's certified parameters, "
          "evaluated in float64\n")
    print("| problem | set | start | graphfit LRE params | graphfit LRE RSS | graphfit steps | "
          "RSS LRE at certified | scipy lm LRE params | scipy lm LRE RSS | scipy nfev |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    notes = []
    fitted = _rows(nist.PROBLEMS, "tests", notes)
    other = [] if only_16 else _rows(nist.MORE_PROBLEMS, "other", notes)
    print()
    if notes:
        print("\n".join(notes) + "\n")
    _summary("the 16 problems the tests fit (target: every run)", fitted, scipy_installed)
    if other:
        _summary("all 27 NIST StRD nonlinear problems", fitted + other, scipy_installed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only-16", action="store_true",
                        help="the 16 problems of the tests only (not all 27)")
    nist_table(only_16=parser.parse_args().only_16)


if __name__ == "__main__":
    main()
