"""The compiled loop of a training or evaluation stage over a `tf.data` iterator: up to a
chunk of steps per call, Python once per chunk.

Each batch read is checked (`CompiledSteps._checked`) and then run by `record(batch)`: the
step and the stage's metric updates, which under XLA are one program per batch
(`CompiledSteps._batch_program`), as they are in a fused chunk over in-memory arrays.
"""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

from graphfit.training.array_data import as_tuple

__all__ = ["stage_loop"]


def stage_loop(stage: str, record: Callable, checked: Callable) -> Callable:
    """`loop(iterator, num_steps) -> (done, failed)`: up to `num_steps` steps of `stage`,
    fewer when the dataset ends or a batch fails its checks (`checked(stage, batch, run,
    skipped)` -> (run's or skipped's result, the failed check or -1))."""
    def loop(iterator, num_steps):
        def step(done, _, failed):
            element = iterator.get_next_as_optional()

            def run():
                batch = as_tuple(element.get_value())

                def train():
                    record(batch)
                    return done + 1

                return checked(stage, batch, train, lambda: done)

            more = element.has_value()
            done, failed = tf.cond(more, run, lambda: (done, failed))
            return done, more & (failed < 0), failed

        done, _, failed = tf.while_loop(
            lambda done, more, _: more & (done < num_steps), step,
            (tf.constant(0), tf.constant(True), tf.constant(-1)))
        return done, failed

    return loop
