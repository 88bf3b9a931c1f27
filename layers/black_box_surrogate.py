"""The "surrogate" estimator of `BlackBox`: a small network fitted online to F, whose
Jacobian stands in for F's on the backward pass.

This is the scheme of physics-aware training (Wright et al., Nature 2022): the forward pass
uses F's true output, the backward pass the gradient of a differentiable model of F. Here the
model is learnt while training runs, from the (input, F(input)) pairs that the forward passes
produce anyway, so it costs no extra call to F: one call per training step, against
2·num_samples for SPSA. The price is bias: until the surrogate has learnt F near the inputs
the training visits, its gradient can point the wrong way (watch `error`, below).

The surrogate is an MLP `input -> tanh(units) -> tanh(units) -> output` on standardized
inputs and outputs (running means and scales of what F has been called on), trained by
Adam on the mean squared error in standardized units. Its weights, Adam's moments and the
statistics are non-trainable variables of the BlackBox, changed by update hooks: once per
training step after the optimizer's update, never in evaluation, prediction, LM trial passes
or Jacobians, and saved in checkpoints. `error` is the running relative RMS error of the
surrogate on each batch before it learns from it (1: no better than predicting the mean).
"""

from __future__ import annotations

import keras
import tensorflow as tf

__all__ = ["OnlineSurrogate"]

_STATISTICS_MOMENTUM = 0.99  # the standardization follows the inputs over ~100 steps
_ERROR_MOMENTUM = 0.9
_BETA_1, _BETA_2, _ADAM_EPSILON = 0.9, 0.999, 1e-7  # Adam's (Keras) defaults


class OnlineSurrogate:
    """A differentiable model of F learnt from F's own forward evaluations.

    Args:
        layer: the BlackBox that owns the variables (created with its `add_weight`).
        input_size, output_size: the flattened sizes of one example's input and output.
        units: the width of the two hidden layers.
        learning_rate: Adam's learning rate.
        updates_per_step: Adam steps on each training batch.
        exploration: the jitter of the exploratory inputs, in units of the inputs' spread.
        seed: the seed of the initial weights.
    """

    def __init__(self, layer, input_size: int, output_size: int, units: int,
                 learning_rate: float, updates_per_step: int, exploration: float, seed: int):
        self.exploration = exploration
        self.learning_rate = learning_rate
        self.updates_per_step = updates_per_step
        sizes = [input_size, units, units, output_size]
        self.weights = []
        for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            init = keras.initializers.GlorotUniform(seed=seed + i)
            self.weights += [
                layer.add_weight(f"surrogate_kernel_{i}", (fan_in, fan_out), init, False),
                layer.add_weight(f"surrogate_bias_{i}", (fan_out,), "zeros", False)]
        self.first_moments = [layer.add_weight(f"{_short(w)}_m", w.shape, "zeros", False)
                              for w in self.weights]
        self.second_moments = [layer.add_weight(f"{_short(w)}_v", w.shape, "zeros", False)
                               for w in self.weights]
        self.updates = layer.add_weight("surrogate_updates", (), "zeros", False)
        self.statistics = {
            name: layer.add_weight(f"surrogate_{name}", (size,), init, False)
            for name, size, init in [("input_mean", input_size, "zeros"),
                                     ("input_scale", input_size, "ones"),
                                     ("output_mean", output_size, "zeros"),
                                     ("output_scale", output_size, "ones")]}
        self.running_error = layer.add_weight("surrogate_error", (), "ones", False)
        self._layer = layer

    @property
    def error(self) -> float:
        """The running relative RMS error of the surrogate on the batches it learnt from."""
        return float(self.running_error.numpy())

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        """The surrogate's output for flattened inputs `(batch, input_size)`."""
        return self._predict(x, self.weights, self.statistics)

    @staticmethod
    def _predict(x, weights, statistics):
        stats = {name: tf.cast(v, x.dtype) for name, v in statistics.items()}
        h = (x - stats["input_mean"]) / stats["input_scale"]
        weights = [tf.cast(w, x.dtype) for w in weights]
        for kernel, bias in zip(weights[:-2:2], weights[1:-2:2]):
            h = tf.tanh(h @ kernel + bias)
        return (h @ weights[-2] + weights[-1]) * stats["output_scale"] + stats["output_mean"]

    def vector_jacobian_product(self, x: tf.Tensor, upstream: tf.Tensor) -> tf.Tensor:
        """`J_s(x)^T upstream` per example, J_s the surrogate's Jacobian; in x's shape."""
        flat = tf.reshape(x, tf.stack([tf.shape(x)[0], -1]))
        with tf.GradientTape() as tape:
            tape.watch(flat)
            outputs = self(flat)
        g = tf.reshape(tf.cast(upstream, outputs.dtype), tf.shape(outputs))
        return tf.reshape(tape.gradient(outputs, flat, output_gradients=g), tf.shape(x))

    def exploratory_inputs(self, x: tf.Tensor, seed: tf.Tensor) -> tf.Tensor:
        """x jittered by `exploration` times the inputs' running spread (normal noise)."""
        scale = tf.reshape(tf.cast(self.statistics["input_scale"], x.dtype),
                           tf.shape(x)[1:])
        noise = tf.random.stateless_normal(tf.shape(x), seed, dtype=x.dtype)
        return x + self.exploration * scale * noise

    def learn(self, x: tf.Tensor, y: tf.Tensor) -> None:
        """Declares, as update hooks, the surrogate's training on the pairs (x, F(x))."""
        x = tf.stop_gradient(tf.reshape(x, tf.stack([tf.shape(x)[0], -1])))
        y = tf.stop_gradient(tf.cast(tf.reshape(y, tf.stack([tf.shape(y)[0], -1])), x.dtype))
        statistics = self._new_statistics(x, y)
        error = self._relative_error(x, y)
        weights = [tf.identity(w) for w in self.weights]
        moments = ([tf.identity(m) for m in self.first_moments],
                   [tf.identity(v) for v in self.second_moments])
        step = tf.identity(self.updates)
        for _ in range(self.updates_per_step):
            step = step + 1.0
            weights, moments = self._adam_step(x, y, weights, moments, step, statistics)
        error = _ERROR_MOMENTUM * self.running_error + (1 - _ERROR_MOMENTUM) * error
        pairs = [*zip(self.weights, weights), *zip(self.first_moments, moments[0]),
                 *zip(self.second_moments, moments[1]), (self.updates, step),
                 *((self.statistics[k], v) for k, v in statistics.items()),
                 (self.running_error, error)]
        has_data = tf.shape(x)[0] > 0  # an empty batch teaches nothing (and its mean is NaN)
        for variable, value in pairs:
            value = tf.cast(value, variable.dtype)
            self._layer.add_update(variable, tf.where(has_data, value, variable))

    def _new_statistics(self, x, y) -> dict:
        """The standardization after this batch: the batch's own at the first update, then
        a moving average (a scale of 0, a constant input or output, counts as 1)."""
        first = tf.equal(self.updates, 0.0)
        new = {}
        for prefix, data in (("input", x), ("output", y)):
            mean, variance = tf.nn.moments(data, axes=[0])
            scale = tf.sqrt(variance)
            scale = tf.where(scale > 1e-6 * (1.0 + tf.abs(mean)), scale, tf.ones_like(scale))
            for name, value in ((f"{prefix}_mean", mean), (f"{prefix}_scale", scale)):
                old = tf.cast(self.statistics[name], value.dtype)
                moved = _STATISTICS_MOMENTUM * old + (1 - _STATISTICS_MOMENTUM) * value
                new[name] = tf.where(first, value, moved)
        return new

    def _relative_error(self, x, y):
        residual = self(x) - y
        spread = y - tf.reduce_mean(y, axis=0)
        ratio = tf.sqrt(tf.reduce_sum(residual ** 2) / (tf.reduce_sum(spread ** 2) + 1e-12))
        return tf.minimum(ratio, 1e3)  # a constant F, or one example, has no spread

    def _adam_step(self, x, y, weights, moments, step, statistics):
        scale = tf.cast(statistics["output_scale"], x.dtype)
        with tf.GradientTape() as tape:
            tape.watch(weights)
            residual = self._predict(x, weights, statistics) - y
            loss = tf.reduce_mean((residual / scale) ** 2)
        grads = tape.gradient(loss, weights)
        lr = self.learning_rate * tf.sqrt(1 - _BETA_2 ** step) / (1 - _BETA_1 ** step)
        new_weights, firsts, seconds = [], [], []
        for w, g, m, v in zip(weights, grads, *moments):
            g = tf.cast(g, w.dtype)
            m = _BETA_1 * m + (1 - _BETA_1) * g
            v = _BETA_2 * v + (1 - _BETA_2) * g * g
            new_weights.append(w - tf.cast(lr, w.dtype) * m / (tf.sqrt(v) + _ADAM_EPSILON))
            firsts.append(m)
            seconds.append(v)
        return new_weights, (firsts, seconds)


def _short(variable) -> str:
    return variable.name.split("/")[-1].split(":")[0]

