"""`predict`'s compiled loops: a chunk of predict steps per call, the outputs of every batch
written into `tf.TensorArray`s and concatenated, so Python runs once per chunk.

Each loop takes `predict_batch(batch) -> outputs` (the compiled predict step, under the
strategy when there is one) and reads the model's `output_spec` when traced.
"""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

from graphfit.training.array_data import as_tuple, gather_batch

__all__ = ["array_loop", "dataset_loop"]


def _output_arrays(model, size, dynamic: bool) -> list[tf.TensorArray]:
    return [tf.TensorArray(s.dtype, size=size, dynamic_size=dynamic, infer_shape=False,
                           element_shape=s.shape)
            for s in tf.nest.flatten(model.output_spec)]


def _written(arrays, index, outputs) -> list[tf.TensorArray]:
    return [a.write(index, o) for a, o in zip(arrays, tf.nest.flatten(outputs))]


def array_loop(model, predict_batch: Callable) -> Callable:
    """`loop(data, index_batches)`: one predict step per row of sample indices."""
    def loop(data, index_batches):
        steps = tf.shape(index_batches)[0]

        def step(i, arrays):
            outputs = predict_batch(gather_batch(data, index_batches[i]))
            return i + 1, _written(arrays, i, outputs)

        _, arrays = tf.while_loop(lambda i, _: i < steps, step,
                                  (tf.constant(0), _output_arrays(model, steps, False)))
        return [a.concat() for a in arrays]

    return loop


def dataset_loop(model, predict_batch: Callable, checked: Callable) -> Callable:
    """`loop(iterator, num_steps) -> (done, failed, outputs)`: up to `num_steps` predict
    steps, fewer when the dataset ends or a batch fails its checks (`checked(stage, batch,
    run, skipped)` -> (run's or skipped's result, the failed check or -1))."""
    def loop(iterator, num_steps):
        def step(done, _, failed, arrays):
            element = iterator.get_next_as_optional()

            def write():
                batch = as_tuple(element.get_value())

                def run():
                    return done + 1, _written(arrays, done, predict_batch(batch))

                (count, written), failed = checked("predict", batch, run,
                                                   lambda: (done, arrays))
                return count, failed, written

            more = element.has_value()
            done, failed, arrays = tf.cond(more, write, lambda: (done, failed, arrays))
            return done, more & (failed < 0), failed, arrays

        done, _, failed, arrays = tf.while_loop(
            lambda done, more, *_: more & (done < num_steps), step,
            (tf.constant(0), tf.constant(True), tf.constant(-1), _output_arrays(model, 0, True)))
        return done, failed, [a.concat() for a in arrays]

    return loop
