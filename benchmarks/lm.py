"""Levenberg–Marquardt benchmark: graphfit's LM against torch-levenberg-marquardt and SciPy.

    python benchmarks/lm.py [--budget 30] [--seeds 3] [--skip-sinc] [--skip-nist]
                            [--nist-only-16] [--skip-wall] [--threads N]

1. The sinc race: y = sinc(10x) (numpy/torch's normalized sinc) on 20 000 points, x uniform
   in [-1, 1], a 1-20-1 tanh MLP, batch 1000, float32; graphfit's LevenbergMarquardt with its
   defaults against torch-levenberg-marquardt (`pip install -e ".[bench]"`, with SciPy;
   its row says "not installed" otherwise), seeds 0..N-1 (initial weights and batch order),
   each race in a fresh process, seeds interleaved. Per race: the first epoch (graphfit's
   traces the step), the steady-state epoch (median of the later ones), the epochs and wall
   time until the full-data MSE is <= 1e-5 and <= 1e-7 (training time: the clock stops while
   the MSE is measured), the best MSE; then the medians over
   the seeds and graphfit's ratio to torch's. graphfit trains in one `fit` with its default
   compile settings, the MSE taken by an epoch-end callback, as a user would.
2. NIST StRD: all 27 nonlinear problems shipped in tests/optimizers/levenberg_marquardt/
   nist_data, the 16 the tests fit (the issue's) first, then the 11 others (never used to
   choose the defaults; `--nist-only-16` skips them), each from both starts, the model written
   as a `layers.Formula`: graphfit LM (defaults, float64, full batch) against
   `scipy.optimize.least_squares(method="lm")` with default tolerances (when SciPy is
   installed): the certified digits reached (smallest LRE over the parameters, and the LRE of
   the residual sum of squares), the work (graphfit: LM steps; SciPy: function evaluations),
   and the RSS's LRE at NIST's certified parameters in float64, so that a certified RSS
   float64 cannot show (Lanczos1's 1.4e-25) reads as such and not as a failed fit (marked ‡,
   with a note). Summaries on the 16 and on all 27. In benchmarks/lm_nist.py.
   `--threads N` runs both contenders on N threads (TensorFlow's intra- and inter-op pools,
   torch's `set_num_threads`) instead of each library's default: on 2 cores, one thread makes
   graphfit's small steps faster (docs/guides/levenberg_marquardt.md, "Where a small step's time
   goes").
3. Past the n² wall (benchmarks/lm_wall.py): a convolutional digits classifier with more than
   10⁵ parameters, LevenbergMarquardt(solver="cg") against Adam: time to 97 % validation
   accuracy and peak memory, and the memory the direct solver's JᵀJ would need.
Not a test: numbers depend on the machine; the script prints them, and the targets next to them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

from benchmarks.machine import cpu_model  # noqa: E402


def _sinc_data():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, size=(20_000, 1)).astype(np.float32)
    return x, np.sinc(10 * x).astype(np.float32)


class _Race:
    """The clock of one contender: full-data MSE after every epoch, until the budget is spent
    or the MSE reaches 1e-7.

    The clock runs from the start of training (graphfit's `fit` call: its set-up and the
    step's tracing included) and stops while the MSE is measured: the measurement is the
    benchmark's instrument, not the contender's work (graphfit's is a `tf.function` whose
    first call converts and traces it, about 0.15 s that torch's eager evaluation does not
    pay). The first epoch's time is kept apart (graphfit's traces the step), the
    steady-state epoch is the median of the later ones.
    """

    def __init__(self, mse, budget: float):
        self.mse, self.budget = mse, budget
        self.reached: dict[float, float] = {}
        self.best, self.epoch_seconds = np.inf, []
        self.epochs_to: dict[float, int] = {}
        self.trained = 0.0  # seconds of training so far, the evaluations left out
        self.cpu, self.cpu_seconds, self.reached_cpu = 0.0, [], {}
        self.last, self.last_cpu = time.perf_counter(), time.process_time()

    def epoch_done(self) -> bool:
        """Records an epoch that just ended; True once the budget is spent or 1e-7 reached."""
        seconds = time.perf_counter() - self.last
        self.epoch_seconds.append(seconds)
        self.trained += seconds
        self.cpu_seconds.append(time.process_time() - self.last_cpu)
        self.cpu += self.cpu_seconds[-1]
        value = self.mse()
        self.best = min(self.best, value)
        for target in (1e-5, 1e-7):
            if value <= target and target not in self.reached:
                self.reached[target] = self.trained
                self.reached_cpu[target] = self.cpu
                self.epochs_to[target] = len(self.epoch_seconds)
        # the clocks restart after the evaluation
        self.last, self.last_cpu = time.perf_counter(), time.process_time()
        return self.trained >= self.budget or 1e-7 in self.reached

    def result(self) -> dict:
        steady = self.epoch_seconds[1:] or self.epoch_seconds
        return {"first_epoch": self.epoch_seconds[0], "epoch": float(np.median(steady)),
                "to_1e-5": self.reached.get(1e-5), "to_1e-7": self.reached.get(1e-7),
                "best": self.best, "epochs": len(self.epoch_seconds),
                "epochs_to_1e-5": self.epochs_to.get(1e-5),
                "first_epoch_cpu": self.cpu_seconds[0], "to_1e-5_cpu": self.reached_cpu.get(1e-5)}


def _graphfit_sinc(budget: float, seed: int, threads: int | None = None) -> dict:
    import tensorflow as tf

    import graphfit as gf
    from graphfit import callbacks, layers, optimizers

    if threads:  # before TensorFlow starts its thread pools
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    gf.set_seed(seed)
    x, y = _sinc_data()
    # Built here, before the clock starts, as torch's modules are when constructed.
    model = gf.Sequential([layers.Dense(20, activation="tanh"), layers.Dense(1)],
                          input_shape=(1,))
    # graphfit's defaults: jit_compile and steps_per_execution "auto".
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    x_all, y_all = tf.constant(x), tf.constant(y)
    full_mse = tf.function(lambda: tf.reduce_mean(tf.square(model(x_all) - y_all)))
    race = _Race(lambda: float(full_mse()), budget)

    class RaceClock(callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if race.epoch_done():
                self.model.stop_training = True

    model.fit(x, y, batch_size=1000, epochs=10**6, verbose=0, callbacks=[RaceClock()])
    return race.result()


def _torch_sinc(budget: float, seed: int, threads: int | None = None) -> dict | None:
    try:
        import torch
        import torch_levenberg_marquardt as tlm
    except ImportError:
        return None
    if threads:
        torch.set_num_threads(threads)
        torch.set_num_interop_threads(threads)
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


_CONTENDERS = {"graphfit": _graphfit_sinc, "torch": _torch_sinc}


def _race_in_fresh_process(contender: str, budget: float, seed: int,
                           threads: int | None = None) -> dict | None:
    """One race in its own Python process, as a user runs it (nothing traced or cached
    before), its result read back as JSON."""
    command = [sys.executable, os.path.abspath(__file__), "--race", contender,
               "--budget", str(budget), "--seed", str(seed)]
    if threads:
        command += ["--threads", str(threads)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _cell(value, fmt):
    return "-" if value is None else format(value, fmt)


def _median(values):
    values = [v for v in values if v is not None]
    return float(np.median(values)) if values else None


def sinc_table(budget: float, seeds: int, threads: int | None = None) -> None:
    pools = (f"; both on {threads} thread(s) (TensorFlow's intra- and inter-op pools, torch's "
             f"set_num_threads)" if threads else "")
    print(f"\nsinc(10x), 20 000 points, 1-20-1 tanh MLP, batch 1000, float32, budget {budget:.0f} s"
          f" per race; each race in a fresh process (seeds interleaved), one fit (graphfit, "
          f"defaults) or epoch loop (torch), the full-data MSE measured after every epoch; "
          f"times from the start of training, tracing included, the MSE evaluations left out "
          f"(for both){pools}\n")
    print("| contender | seed | first epoch (s) | steady epoch (ms) | epochs to 1e-5 "
          "| time to MSE <= 1e-5 (s) | time to MSE <= 1e-7 (s) | best MSE "
          "| CPU: first epoch, to 1e-5 (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    results = {name: [] for name in _CONTENDERS}
    for seed in range(seeds):
        for name in _CONTENDERS:
            result = _race_in_fresh_process(name, budget, seed, threads)
            if result is None:
                print(f"| {name} | {seed} | not installed | | | | | |")
                continue
            results[name].append(result)
            print(f"| {name} | {seed} | {result['first_epoch']:.2f} "
                  f"| {result['epoch'] * 1e3:.1f} | {_cell(result['epochs_to_1e-5'], 'd')} "
                  f"| {_cell(result['to_1e-5'], '.2f')} | {_cell(result['to_1e-7'], '.2f')} "
                  f"| {result['best']:.2e} | {result['first_epoch_cpu']:.2f}, "
                  f"{_cell(result['to_1e-5_cpu'], '.2f')} |", flush=True)
    medians = {name: {key: _median([r[key] for r in rows])
                      for key in ("first_epoch", "epoch", "to_1e-5", "to_1e-7",
                                  "first_epoch_cpu", "to_1e-5_cpu")}
               for name, rows in results.items() if rows}
    print("\n| median over seeds | first epoch (s) | steady epoch (ms) | time to 1e-5 (s) "
          "| time to 1e-7 (s) | CPU: first epoch, to 1e-5 (s) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, m in medians.items():
        print(f"| {name} | {_cell(m['first_epoch'], '.2f')} | {m['epoch'] * 1e3:.1f} "
              f"| {_cell(m['to_1e-5'], '.2f')} | {_cell(m['to_1e-7'], '.2f')} "
              f"| {_cell(m['first_epoch_cpu'], '.2f')}, {_cell(m['to_1e-5_cpu'], '.2f')} |")
    if len(medians) == 2:
        ours, theirs = medians["graphfit"], medians["torch"]
        for key, label in (("to_1e-5", "time to MSE <= 1e-5"), ("epoch", "steady epoch"),
                           ("to_1e-5_cpu", "CPU time to MSE <= 1e-5")):
            if ours[key] is not None and theirs[key] is not None:
                print(f"graphfit / torch-levenberg-marquardt, {label}: "
                      f"{ours[key] / theirs[key]:.2f}x (target <= 0.5x)")


def _reference_versions() -> str:
    """The versions of the contenders graphfit races, as installed."""
    from importlib import metadata

    found = []
    for name in ("torch", "torch-levenberg-marquardt", "scipy"):
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} not installed")
    return ", ".join(found)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive number of threads, got {value}")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=30.0,
                        help="seconds per sinc race (a race also ends at MSE 1e-7)")
    parser.add_argument("--seeds", type=int, default=3,
                        help="sinc races per contender, seeds 0..N-1 (weights and shuffling)")
    parser.add_argument("--skip-sinc", action="store_true")
    parser.add_argument("--skip-nist", action="store_true")
    parser.add_argument("--nist-only-16", action="store_true",
                        help="the NIST table on the 16 problems of the tests only (not all 27)")
    parser.add_argument("--skip-wall", action="store_true")
    parser.add_argument("--threads", type=_positive_int, default=None,
                        help="run both sinc contenders on this many threads (default: each "
                             "library's own choice, as a user gets it)")
    parser.add_argument("--race", choices=sorted(_CONTENDERS), help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.race:  # one race, in the fresh process sinc_table started
        print(json.dumps(_CONTENDERS[args.race](args.budget, args.seed, args.threads)))
        return
    import keras
    import tensorflow as tf

    import graphfit as gf
    print(f"machine: {os.cpu_count()} CPU cores ({cpu_model()}), "
          f"{len(tf.config.list_physical_devices('GPU'))} GPU(s), {platform.machine()} "
          f"{platform.system()}; Python {platform.python_version()}, TensorFlow {tf.__version__}, "
          f"Keras {keras.__version__}, graphfit {gf.__version__}; {_reference_versions()}")
    if not args.skip_nist:
        from benchmarks.lm_nist import nist_table  # section 2, in its own module
        nist_table(only_16=args.nist_only_16)
    if not args.skip_sinc:
        sinc_table(args.budget, args.seeds, args.threads)
    if not args.skip_wall:
        from benchmarks.lm_wall import wall_table  # section 3, in its own module
        wall_table(max(args.seeds, 1))


if __name__ == "__main__":
    main()
