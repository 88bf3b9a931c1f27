"""The Layer contract: variables only in build, collections, freezing, dtype, config, errors."""

import numpy as np
import pytest
import tensorflow as tf

import graphfit as gf
from graphfit import layers
from graphfit.core import update_hooks


class Running(gf.Layer):
    """The issue's example layer: a trainable scale and a running mean."""

    def build(self, input_shape):
        self.scale = self.add_weight("scale", shape=(input_shape[-1],), initializer="ones")
        self.mean = self.add_weight("mean", shape=(input_shape[-1],), initializer="zeros",
                                    trainable=False)

    def call(self, x, training=False):
        if training:
            self.add_moving_average(self.mean, tf.reduce_mean(x, axis=0), momentum=0.9)
        return x * self.scale


class Block(gf.Layer):
    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.inner = Running()
        self.extra = [layers.Dense(units)]

    def call(self, x, training=False):
        return self.extra[0](self.inner(x, training=training))


def test_variables_are_created_once_and_reused():
    layer = Running(name="running")
    layer(tf.ones((2, 3)))
    first = [id(v) for v in layer.variables]
    layer(tf.ones((5, 3)))

    @tf.function
    def traced(x):
        return layer(x)

    traced(tf.ones((4, 3)))
    assert [id(v) for v in layer.variables] == first
    assert [v.name for v in layer.trainable_variables] == ["running/scale:0"]
    assert [v.name for v in layer.non_trainable_variables] == ["running/mean:0"]


def test_add_weight_inside_call_is_refused():
    class Lazy(gf.Layer):
        def call(self, x, training=False):
            return x * self.add_weight("w", shape=())

    with pytest.raises(RuntimeError, match="move the add_weight call there"):
        Lazy()(tf.ones((1, 2)))


def test_reading_a_variable_before_build_says_how_to_fix_it():
    layer = Running(name="runner")
    with pytest.raises(AttributeError, match="not built.*layer\\(x\\)"):
        layer.scale  # noqa: B018  (the access itself must raise)


def test_collections_are_recursive_in_keras_order_and_freezing_moves_everything():
    block = Block(4)
    block(tf.ones((2, 3)))
    names = [v.name.split("/")[-1] for v in block.variables]
    assert names == ["scale:0", "mean:0", "kernel:0", "bias:0"]
    assert len(block.trainable_variables) == 3 and len(block.non_trainable_variables) == 1

    block.inner.trainable = False
    assert len(block.trainable_variables) == 2
    assert {v.name.split("/")[-1] for v in block.non_trainable_variables} == {"scale:0", "mean:0"}

    block.trainable = False  # freezing the parent freezes every layer inside it
    assert block.trainable_variables == [] and not block.extra[0].trainable
    assert len(block.non_trainable_variables) == 4


def test_frozen_layer_registers_no_update_hooks():
    layer = Running()
    layer(tf.ones((2, 3)))
    layer.trainable = False
    with update_hooks.collect_updates() as pending:
        layer(tf.ones((2, 3)), training=True)
    assert pending == []


def test_eager_training_call_outside_fit_applies_the_update_immediately():
    layer = Running()
    layer(tf.constant([[1.0, 2.0], [3.0, 4.0]]), training=True)
    np.testing.assert_allclose(layer.mean.numpy(), [0.2, 0.3], rtol=1e-6)  # 0.1 * [2, 3]


def test_updates_inside_a_collector_are_deferred_until_applied():
    layer = Running()
    with update_hooks.collect_updates() as pending:
        layer(tf.constant([[1.0, 2.0], [3.0, 4.0]]), training=True)
    np.testing.assert_array_equal(layer.mean.numpy(), [0.0, 0.0])
    assert [(p.hook.kind, p.hook.momentum) for p in pending] == [("moving_average", 0.9)]
    update_hooks.apply_updates(pending)
    np.testing.assert_allclose(layer.mean.numpy(), [0.2, 0.3], rtol=1e-6)


def test_update_hooks_refuse_trainable_variables():
    class Bad(gf.Layer):
        def build(self, input_shape):
            self.w = self.add_weight("w", shape=(1,))

        def call(self, x, training=False):
            self.add_update(self.w, tf.ones((1,)))
            return x

    with pytest.raises(ValueError, match="trainable=False"):
        Bad()(tf.ones((1, 1)), training=True)


def test_training_must_be_a_python_bool():
    layer = Running()

    @tf.function
    def traced(x, flag):
        return layer(x, training=flag)

    with pytest.raises(ValueError, match="training must be a Python bool"):
        traced(tf.ones((1, 2)), tf.constant(True))


def test_default_names_are_unique_and_bad_names_are_refused():
    a, b = Running(), Running()
    assert a.name != b.name and b.name.startswith("running")
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        Running(name="a/b")


def test_dtype_is_validated_inherited_and_applied_to_inputs():
    with pytest.raises(ValueError, match="Received: dtype='int32'"):
        Running(dtype="int32")
    model = gf.Sequential([Running(), layers.Dense(2)], dtype="float64")
    out = model(np.ones((3, 4), dtype=np.float32))
    assert out.dtype == tf.float64
    assert all(v.dtype == tf.float64 for v in model.variables)
    explicit = Running(dtype="float32")
    gf.Sequential([explicit], dtype="float64")(np.ones((1, 2)))
    assert explicit.dtype == tf.float32


def test_get_config_captures_plain_constructor_arguments():
    block = Block(5, name="blocky")
    assert block.get_config() == {"name": "blocky", "units": 5}
    clone = Block.from_config(block.get_config())
    assert clone.units == 5 and clone.name == "blocky"

    class TakesObject(gf.Layer):
        def __init__(self, fn, **kwargs):
            super().__init__(**kwargs)
            self.fn = fn

    with pytest.raises(NotImplementedError, match="override get_config"):
        TakesObject(lambda x: x).get_config()


def test_input_rank_errors_say_how_to_fix():
    conv = layers.Conv2D(4, 3)
    with pytest.raises(ValueError, match="rank 4.*Reshape"):
        conv(tf.ones((2, 64)))
    dense = layers.Dense(3)
    dense(tf.ones((2, 5)))
    with pytest.raises(ValueError, match="built for inputs with 5 values on axis -1"):
        dense(tf.ones((2, 7)))


def test_registry_finds_classes_and_suggests_close_names():
    assert gf.registry.LAYERS.get("Dense") is layers.Dense
    with pytest.raises(ValueError, match="Did you mean 'Dense'"):
        gf.registry.LAYERS.get("Dens")

    @gf.register_layer
    class TwiceTheInput(gf.Layer):
        def call(self, x, training=False):
            return 2.0 * x

    assert gf.registry.LAYERS.get("TwiceTheInput") is TwiceTheInput
    with pytest.raises(ValueError, match="already registered"):
        gf.registry.LAYERS.register(Running, name="TwiceTheInput")


def test_default_names_follow_keras():
    assert layers.Conv2D(2, 3).name.startswith("conv2d")
    assert layers.GlobalAveragePooling2D().name.startswith("global_average_pooling2d")
    assert layers.BatchNormalization().name.startswith("batch_normalization")
