"""TensorBoard: train / val / test runs with the same tags, read back with TensorBoard's own
event reader."""

import numpy as np
import tensorflow as tf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import graphfit as gf
from graphfit import layers


def _scalars(folder):
    events = EventAccumulator(str(folder), size_guidance={"tensors": 0})
    events.Reload()
    # tf.summary.scalar writes tensor events in TF2
    return {tag: [(e.step, float(tf.make_ndarray(e.tensor_proto))) for e in events.Tensors(tag)]
            for tag in events.Tags()["tensors"]}


def test_three_runs_with_the_same_tags_and_the_stage_values(tmp_path):
    x, y = gf.datasets.make_moons(n_samples=120, seed=0)
    model = gf.Sequential([layers.Dense(8, activation="relu"), layers.Dense(1)])
    model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"],
                  jit_compile=False)
    history = model.fit(x[:80], y[:80], epochs=3, verbose=0, validation_data=(x[80:100], y[80:100]),
                        test_data=(x[100:], y[100:]), test_freq=1,
                        callbacks=[gf.callbacks.TensorBoard(str(tmp_path))])
    train, val, test = (_scalars(tmp_path / stage) for stage in ("train", "val", "test"))
    assert set(train) == set(val) == set(test) == {"loss", "accuracy"}
    for tag in ("loss", "accuracy"):
        assert [s for s, _ in train[tag]] == [0, 1, 2]
        np.testing.assert_allclose([v for _, v in train[tag]], history.history[tag], rtol=1e-6)
        np.testing.assert_allclose([v for _, v in val[tag]], history.history[f"val_{tag}"],
                                   rtol=1e-6)
        np.testing.assert_allclose([v for _, v in test[tag]], history.history[f"test_{tag}"],
                                   rtol=1e-6)
