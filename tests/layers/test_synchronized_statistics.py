"""Single-device behaviour of the update hooks declared for several replicas:
BatchNormalization(synchronized=True) equals synchronized=False on one device; ClassMeans'
per-class sums rebuild its direct update; argument checks. (Under MirroredStrategy:
tests/framework/training/test_sync_statistics.py.)"""

import numpy as np
import pytest
import tensorflow as tf

from graphfit import layers
from graphfit.core import Layer, update_hooks

X = [np.random.default_rng(i).normal(size=(6, 3)) * 2.0 + 1.0 for i in range(3)]
KWARGS = [{"momentum": 0.7},
          {"momentum": 0.8, "renorm": True, "renorm_momentum": 0.5,
           "renorm_clipping": {"rmax": 1.2, "rmin": 0.8, "dmax": 0.2}}]


@pytest.mark.parametrize("kwargs", KWARGS, ids=["plain", "renorm"])
def test_synchronized_is_bit_identical_on_one_device(kwargs):
    pair = [layers.BatchNormalization(synchronized=s, dtype="float64",
                                      gamma_initializer="random_uniform", **kwargs)
            for s in (False, True)]
    for layer in pair:
        layer(X[0])  # builds (inference: no hooks)
    for ours, theirs in zip(pair[0].variables, pair[1].variables):
        theirs.assign(ours)
    for x in X:
        results = []
        for layer in pair:
            with tf.GradientTape() as tape:
                y = layer(x, training=True)  # hooks applied at once (no collector)
                loss = tf.reduce_sum(tf.sin(y))
            results.append([y, *tape.gradient(loss, layer.trainable_variables)])
        for ours, theirs in zip(*results):
            np.testing.assert_array_equal(ours, theirs)
    for ours, theirs in zip(pair[0].variables, pair[1].variables):
        np.testing.assert_array_equal(ours, theirs)
    assert not np.allclose(pair[1].moving_mean.numpy(), 0.0)  # the statistics moved


def test_synchronized_config_flag_and_validation():
    layer = layers.BatchNormalization(synchronized=True, renorm=True)
    assert layer.get_config()["synchronized"] is True
    assert layers.BatchNormalization.from_config(layer.get_config()).synchronized is True
    assert layer.synchronizes_replicas
    layer.trainable = False  # frozen: inference statistics, no all-reduce
    assert not layer.synchronizes_replicas
    assert not layers.BatchNormalization().synchronizes_replicas
    with pytest.raises(ValueError, match=r"synchronized must be True or False\. "
                                         r"Received: synchronized='yes'"):
        layers.BatchNormalization(synchronized="yes")


def test_class_means_sums_rebuild_the_direct_update():
    """On one device each hook's value is the direct computation; its `finish` applied to
    the same (local) sums gives the same numbers: the path a strategy takes."""
    layer = layers.ClassMeans(num_classes=4, momentum=0.6, dtype="float64")
    rng = np.random.default_rng(5)
    counts = np.zeros(4, np.int64)
    for labels in ([0, 0, 1, 3, 1], [1, 2, 2, 0], [3, 3]):  # class 2 first seen later
        x = rng.normal(size=(len(labels), 2)) + 1.0
        with update_hooks.collect_updates() as pending:
            layer(x, training=True, labels=labels)
        assert [sorted(p.hook.sums) for p in pending] == [["features", "seen", "squares"]] * 3
        for update in pending:
            np.testing.assert_allclose(update.hook.finish(update.hook.sums), update.value,
                                       rtol=1e-12, atol=1e-12)
        update_hooks.apply_updates(pending, share=tf.constant(0.5, tf.float64))  # 1 replica
        counts += np.bincount(labels, minlength=4)
        np.testing.assert_array_equal(layer.counts.numpy(), counts)  # not scaled by share


class _Totals(Layer):
    def build(self, input_shape):
        self.total = self.add_weight("total", (), initializer="zeros", trainable=False)

    def call(self, inputs, training=False):
        sums = tf.reduce_sum(inputs)
        # `finish` adds 100 to tell the two paths apart: one device uses `value`.
        self.add_update_over_replicas(self.total, sums, sums=sums,
                                      finish=lambda s: s + 100.0)
        return inputs


def test_one_device_assigns_the_computed_value_and_checks_arguments():
    layer = _Totals()
    layer(tf.constant([1.0, 2.0]))
    assert float(layer.total.numpy()) == 3.0
    with update_hooks.collect_updates() as pending:
        layer(tf.constant([4.0]))
    (update,) = pending
    assert float(update.hook.finish(update.hook.sums)) == 104.0
    assert update_hooks.reduce_over_replicas(pending, 0.5) == pending  # no replicas
    update_hooks.apply_updates(pending, share=0.5)
    assert float(layer.total.numpy()) == 4.0
    with pytest.raises(ValueError, match="needs both sums and finish, or neither"):
        layer.add_update_over_replicas(layer.total, 1.0, sums=1.0)
    with pytest.raises(ValueError, match=r"momentum must be in \[0, 1\]"):
        layer.add_update_over_replicas(layer.total, 1.0, momentum=2.0)
