"""BatchNormalization against keras.layers.BatchNormalization: outputs, moving statistics
over several training steps (with and without renorm), gradients, hooks, freezing, errors."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from graphfit import layers
from graphfit.core import update_hooks
from graphfit.testing import copy_weights_to_keras, run_layer_test

RANDOM = {
    "gamma_initializer": "random_uniform",
    "beta_initializer": "random_normal",
    "moving_mean_initializer": "random_normal",
    "moving_variance_initializer": keras.initializers.RandomUniform(0.5, 2.0),
}
# Batches far from the initial statistics, so the renorm clipping binds (d ~ 3 > dmax).
BATCHES = [
    (np.random.default_rng(i).normal(size=(8, 3)) * (1.0 + i) + 3.0).astype("float32")
    for i in range(5)
]
CLIPPING = {"rmax": 1.5, "rmin": 0.7, "dmax": 0.3}
CASES = {
    "plain": {"momentum": 0.9},
    "renorm-clipped": {"momentum": 0.8, "renorm": True, "renorm_clipping": CLIPPING,
                       "renorm_momentum": 0.7},
    "renorm": {"momentum": 0.9, "renorm": True, "renorm_momentum": 0.5, "center": False},
}


def _twins(kwargs, x):
    """Our layer and a Keras layer with the same arguments and the same weights."""
    ours = layers.BatchNormalization(**RANDOM, **kwargs)
    ours(x)
    theirs = keras.layers.BatchNormalization(**kwargs)
    copy_weights_to_keras(ours, theirs, x)
    return ours, theirs


def _close(a, b, atol=1e-6):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6, atol=atol)


def test_batch_normalization_renorm_contract():
    # The plain layer's contract runs from graphfit.testing's examples (test_conformance).
    kwargs = CASES["renorm-clipped"]
    layer = run_layer_test(
        layers.BatchNormalization,
        {**RANDOM, **kwargs},
        BATCHES[0],
        (8, 3),
        2,
        5,
        expected_hooks=5,
        reference=keras.layers.BatchNormalization(**kwargs),
    )
    assert [v.name.split("/")[-1][:-2] for v in layer.variables] == [
        "gamma", "beta", "moving_mean", "moving_variance", "moving_stddev", "renorm_mean",
        "renorm_stddev",
    ]


def test_batch_normalization_variables_have_keras_names():
    layer = layers.BatchNormalization()
    layer(BATCHES[0])
    assert [v.name.split("/")[-1][:-2] for v in layer.variables] == [
        "gamma", "beta", "moving_mean", "moving_variance"
    ]


@pytest.mark.parametrize("case", list(CASES))
def test_five_eager_training_steps_match_keras(case):
    ours, theirs = _twins(CASES[case], BATCHES[0])
    start = [v.numpy() for v in ours.non_trainable_variables]
    for x in BATCHES:
        _close(ours(x, training=True), theirs(x, training=True), atol=1e-5)
    for ours_weight, keras_weight in zip(ours.variables, theirs.weights):
        _close(ours_weight.numpy(), keras_weight.numpy())
    for before, after in zip(start, ours.non_trainable_variables):
        assert not np.allclose(before, after.numpy())  # every statistic moved
    _close(ours(BATCHES[0]), theirs(BATCHES[0], training=False), atol=1e-5)


def test_renorm_clipping_binds_and_changes_training_outputs():
    clipped, _ = _twins(CASES["renorm-clipped"], BATCHES[0])
    free = layers.BatchNormalization.from_config(
        {**clipped.get_config(), "renorm_clipping": None, "name": None}
    )
    free(BATCHES[0])
    for target, source in zip(free.variables, clipped.variables):
        target.assign(source)
    with update_hooks.collect_updates():
        assert not np.allclose(clipped(BATCHES[1], training=True), free(BATCHES[1], training=True))


def test_hooks_are_collected_then_applied_like_keras_and_traced_steps_match():
    ours, theirs = _twins(CASES["renorm-clipped"], BATCHES[0])
    before = [v.numpy() for v in ours.variables]
    with update_hooks.collect_updates() as pending:
        ours(BATCHES[0], training=True)
    assert [p.hook.variable.name.split("/")[-1][:-2] for p in pending] == [
        "renorm_mean", "renorm_stddev", "moving_mean", "moving_stddev", "moving_variance"
    ]
    for b, v in zip(before, ours.variables):
        np.testing.assert_array_equal(v.numpy(), b)  # nothing applied yet
    update_hooks.apply_updates(pending)
    theirs(BATCHES[0], training=True)
    for ours_weight, keras_weight in zip(ours.variables, theirs.weights):
        _close(ours_weight.numpy(), keras_weight.numpy())
    # In a tf.function with no collector the hooks apply inside the graph, once per call.
    step = tf.function(lambda x: ours(x, training=True))
    for x in BATCHES[1:3]:
        _close(step(x), theirs(x, training=True), atol=1e-5)
    for ours_weight, keras_weight in zip(ours.variables, theirs.weights):
        _close(ours_weight.numpy(), keras_weight.numpy())


@pytest.mark.parametrize("case", ["plain", "renorm-clipped"])
def test_gradients_match_keras(case):
    ours, theirs = _twins(CASES[case], BATCHES[0])
    x = tf.constant(BATCHES[1])
    weights = tf.constant(np.random.default_rng(7).normal(size=(8, 3)).astype("float32"))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        with update_hooks.collect_updates():
            ours_loss = tf.reduce_sum(ours(x, training=True) * weights)
        keras_loss = tf.reduce_sum(theirs(x, training=True) * weights)
    ours_grads = tape.gradient(ours_loss, [x, ours.gamma, ours.beta])
    keras_grads = tape.gradient(keras_loss, [x, theirs.gamma.value, theirs.beta.value])
    for a, b in zip(ours_grads, keras_grads):
        _close(a.numpy(), b.numpy(), atol=1e-5)
    assert np.abs(ours_grads[0].numpy()).max() > 1e-3  # a non-trivial gradient


def test_frozen_layer_uses_moving_statistics_and_registers_no_hooks():
    ours, theirs = _twins(CASES["plain"], BATCHES[0])
    ours.trainable = theirs.trainable = False
    inference = ours(BATCHES[1]).numpy()
    with update_hooks.collect_updates() as pending:
        training = ours(BATCHES[1], training=True).numpy()
    assert pending == []
    np.testing.assert_array_equal(training, inference)
    _close(training, theirs(BATCHES[1], training=True))
    moving_mean = ours.moving_mean.numpy()
    ours(BATCHES[1], training=True)  # eager, no collector: still nothing moves
    np.testing.assert_array_equal(ours.moving_mean.numpy(), moving_mean)


def test_channels_axis_of_images_matches_keras():
    x = (np.random.default_rng(3).normal(size=(2, 4, 3, 5)) + 2).astype("float32")
    for axis in (-1, 1):
        ours, theirs = _twins({"axis": axis, "momentum": 0.5}, x)
        _close(ours(x, training=True), theirs(x, training=True), atol=1e-5)
        for ours_weight, keras_weight in zip(ours.variables, theirs.weights):
            _close(ours_weight.numpy(), keras_weight.numpy())


def test_docstring_answers_momentum_versus_renorm_momentum():
    doc = layers.BatchNormalization.__doc__
    assert "momentum versus renorm_momentum" in doc
    assert "*during training*" in doc and "*inference*" in doc
    assert "once per training" in doc and "immediately" in doc


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"axis": "x"}, "axis='x'"),
        ({"momentum": 1.5}, "momentum=1.5"),
        ({"epsilon": 0}, "epsilon=0"),
        ({"center": "yes"}, "center='yes'"),
        ({"renorm_momentum": -1}, "renorm_momentum=-1"),
        ({"gamma_initializer": "nope"}, "gamma_initializer='nope'"),
        ({"renorm_clipping": {"rmax": 2.0}}, "renorm_clipping="),
        ({"renorm": True, "renorm_clipping": {"rmaxx": 2.0}}, "renorm_clipping="),
        ({"renorm": True, "renorm_clipping": {"rmax": 1.0, "rmin": 2.0}}, "rmax=1.0, rmin=2.0"),
        ({"renorm": True, "renorm_clipping": {"dmax": -1.0}}, "dmax=-1.0"),
        ({"renorm": True, "renorm_clipping": {"dmax": "a"}}, "renorm_clipping="),
    ],
)
def test_batch_normalization_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        layers.BatchNormalization(**kwargs)


def test_batch_normalization_axis_errors_at_build():
    with pytest.raises(ValueError, match="axis=2"):
        layers.BatchNormalization(axis=2)(BATCHES[0])
    with pytest.raises(ValueError, match="batch axis"):
        layers.BatchNormalization(axis=0)(BATCHES[0])
