"""`predict`'s compiled loops: a chunk of predict steps per call, the outputs of every batch
written into `tf.TensorArray`s and concatenated, so Python runs once per chunk.

Each loop takes `predict_batch(batch) -> outputs` (the compiled predict step, under the
strategy when there is one) and reads the model's `output_spec` when traced.
"""

from __future__ import annotations

from typing import Callable

import tensorflow as tf

from graphfit.training.batches import as_tuple, gather_batch

__all__ = ["array_loop", "dataset_loop"]


def _output_arrays(model, size, dynamic: bool) -> list[tf.TensorArray]:
    return [tf.TensorArray(s.dtype, size=size, dynamic_size=dynamic, infer_shape=False,
                           element_shape=s.shape)
            for s in tf.nest.flatten(model.output_spec)]


def array_loop(model, predict_batch: Callable) -> Callable:
    """`loop(data, index_batches)`: one predict step per row of sample indices."""
    def loop(data, index_batches):
        steps = tf.shape(index_batches)[0]
        arrays = _output_arrays(model, steps, dynamic=False)
        for i in tf.range(steps):
            outputs = tf.nest.flatten(predict_batch(gather_batch(data, index_batches[i])))
            arrays = [a.write(i, o) for a, o in zip(arrays, outputs)]
        return [a.concat() for a in arrays]

    return loop


def dataset_loop(model, predict_batch: Callable) -> Callable:
    """`loop(iterator, num_steps)`: up to `num_steps` predict steps, fewer when the dataset
    ends."""
    def loop(iterator, num_steps):
        arrays = _output_arrays(model, 0, dynamic=True)
        done = tf.constant(0, tf.int32)
        for _ in tf.range(num_steps):
            element = iterator.get_next_as_optional()
            if not element.has_value():
                break
            outputs = tf.nest.flatten(predict_batch(as_tuple(element.get_value())))
            arrays = [a.write(done, o) for a, o in zip(arrays, outputs)]
            done += 1
        return [a.concat() for a in arrays]

    return loop
