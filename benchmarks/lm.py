"""Levenberg–Marquardt benchmark: graphfit's LM against Adam, torch-levenberg-marquardt and SciPy.

    python benchmarks/lm.py [--budget 120] [--seeds 1] [--skip-sinc] [--skip-nist]

1. sinc: y = sinc(10x) (numpy/torch's normalized sinc) on 20 000 points, x uniform in [-1, 1],
   a 1-20-1 tanh MLP, batch 1000, float32. For each contender (and seed): seconds per epoch,
   wall time until the full-data MSE is <= 1e-5 and <= 1e-7, and the best full-data MSE
   within the budget. graphfit trains in one `fit` with its default compile settings, the MSE
   taken by an epoch-end callback; torch-levenberg-marquardt runs only where it is installed.
2. NIST StRD (the 16 problems shipped in tests/optimizers/levenberg_marquardt/nist_data), each
   from both starts, the model written as a `layers.Formula`: graphfit LM (defaults, float64,
   full batch) against `scipy.optimize.least_squares(method="lm")` with default tolerances
   (when SciPy is installed): the certified digits reached (smallest LRE over the parameters,
   and the LRE of the residual sum of squares) and the work (graphfit: LM steps; SciPy:
   function evaluations).
Not a test: numbers depend on the machine; the script prints them, and the targets next to them.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

FORMULAS = {
    "Misra1a": "b1*(1-exp(-b2*x))",
    "Misra1b": "b1 * (1-(1+b2*x/2)**(-2))",
    "Chwirut1": "exp(-b1*x)/(b2+b3*x)",
    "Chwirut2": "exp(-b1*x)/(b2+b3*x)",
    "Lanczos3": "b1*exp(-b2*x) + b3*exp(-b4*x) + b5*exp(-b6*x)",
    "Gauss1": "b1*exp(-b2*x) + b3*exp(-(x-b4)**2/b5**2) + b6*exp(-(x-b7)**2/b8**2)",
    "Gauss2": "b1*exp(-b2*x) + b3*exp(-(x-b4)**2/b5**2) + b6*exp(-(x-b7)**2/b8**2)",
    "DanWood": "b1*x**b2",
    "Eckerle4": "(b1/b2) * exp(-0.5*((x-b3)/b2)**2)",
    "Rat42": "b1 / (1+exp(b2-b3*x))",
    "Rat43": "b1 / ((1+exp(b2-b3*x))**(1/b4))",
    "Thurber": "(b1 + b2*x + b3*x**2 + b4*x**3) / (1 + b5*x + b6*x**2 + b7*x**3)",
    "MGH09": "b1*(x**2+x*b2) / (x**2+x*b3+b4)",
    "MGH10": "b1 * exp(b2/(x+b3))",
    "BoxBOD": "b1*(1-exp(-b2*x))",
    "Bennett5": "b1 * (b2+x)**(-1/b3)",
}


def _sinc_data():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(20_000, 1)).astype(np.float32)
    return x, np.sinc(10 * x).astype(np.float32)


class _Race:
    """The clock of one contender: full-data MSE after every epoch, until the budget is spent.

    The wall time runs from the start of training, compilation and the MSE evaluations
    included (for every contender alike); seconds per epoch are the median epoch after the
    first (graphfit's first epoch traces the step), evaluations left out.
    """

    def __init__(self, mse, budget: float):
        self.mse, self.budget = mse, budget
        self.reached: dict[float, float] = {}
        self.best, self.epoch_seconds = np.inf, []
        self.start = self.last = time.perf_counter()

    def epoch_done(self) -> bool:
        """Records an epoch that just ended; True once the budget is spent."""
        self.epoch_seconds.append(time.perf_counter() - self.last)
        value = self.mse()
        self.best = min(self.best, value)
        for target in (1e-5, 1e-7):
            if value <= target and target not in self.reached:
                self.reached[target] = time.perf_counter() - self.start
        self.last = time.perf_counter()
        return self.last - self.start >= self.budget

    def result(self):
        """(s/epoch, t to 1e-5, t to 1e-7, best MSE)."""
        steady = self.epoch_seconds[1:] or self.epoch_seconds
        return (float(np.median(steady)), self.reached.get(1e-5), self.reached.get(1e-7),
                self.best)


def _graphfit_sinc(optimizer, budget: float, seed: int):
    import tensorflow as tf

    import graphfit as gf
    from graphfit import callbacks, layers

    gf.set_seed(seed)
    x, y = _sinc_data()
    model = gf.Sequential([layers.Dense(20, activation="tanh"), layers.Dense(1)])
    model.compile(optimizer=optimizer, loss="mse")  # graphfit's defaults: jit, steps per call
    x_all, y_all = tf.constant(x), tf.constant(y)
    full_mse = tf.function(lambda: tf.reduce_mean(tf.square(model(x_all) - y_all)))
    race = _Race(lambda: float(full_mse()), budget)

    class RaceClock(callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if race.epoch_done():
                self.model.stop_training = True

    model.fit(x, y, batch_size=1000, epochs=10**6, verbose=0, callbacks=[RaceClock()])
    return race.result()


def _torch_sinc(budget: float, seed: int):
    try:
        import torch
        import torch_levenberg_marquardt as tlm
    except ImportError:
        return None
    torch.manual_seed(seed)
    x, y = (torch.from_numpy(a) for a in _sinc_data())
    model = torch.nn.Sequential(torch.nn.Linear(1, 20), torch.nn.Tanh(), torch.nn.Linear(20, 1))
    module = tlm.training.LevenbergMarquardtModule(model=model, loss_fn=tlm.loss.MSELoss())
    loader = tlm.utils.FastDataLoader(torch.utils.data.TensorDataset(x, y), batch_size=1000,
                                      repeat=1, shuffle=True)

    def mse():
        with torch.no_grad():
            return float(torch.mean((model(x) - y) ** 2))

    race = _Race(mse, budget)
    done = False
    while not done:
        for inputs, targets in loader:
            module.training_step(inputs, targets)
        done = race.epoch_done()
    return race.result()


def _cell(value, fmt):
    return "-" if value is None else format(value, fmt)


def sinc_table(budget: float, seeds: int) -> None:
    from graphfit import optimizers

    contenders = [
        ("graphfit LevenbergMarquardt (defaults)",
         lambda seed: _graphfit_sinc(optimizers.LevenbergMarquardt(), budget, seed)),
        ("graphfit LevenbergMarquardt (damping='identity')",
         lambda seed: _graphfit_sinc(optimizers.LevenbergMarquardt(damping="identity"), budget,
                                     seed)),
        ("graphfit Adam (lr 0.01)",
         lambda seed: _graphfit_sinc(optimizers.Adam(0.01), budget, seed)),
        ("torch-levenberg-marquardt", lambda seed: _torch_sinc(budget, seed)),
    ]
    print(f"\nsinc(10x), 20 000 points, 1-20-1 tanh MLP, batch 1000, float32, budget {budget:.0f} s"
          f" per contender and seed; one fit (graphfit) or epoch loop (torch) each, the full-data "
          f"MSE measured after every epoch; times from the start, compilation and MSE "
          f"evaluations included\n")
    print("| contender | seed | s / epoch (median) | time to MSE <= 1e-5 (s) "
          "| time to MSE <= 1e-7 (s) | "
          "best MSE in budget |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, run in contenders:
        for seed in range(seeds):
            result = run(seed)
            if result is None:
                print(f"| {name} | {seed} | not installed | | | |")
                break
            per_epoch, t5, t7, best = result
            print(f"| {name} | {seed} | {per_epoch:.3f} | {_cell(t5, '.1f')} | "
                  f"{_cell(t7, '.1f')} | {best:.2e} |", flush=True)
    print("\ntarget: graphfit LM reaches 1e-5 in less time than torch-levenberg-marquardt "
          "and a lower best MSE within the budget (compared only where torch-lm is installed)")


def _graphfit_nist(problem, start):
    import graphfit as gf
    from graphfit import layers, optimizers

    params = dict(zip(problem.parameter_names, (float(v) for v in start)))
    formula = layers.Formula(FORMULAS[problem.name], params=params)
    model = gf.Sequential([formula], dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse", jit_compile=False)
    history = model.fit(problem.x, problem.y[:, None], batch_size=None, epochs=2000, verbose=0)
    values = formula.values()
    estimate = np.array([values[n] for n in problem.parameter_names])
    fitted = formula(problem.x).numpy()[:, 0]
    return estimate, float(np.sum((fitted - problem.y) ** 2)), len(history.epoch)


def _scipy_nist(problem, start):
    try:
        from scipy.optimize import least_squares
    except ImportError:
        return None
    from graphfit import layers

    formula = layers.Formula(FORMULAS[problem.name],
                             params=dict(zip(problem.parameter_names, map(float, start))),
                             dtype="float64")
    formula(problem.x)  # builds the variables

    def residuals(b):
        for variable, value in zip(formula.trainable_variables, b):
            variable.assign(value)
        return formula(problem.x).numpy()[:, 0] - problem.y

    result = least_squares(residuals, np.asarray(start, np.float64), method="lm")
    rss = float(np.sum(residuals(result.x) ** 2))
    return result.x, rss, result.nfev


def _digits(nist, problem, estimate, rss):
    """(smallest LRE over the parameters, LRE of the residual sum of squares)."""
    lre = min(nist.log_relative_error(e, c) for e, c in zip(estimate, problem.certified))
    return lre, nist.log_relative_error(rss, problem.residual_sum_of_squares)


def nist_table() -> None:
    from tests.optimizers.levenberg_marquardt import nist

    print("\nNIST StRD, float64, model as layers.Formula; LRE = certified digits reached "
          "(params: smallest over the parameters; RSS: residual sum of squares)\n")
    print("| problem | start | graphfit LRE params | graphfit LRE RSS | graphfit steps | "
          "scipy lm LRE params | scipy lm LRE RSS | scipy nfev |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    ours_ok = theirs_ok = runs = 0
    for name in nist.PROBLEMS:
        problem = nist.read(nist.DATA / f"{name}.dat")
        for index, start in enumerate(problem.starts):
            runs += 1
            estimate, rss, steps = _graphfit_nist(problem, start)
            lre, lre_rss = _digits(nist, problem, estimate, rss)
            ours_ok += min(lre, lre_rss) >= 6
            scipy_result = _scipy_nist(problem, start)
            if scipy_result is None:
                theirs, theirs_rss, nfev = "not installed", "-", "-"
            else:
                values, scipy_rss, nfev = scipy_result
                slre, slre_rss = _digits(nist, problem, values, scipy_rss)
                theirs_ok += min(slre, slre_rss) >= 6
                theirs, theirs_rss = f"{slre:.1f}", f"{slre_rss:.1f}"
            print(f"| {name} | {index + 1} | {lre:.1f} | {lre_rss:.1f} | {steps} | {theirs} | "
                  f"{theirs_rss} | {nfev} |", flush=True)
    print(f"\n>= 6 digits on every parameter and the RSS: graphfit {ours_ok} of {runs}, scipy "
          f"{theirs_ok} of {runs} (target: graphfit on every run)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=120.0)
    parser.add_argument("--seeds", type=int, default=1,
                        help="sinc runs per contender, seeds 0..N-1 (weights and shuffling)")
    parser.add_argument("--skip-sinc", action="store_true")
    parser.add_argument("--skip-nist", action="store_true")
    args = parser.parse_args()
    import keras
    import tensorflow as tf

    import graphfit as gf
    print(f"machine: {os.cpu_count()} CPU cores, {len(tf.config.list_physical_devices('GPU'))} "
          f"GPU(s), {platform.machine()} {platform.system()}; Python {platform.python_version()}, "
          f"TensorFlow {tf.__version__}, Keras {keras.__version__}, graphfit {gf.__version__}")
    if not args.skip_nist:
        nist_table()
    if not args.skip_sinc:
        sinc_table(args.budget, args.seeds)


if __name__ == "__main__":
    main()
