"""Writes recipes/data/sensor.csv: a generated sensor log to forecast.

    python recipes/data/make_sensor.py [--rows 1500] [--seed 0] [--output FILE]

One row per time step (say, every 30 minutes): `time`, a machine's `load` (a slow random
walk in [0, 1]), the `humidity` and the `temperature`. The temperature follows a daily cycle
(48 steps), rises with the load of 3 steps before, and carries small noise (std 0.2):

    temperature[t] = 20 + 4 sin(2 pi t / 48) + 6 load[t - 3] + noise

so a window of the last steps of load and temperature predicts the next temperature to about
the noise (recipes/sensor_timeseries.yaml), while the next value's spread is about 3.
"""

from __future__ import annotations

import argparse
import os

import numpy as np


def sensor_rows(rows: int = 1500, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(rows)
    load = np.clip(0.5 + np.cumsum(rng.normal(0, 0.08, rows)) * 0.3, 0.0, 1.0)
    lagged = np.concatenate([np.full(3, load[0]), load[:-3]])
    temperature = 20 + 4 * np.sin(2 * np.pi * t / 48) + 6 * lagged + rng.normal(0, 0.2, rows)
    humidity = 60 - 1.5 * (temperature - 20) + rng.normal(0, 1.0, rows)
    return np.column_stack([t, load, humidity, temperature])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", default=os.path.join(os.path.dirname(__file__),
                                                         "sensor.csv"))
    args = parser.parse_args()
    table = sensor_rows(args.rows, args.seed)
    np.savetxt(args.output, table, delimiter=",", fmt=["%d", "%.4f", "%.3f", "%.3f"],
               header="time,load,humidity,temperature", comments="")


if __name__ == "__main__":
    main()
