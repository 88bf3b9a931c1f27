"""Update hooks (UPDATE_OPS) inside fit: once per step, after the optimizer, never elsewhere."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers, optimizers
from graphfit.core import update_hooks


class StepCounter(gf.Layer):
    """Counts its training calls through an update hook, and snapshots a trainable weight."""

    def build(self, input_shape):
        self.w = self.add_weight("w", shape=(input_shape[-1],), initializer="ones")
        self.count = self.add_weight("count", shape=(), trainable=False)
        self.w_seen = self.add_weight("w_seen", shape=(input_shape[-1],), trainable=False)

    def call(self, x, training=False):
        if training:
            self.add_update(self.count, self.count + 1.0)
            # The value is computed in the forward pass: the weight before this step's update.
            self.add_update(self.w_seen, tf.identity(self.w))
        return x * self.w


def _counter_model(**compile_kwargs):
    model = gf.Sequential([StepCounter(), layers.Dense(1)], input_shape=(3,))
    model.compile(optimizer=optimizers.SGD(0.1), loss="mse", **compile_kwargs)
    return model


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(100, 3)).astype("float32"), rng.normal(size=(100, 1)).astype("float32")


@pytest.mark.parametrize("compile_kwargs", [
    {"jit_compile": False, "steps_per_execution": 1},
    {"jit_compile": True, "steps_per_execution": 7},
    {"jit_compile": False, "steps_per_execution": "auto"},
    {"run_eagerly": True},
])
def test_hooks_run_exactly_once_per_training_step(data, compile_kwargs):
    x, y = data
    model = _counter_model(**compile_kwargs)
    model.fit(x, y, batch_size=16, epochs=3, verbose=0)  # 7 steps per epoch (6 full + 1 partial)
    counter = model.layers[0]
    assert counter.count.numpy() == 21 == int(model.optimizer.iterations)


def test_hooks_never_run_in_evaluate_or_predict(data):
    x, y = data
    model = _counter_model()
    model.fit(x, y, batch_size=50, epochs=1, verbose=0, validation_data=(x, y), test_data=(x, y))
    counter = model.layers[0]
    assert counter.count.numpy() == 2  # the two training steps only, not val or test
    model.evaluate(x, y, verbose=0)
    model.predict(x, verbose=0)
    assert counter.count.numpy() == 2


def test_hook_values_come_from_the_forward_pass_and_apply_after_the_update(data):
    x, y = data
    model = _counter_model(jit_compile=False)
    counter = model.layers[0]
    model.fit(x[:10], y[:10], batch_size=10, epochs=1, shuffle=False, verbose=0)
    # w_seen holds w as the forward pass read it (1.0 everywhere), although w has moved since.
    np.testing.assert_array_equal(counter.w_seen.numpy(), np.ones(3))
    assert not np.allclose(counter.w.numpy(), 1.0)


def test_frozen_layer_registers_no_hooks_and_frozen_batch_norm_runs_in_inference(data):
    x, y = data
    bn = layers.BatchNormalization()
    model = gf.Sequential([StepCounter(), bn, layers.Dense(1)], input_shape=(3,))
    assert len(model.update_ops) == 4  # count and w_seen, then the moving mean and variance
    model.layers[0].trainable = False
    bn.trainable = False
    assert model.update_ops == []
    model.compile(optimizer=optimizers.SGD(0.1), loss="mse")
    before = [v.numpy() for v in model.non_trainable_variables]
    model.fit(x, y, batch_size=20, epochs=1, verbose=0)
    after = [v.numpy() for v in model.non_trainable_variables]
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)
    # Inference mode: the frozen layer's output with training=True equals its inference output.
    np.testing.assert_allclose(bn(x, training=True), bn(x, training=False), rtol=1e-6)


def test_update_ops_lists_layer_variable_and_kind():
    model = gf.Sequential([layers.Dense(4), layers.BatchNormalization(momentum=0.8),
                           StepCounter()], input_shape=(2,))
    described = [(h.layer.name, h.variable.name.split("/")[-1], h.kind, h.momentum)
                 for h in model.update_ops]
    bn, counter = model.layers[1].name, model.layers[2].name
    assert described == [
        (bn, "moving_mean:0", "moving_average", 0.8),
        (bn, "moving_variance:0", "moving_average", 0.8),
        (counter, "count:0", "assign", None),
        (counter, "w_seen:0", "assign", None),
    ]


def test_update_ops_before_build_says_how_to_build():
    with pytest.raises(ValueError, match="model.build\\(input_shape\\)"):
        gf.Sequential([layers.Dense(2)]).update_ops  # noqa: B018  (the access must raise)


def test_extra_forward_passes_inside_a_discarded_collector_move_nothing():
    # What Levenberg–Marquardt trials and Jacobian computations rely on.
    model = gf.Sequential([layers.BatchNormalization()], input_shape=(2,))
    bn = model.layers[0]
    with update_hooks.collect_updates():
        for _ in range(3):
            model(tf.constant([[1.0, 2.0], [3.0, 5.0]]), training=True)
    np.testing.assert_array_equal(bn.moving_mean.numpy(), [0.0, 0.0])


def test_keras_layer_state_updates_follow_the_hook_contract(data):
    x, y = data
    wrapped = layers.KerasLayer(keras.layers.BatchNormalization(momentum=0.5))
    model = gf.Sequential([wrapped, layers.Dense(1)], input_shape=(3,))
    assert [h.kind for h in model.update_ops] == ["assign", "assign"]
    model.compile(optimizer=optimizers.SGD(0.1), loss="mse")
    model.fit(x, y, batch_size=100, epochs=1, verbose=0)
    moving_mean = wrapped.keras_layer.moving_mean.numpy()
    np.testing.assert_allclose(moving_mean, 0.5 * x.mean(axis=0), rtol=1e-5)


def test_freezing_or_unfreezing_between_fits_retraces_the_step(data):
    x, y = data
    # A layer with only non-trainable state: freezing it changes no trainable variable, yet
    # the compiled step must stop running its hooks.
    stats = layers.BatchNormalization(center=False, scale=False)
    model = gf.Sequential([stats, layers.Dense(1)], input_shape=(3,))
    model.compile(optimizer=optimizers.SGD(0.1), loss="mse")
    model.fit(x, y, batch_size=100, verbose=0)
    moved = stats.moving_mean.numpy()
    assert np.abs(moved).max() > 0
    stats.trainable = False
    model.fit(x, y, batch_size=100, verbose=0)
    np.testing.assert_array_equal(stats.moving_mean.numpy(), moved)
    stats.trainable = True
    model.fit(x, y, batch_size=100, verbose=0)
    assert not np.array_equal(stats.moving_mean.numpy(), moved)
