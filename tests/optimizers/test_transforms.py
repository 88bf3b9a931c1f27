"""Gradient transforms: hand-computed values, the whole-list gate, and the optimizer flags."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from graphfit import optimizers
from graphfit.optimizers import transforms
from graphfit.testing.optimizer_contract import INITIAL, gradients, make_variables


def values(grads):
    return [g.numpy().tolist() for g in grads]


def test_clip_by_value():
    clip = transforms.ClipByValue(0.5)
    assert values(clip([tf.constant([-2.0, 0.25, 0.7])])) == [[-0.5, 0.25, 0.5]]


def test_clip_by_norm_acts_on_each_gradient_alone():
    clipped = transforms.ClipByNorm(1.0)([tf.constant([3.0, 4.0]), tf.constant([0.3, 0.4])])
    np.testing.assert_allclose(clipped[0], [0.6, 0.8], rtol=1e-6)  # norm 5 -> 1
    np.testing.assert_allclose(clipped[1], [0.3, 0.4], rtol=1e-6)  # norm 0.5: untouched


def test_global_norm_scales_all_gradients_by_one_factor_from_all_of_them():
    # Global norm sqrt(3^2 + 4^2 + 0.1^2) = 5.000999900019995; limit 1 -> every gradient,
    # even the small one that alone is far below the limit, is scaled by 1 / 5.000999900.
    grads = [tf.constant([3.0, 0.0]), tf.constant([[0.0], [4.0]]), tf.constant(0.1)]
    clipped = transforms.ClipByGlobalNorm(1.0)(grads)
    factor = 1.0 / np.sqrt(25.01)
    for before, after in zip(grads, clipped):
        np.testing.assert_allclose(after.numpy(), before.numpy() * factor, rtol=1e-6)
    total = np.sqrt(sum(float(tf.reduce_sum(g * g)) for g in clipped))
    assert total == pytest.approx(1.0, rel=1e-6)
    # Below the limit nothing changes.
    assert values(transforms.ClipByGlobalNorm(10.0)(grads)) == values(grads)


def test_global_norm_with_mixed_precisions_uses_the_same_factor():
    grads = [tf.constant([3.0], tf.float32), tf.constant([4.0], tf.float64)]
    clipped = transforms.ClipByGlobalNorm(1.0)(grads)
    assert [g.dtype for g in clipped] == [tf.float32, tf.float64]
    np.testing.assert_allclose([float(clipped[0][0]), float(clipped[1][0])], [0.6, 0.8], rtol=1e-6)


def test_global_norm_of_non_finite_gradients_is_nan_like_tensorflow():
    clipped = transforms.ClipByGlobalNorm(1.0)([tf.constant([np.inf, 1.0])])
    assert np.isnan(clipped[0].numpy()).all()


def test_optimizer_global_clipnorm_gates_the_whole_list():
    # loss = 3 a + 4 b: gradients 3 and 4, global norm 5; global_clipnorm 1 and lr 1 move
    # a and b by -0.6 and -0.8, where per-variable clipnorm 1 would move both by -1.
    a, b = tf.Variable(0.0), tf.Variable(0.0)
    optimizers.SGD(1.0, global_clipnorm=1.0).minimize(lambda: (3.0 * a + 4.0 * b, None), [a, b])
    assert [float(a), float(b)] == pytest.approx([-0.6, -0.8], rel=1e-6)
    c, d = tf.Variable(0.0), tf.Variable(0.0)
    optimizers.SGD(1.0, clipnorm=1.0).minimize(lambda: (3.0 * c + 4.0 * d, None), [c, d])
    assert [float(c), float(d)] == pytest.approx([-1.0, -1.0], rel=1e-6)


def test_flags_match_keras_clipping_of_the_same_gradients():
    grads = gradients(make_variables())
    for flag, value in [("clipnorm", 0.5), ("clipvalue", 0.2), ("global_clipnorm", 0.7)]:
        ours = optimizers.SGD(**{flag: value})
        theirs = keras.optimizers.SGD(**{flag: value})
        for got, want in zip(ours._flag_transforms(grads), theirs._clip_gradients(grads)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6, err_msg=flag)


def test_the_test_problem_makes_every_clip_bite():
    # Guards the Keras differential tests: with the clipping thresholds they use, each clip
    # changes the initial gradients, so a clip that did nothing would be caught.
    grads = [g.numpy() for g in gradients(make_variables())]
    assert min(np.linalg.norm(g) for g in grads) > 0.5  # clipnorm=0.5
    assert max(np.abs(g).max() for g in grads) > 0.2  # clipvalue=0.2
    assert np.sqrt(sum((g**2).sum() for g in grads)) > 0.7  # global_clipnorm=0.7
    assert set(INITIAL) == {"kernel", "bias"}


def test_several_clipping_flags_are_refused_as_keras_and_transforms_chain_instead():
    import keras

    for flags in ({"clipvalue": 3.0, "global_clipnorm": 1.0}, {"clipnorm": 1.0,
                                                              "clipvalue": 1.0}):
        with pytest.raises(ValueError, match="Only one of `clipnorm`, `clipvalue` and"):
            keras.optimizers.SGD(1.0, **flags)
        with pytest.raises(ValueError, match=r"Only one of `clipnorm`, `clipvalue` and.*"
                                             r"gradient_transforms="):
            optimizers.SGD(1.0, **flags)
    seen = []

    def record(grads):
        seen.append([g.numpy().tolist() for g in grads])
        return grads

    w = tf.Variable([0.0, 0.0])
    optimizer = optimizers.SGD(1.0, gradient_transforms=[
        transforms.ClipByValue(3.0), transforms.ClipByGlobalNorm(1.0), record])
    optimizer.apply_gradients([(tf.constant([4.0, 0.0]), w)])
    # clipvalue first: [3, 0]; then global norm 3 -> 1: [1, 0]; then the user transform.
    assert seen == [[[1.0, 0.0]]]
    assert w.numpy().tolist() == [-1.0, 0.0]


def test_chain_applies_in_order():
    grads = [tf.constant([4.0, 0.5])]
    by_value, by_norm = transforms.ClipByValue(1.0), transforms.ClipByNorm(2.0)
    # [4, 0.5] -> clip to 1: [1, 0.5] (norm 1.12 < 2, kept).
    np.testing.assert_allclose(transforms.chain(by_value, by_norm)(grads)[0], [1.0, 0.5])
    # [4, 0.5] -> norm 4.0311 scaled to 2: [1.98456, 0.24807] -> clip to 1: [1, 0.24807].
    np.testing.assert_allclose(
        transforms.chain(by_norm, by_value)(grads)[0], [1.0, 1.0 / np.sqrt(16.25)], rtol=1e-6
    )


def test_chain_rejects_a_transform_that_changes_the_length():
    with pytest.raises(ValueError, match="one gradient per input gradient"):
        transforms.chain(lambda grads: grads[:1])([tf.constant(1.0), tf.constant(2.0)])


def test_get_and_serialize_round_trip():
    built = transforms.get({"type": "ClipByNorm", "clipnorm": 2.0})
    assert isinstance(built, transforms.ClipByNorm) and built.clipnorm == 2.0
    nested = transforms.chain(transforms.ClipByValue(1.0), transforms.ClipByGlobalNorm(3.0))
    config = transforms.serialize(nested)
    again = transforms.get(config)
    assert transforms.serialize(again) == config
    assert config["transforms"][1] == {"type": "ClipByGlobalNorm", "global_clipnorm": 3.0}


def test_get_errors():
    with pytest.raises(ValueError, match="Did you mean 'ClipByNorm'"):
        transforms.get({"type": "ClipByNrom", "clipnorm": 1.0})
    with pytest.raises(ValueError, match="callable grads -> grads"):
        transforms.get(3.0)
    with pytest.raises(ValueError, match="only the built-in"):
        transforms.serialize(lambda grads: grads)


@pytest.mark.parametrize("cls, argument", [
    (transforms.ClipByValue, "clipvalue"),
    (transforms.ClipByNorm, "clipnorm"),
    (transforms.ClipByGlobalNorm, "global_clipnorm"),
])
@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), "1", True])
def test_bad_thresholds(cls, argument, bad):
    with pytest.raises(ValueError) as error:
        cls(bad)
    assert f"{argument} must be a positive float. Received: {argument}={bad!r}" in str(error.value)
