"""`BlackBox`: a NumPy function with no known gradient, as a layer with estimated gradients."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import tensorflow as tf

from graphfit.core import validation
from graphfit.core.layer import InputSpec, Layer, floating_dtype
from graphfit.core.registry import register_layer
from graphfit.layers import gradient_estimators, user_functions
from graphfit.layers.black_box_calls import CheckedFunction
from graphfit.layers.black_box_surrogate import OnlineSurrogate

__all__ = ["BlackBox"]


def _output_shape(value, owner: str) -> tuple:
    shape = (value,) if validation.is_integer(value) else value
    try:
        dims = tuple(shape)
    except TypeError:
        dims = None
    if dims is None or isinstance(value, str) or not all(
            validation.is_integer(d) and d > 0 for d in dims):
        raise ValueError(
            f"{owner}: output_shape must be the shape of one example's output, a tuple of "
            f"positive integers without the batch axis (e.g. (2,)). Received: "
            f"output_shape={value!r}")
    return tuple(int(d) for d in dims)


def _output_dtype(value, owner: str) -> tf.DType | None:
    if value is None:
        return None
    try:
        return floating_dtype(value, "output_dtype", " (gradients flow through floats only), "
                                                     "or None for the layer's dtype")
    except ValueError as error:
        raise ValueError(f"{owner}: {error}") from None


@register_layer
class BlackBox(Layer):
    """Runs a NumPy function F, whose gradient is unknown, and estimates its gradient.

    F is any Python function of NumPy arrays: a simulator, a C library, a measurement on
    hardware. Forward, the layer calls it through `tf.numpy_function` on the batch
    (`vectorized=True`: `F(batch (batch, *input_shape)) -> (batch, *output_shape)`) or on
    each example (`vectorized=False`: `F(example) -> output_shape`). Backward, it estimates
    the vector-Jacobian product `J^T g` of each example from more calls to F, by
    `estimator` (see `graphfit.layers.gradient_estimators`):

    - "central": central differences, 2·d evaluations of the batch (d = input size); exact
      up to O(sigma²); the reference, affordable for small d.
    - "spsa": simultaneous perturbation with random signs, 2 evaluations per sample
      whatever d; unbiased up to O(sigma²), variance falling as 1/num_samples.
    - "antithetic": Gaussian smoothing (evolution strategies) with antithetic pairs,
      2 evaluations per sample.
    - "straight_through": the gradient passes unchanged, as if F were the identity
      (quantisers); needs F's output shape to equal its input shape; no evaluation.
    - "surrogate": the gradient of a small network fitted online to the (input, F(input))
      pairs of the forward passes (physics-aware training); no evaluation beyond the
      forward pass, biased until the surrogate has learnt F (`surrogate_error`; see
      `graphfit.layers.black_box_surrogate`).

    The random directions come from the layer's own `tf.random.Generator`, seeded by `seed`
    and saved in checkpoints, so a run and a resumed run estimate the same gradients.
    Every call of F is counted in `function_calls` (forward and estimator calls; saved in
    checkpoints too): users pay for every call to hardware.

    F runs in Python, which XLA cannot compile: the layer sets `supports_jit = False`, so
    `jit_compile="auto"` runs the model without XLA and `jit_compile=True` is refused with
    an error naming the layer. F's results are checked on every call: a result of the wrong
    shape, NaN or inf, something not an array of numbers, or an exception in F raises an
    error naming the layer and what was received.

    Args:
        function: F, or a reference `'package.module:name'` to it (what configs hold).
        output_shape: the shape of one example's output, without the batch axis.
        output_dtype: the floating dtype of the outputs; None: the layer's dtype.
        estimator: "spsa", "central", "antithetic", "straight_through" or "surrogate".
        num_samples: random directions per example and step ("spsa", "antithetic").
        sigma: the size of the perturbations, in the units of F's inputs.
        seed: an integer seed of the estimator's generator; None draws one from NumPy's
            global state (fixed by `graphfit.set_seed`).
        vectorized: whether F takes a whole batch (True) or one example (False).
        surrogate_units: the width of the surrogate's two hidden layers ("surrogate").
        surrogate_learning_rate: the surrogate's Adam learning rate ("surrogate").
        surrogate_updates_per_step: its Adam steps on each training batch ("surrogate").
        surrogate_exploration: each training step, F is also called once on the batch
            jittered by this many times the inputs' spread (normal noise), and the
            surrogate learns from those pairs too: they show it F's slopes, which the
            forward pass alone (one point per example) does not. 0: no extra call
            ("surrogate").
        name: the layer's name. dtype: its floating dtype (None inherits the model's).
        trainable: kept for the common signature; the layer has no trainable variables.

    Raises:
        ValueError: if an argument is invalid; on build, for "straight_through" when the
            input and output shapes differ; on call, when F fails or returns a bad result.

    Example:

        >>> import numpy as np, tensorflow as tf
        >>> from graphfit import layers
        >>> box = layers.BlackBox(np.sin, output_shape=(2,), estimator="central", sigma=1e-3)
        >>> x = tf.constant([[0.0, 1.0]])
        >>> with tf.GradientTape() as tape:
        ...     tape.watch(x)
        ...     y = box(x)
        >>> np.round(tape.gradient(y, x).numpy(), 4)   # cos(x)
        array([[1.    , 0.5403]], dtype=float32)
        >>> box.function_calls                          # 1 forward + 2·2 central
        5
    """

    casts_integer_inputs = True  # F is perturbed in floating point
    supports_jit = False  # tf.numpy_function runs Python, which XLA cannot compile
    xla_friendly_on_cpu = False
    stochastic_in_training = True  # F may be a measurement; caching it would skip calls

    function_arguments = ("function",)  # a recipe names it as "module:name" user code
    def __init__(self, function, output_shape, output_dtype=None, estimator: str = "spsa",
                 num_samples: int = 4, sigma: float = 1e-2, seed: int | None = None,
                 vectorized: bool = True, surrogate_units: int = 64,
                 surrogate_learning_rate: float = 1e-2, surrogate_updates_per_step: int = 8,
                 surrogate_exploration: float = 0.0,
                 name: str | None = None, dtype=None, trainable: bool = True):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        owner = self._owner()
        self._function_argument = function
        self.function = user_functions.resolve("function", function, owner)
        self.output_shape_per_example = _output_shape(output_shape, owner)
        self.output_dtype_argument = _output_dtype(output_dtype, owner)
        self.estimator = validation.one_of("estimator", estimator,
                                           gradient_estimators.ESTIMATORS)
        self.num_samples = validation.positive_int("num_samples", num_samples)
        self.sigma = validation.positive_float("sigma", sigma)
        if seed is not None and not validation.is_integer(seed):
            raise validation.invalid("seed", seed, "an integer or None")
        self.seed = None if seed is None else int(seed)
        if not isinstance(vectorized, (bool, np.bool_)):
            raise validation.invalid("vectorized", vectorized, "True or False")
        self.vectorized = bool(vectorized)
        self.surrogate_units = validation.positive_int("surrogate_units", surrogate_units)
        self.surrogate_learning_rate = validation.positive_float(
            "surrogate_learning_rate", surrogate_learning_rate)
        self.surrogate_updates_per_step = validation.positive_int(
            "surrogate_updates_per_step", surrogate_updates_per_step)
        self.surrogate_exploration = validation.finite_number(
            "surrogate_exploration", surrogate_exploration, minimum=0.0)
        self.surrogate = None
        self._calls = None
        self._generator = None

    def _owner(self) -> str:
        return f"BlackBox {self.name!r}"

    @property
    def compute_dtype(self) -> tf.DType:
        """The variable dtype under any policy: F runs on float32 (or float64) NumPy arrays,
        and the estimators' finite differences need more than 16 bits."""
        return self.variable_dtype

    @property
    def output_dtype(self) -> tf.DType:
        """The dtype of the outputs: `output_dtype`, else the layer's dtype."""
        return self.output_dtype_argument or self.dtype

    @property
    def function_calls(self) -> int:
        """How many times F has been called (forward and estimator calls; one per batch
        when vectorized, one per example otherwise); 0 before the first call."""
        return 0 if self._calls is None else int(self._calls.numpy())

    @property
    def surrogate_error(self) -> float | None:
        """With estimator="surrogate": the surrogate's running relative RMS error on the
        batches it learnt from (1 before it has learnt anything); else None."""
        return None if self.surrogate is None else self.surrogate.error

    def epoch_counters(self) -> dict[str, float]:
        """`{"<name>_function_calls": total}` (and `"<name>_surrogate_error"` with the
        surrogate estimator), shown at the end of every epoch."""
        counters = {f"{self.name}_function_calls": self.function_calls}
        if self.surrogate is not None:
            counters[f"{self.name}_surrogate_error"] = self.surrogate.error
        return counters

    @property
    def function_calls_variable(self) -> tf.Variable | None:
        """The int64 variable counting F's calls (for metrics and logs); None before build."""
        return self._calls

    def _refuse_strategies(self) -> None:
        if tf.distribute.has_strategy():
            raise ValueError(
                f"{self._owner()} runs Python code from the graph, which is not supported "
                f"under a tf.distribute strategy: train on one device.")

    def build(self, input_shape) -> None:
        self._refuse_strategies()
        shape = tf.TensorShape(input_shape)
        owner = self._owner()
        if shape.rank is None or shape.rank < 2 or None in shape.as_list()[1:]:
            raise ValueError(
                f"{owner} needs inputs (batch, *input_shape) with a known input_shape; "
                f"received inputs of shape {shape}.")
        example = tuple(shape.as_list()[1:])
        if self.estimator == "straight_through" and example != self.output_shape_per_example:
            raise ValueError(
                f"{owner}: estimator='straight_through' passes the gradient unchanged, so "
                f"F's output shape must equal its input shape; the input shape is {example} "
                f"and output_shape={self.output_shape_per_example}. Use 'spsa', 'central' "
                f"or 'antithetic' for a function that changes the shape.")
        # Not add_weight: neither is a weight of F's model, and both change on every call;
        # as tracked attributes they are still written to checkpoints.
        seed = self.seed if self.seed is not None else int(np.random.randint(0, 2**31 - 1))
        with tf.name_scope(self._scope_name):
            self._generator = tf.random.Generator.from_seed(seed)
            self._calls = tf.Variable(tf.constant(0, tf.int64), trainable=False,
                                      name="function_calls")
        if self.estimator == "surrogate":
            self.surrogate = OnlineSurrogate(
                self, math.prod(example), math.prod(self.output_shape_per_example),
                self.surrogate_units, self.surrogate_learning_rate,
                self.surrogate_updates_per_step, self.surrogate_exploration, seed)
        self.input_spec = InputSpec(ndim=len(example) + 1,
                                    axes={i + 1: d for i, d in enumerate(example)})

    def call(self, inputs, training: bool = False):
        self._refuse_strategies()

        @tf.custom_gradient
        def black_box(x):
            outputs = self._evaluate(x[None])[0]

            def backward(upstream):
                if self.surrogate is not None:
                    return self.surrogate.vector_jacobian_product(x, upstream)
                seed = self._generator.make_seeds(1)[:, 0]
                return gradient_estimators.vector_jacobian_product(
                    self._evaluate, x, upstream, self.estimator, self.num_samples,
                    self.sigma, seed)

            return outputs, backward

        outputs = black_box(inputs)
        if training and self.surrogate is not None:
            self._teach_surrogate(inputs, outputs)
        return outputs

    def _teach_surrogate(self, inputs, outputs) -> None:
        """The surrogate learns from the forward pass, and from one more call of F on
        jittered inputs (exploration), which shows it F's slopes around the batch."""
        if self.surrogate_exploration > 0:
            seed = self._generator.make_seeds(1)[:, 0]
            jittered = tf.stop_gradient(self.surrogate.exploratory_inputs(inputs, seed))
            inputs = tf.concat([inputs, jittered], axis=0)
            outputs = tf.concat([outputs, self._evaluate(jittered[None])[0]], axis=0)
        self.surrogate.learn(inputs, outputs)

    def fit_surrogate(self, inputs, epochs: int = 20, batch_size: int = 128,
                      seed: int = 0) -> float:
        """Teaches the surrogate F on `inputs` before (or between) training runs.

        Online, the surrogate only sees what the model upstream feeds F, and early in
        training that is a narrow, moving region where its gradient is still guesswork;
        a model trained through it can wander off. Calling F first on inputs that span the
        region training will visit (physics-aware training pre-trains its digital twin the
        same way) makes its gradient right from the first step. F is called once per batch
        of `inputs` (counted in `function_calls`); the later epochs reuse those pairs.

        Args:
            inputs: an array `(n, *input_shape)` of inputs for F.
            epochs: passes of the surrogate over the pairs (F is evaluated in the first).
            batch_size: the batch size of F's calls and of the surrogate's training.
            seed: the seed of the shuffling.

        Returns:
            The surrogate's running relative error afterwards (`surrogate_error`).
        """
        if self.estimator != "surrogate":
            raise ValueError(f"{self._owner()}: fit_surrogate needs estimator='surrogate'; "
                             f"this layer uses estimator={self.estimator!r}.")
        epochs = validation.positive_int("epochs", epochs)
        batch_size = validation.positive_int("batch_size", batch_size)
        inputs = np.asarray(inputs, dtype=self.dtype.as_numpy_dtype)
        if not self.built:
            self(tf.constant(inputs[:0]))  # builds; an empty batch calls nothing
        evaluate = tf.function(lambda batch: self._evaluate(batch[None])[0])
        outputs = np.concatenate([evaluate(tf.constant(inputs[i:i + batch_size])).numpy()
                                  for i in range(0, len(inputs), batch_size)])
        learn = tf.function(self.surrogate.learn, reduce_retracing=True)
        order = np.random.default_rng(seed)
        for _ in range(epochs):
            shuffle = order.permutation(len(inputs))
            for start in range(0, len(inputs), batch_size):
                rows = shuffle[start:start + batch_size]
                learn(tf.constant(inputs[rows]), tf.constant(outputs[rows]))
        return self.surrogate.error

    def _evaluate(self, stacked: tf.Tensor) -> tf.Tensor:
        """F on a stack of batches `(n, batch, *input_shape)`, checked and counted."""
        checked = CheckedFunction(self.function, self._owner(), self.output_shape_per_example,
                                  self.output_dtype.as_numpy_dtype, self.vectorized)
        outputs, calls = tf.numpy_function(checked, [stacked], [self.output_dtype, tf.int64],
                                           stateful=True, name="black_box_function")
        outputs.set_shape(stacked.shape[:2].concatenate(self.output_shape_per_example))
        with tf.control_dependencies([self._calls.assign_add(calls)]):
            return tf.identity(outputs)

    def get_config(self) -> dict[str, Any]:
        function = user_functions.config_reference(
            "function", self._function_argument, self.function, self._owner())
        dtype = self.output_dtype_argument
        return {
            **self._base_config(),
            "function": function,
            "output_shape": list(self.output_shape_per_example),
            "output_dtype": None if dtype is None else dtype.name,
            "estimator": self.estimator,
            "num_samples": self.num_samples,
            "sigma": self.sigma,
            "seed": self.seed,
            "vectorized": self.vectorized,
            "surrogate_units": self.surrogate_units,
            "surrogate_learning_rate": self.surrogate_learning_rate,
            "surrogate_updates_per_step": self.surrogate_updates_per_step,
            "surrogate_exploration": self.surrogate_exploration,
        }
