"""The command line's `--threads N`: the size of TensorFlow's thread pools.

TensorFlow runs each op on an intra-op pool and schedules ops on an inter-op pool, one thread
per core by default. On a few cores a small model's step is many ops of a few thousand numbers
each, and splitting them over the cores costs more in handoffs than it saves (the
Levenberg–Marquardt sinc step runs faster on one thread: docs/guides/levenberg_marquardt.md, "Where
a small step's time goes"). The pools are process-wide and fixed once TensorFlow runs its
first op, so only the command line, which owns its process, sets them.
"""

from __future__ import annotations

import argparse
import warnings

__all__ = ["HELP", "add_option", "thread_count", "use_threads"]

HELP = ("run TensorFlow's ops on N threads (its intra- and inter-op pools; default: one per "
        "core). On a few cores small models (a Levenberg-Marquardt fit of a small network) "
        "often run faster with --threads 1")


def thread_count(text: str) -> int:
    """argparse's type for `--threads`: a positive integer."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive number of threads, got {text!r}")
    return value


def add_option(parser: argparse.ArgumentParser, default=argparse.SUPPRESS) -> None:
    """Adds `--threads N` to a parser (a command's parsers keep the top level's value unless
    given: their default is `argparse.SUPPRESS`)."""
    parser.add_argument("--threads", type=thread_count, default=default, metavar="N", help=HELP)


def use_threads(count: int) -> None:
    """Sizes TensorFlow's intra- and inter-op pools; warns, and leaves them, when TensorFlow
    has run an op in this process already."""
    import tensorflow as tf

    try:
        tf.config.threading.set_intra_op_parallelism_threads(count)
        tf.config.threading.set_inter_op_parallelism_threads(count)
    except RuntimeError:  # main() called in a process that already ran TensorFlow
        warnings.warn(f"--threads {count} was ignored: TensorFlow has already started in this "
                      f"process, and its thread pools cannot change any more. Use the "
                      f"graphfit command, or call tf.config.threading before anything runs.",
                      stacklevel=2)
