"""`Layer`: the unit of computation, state and configuration in graphfit.

The contract (DESIGN.md): hyperparameters are checked and stored in `__init__`; variables are
created once, in `build(input_shape)`, through `add_weight`; the computation is
`call(inputs, training=False)`, which never creates variables. State that gradients do not
train changes only through update hooks (`add_update`, `add_moving_average`).
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import numpy as np
import tensorflow as tf

from graphfit.core import autograph_scope, symbolic
from graphfit.core import config as constructor_config
from graphfit.core.autograph_scope import graphfit_api
from graphfit.core.dtype_policy import DTypePolicy, dtype_policy, floating_dtype
from graphfit.core.input_spec import InputSpec
from graphfit.core.layer_build import LayerBuild, built_once, unbatched_shape
from graphfit.core.layer_checks import LayerChecks
from graphfit.core.layer_errors import mixed_dtype_error
from graphfit.core.layer_losses import LayerLosses, get_constraint, get_regularizer
from graphfit.core.layer_tracking import LayerTracking
from graphfit.core.layer_updates import LayerUpdates
from graphfit.core.naming import snake_case, unique_name
from graphfit.core.symbolic import LayerNodes
from graphfit.core.variables import weight_initializer

__all__ = ["Layer", "InputSpec", "floating_dtype"]


_FLOAT32 = dtype_policy("float32")

class Layer(LayerTracking, LayerUpdates, LayerChecks, LayerLosses, LayerBuild, LayerNodes,
            tf.Module):
    """Base class of graphfit layers and models.

    Subclasses set hyperparameters in `__init__`, create variables in `build` with
    `add_weight`, and compute in `call(inputs, training=False)`.

    Args:
        name: the layer's name; unique default names ('dense', 'dense_1', ...) otherwise.
        dtype: its dtype policy (`graphfit.dtype_policy`): "float32", "float64",
            "mixed_bfloat16" or "mixed_float16" (compute in 16 bits, variables in float32),
            or a float dtype. None inherits the policy of the model that holds it, float32
            by default. Floating inputs are cast to the compute dtype; integer inputs too
            when the layer sets `casts_integer_inputs`. Under a mixed policy `call` reads
            its variables through `self.compute_value(variable)`.
        trainable: False freezes the layer: its variables join the non-trainable collection
            and it registers no update hooks.
        activity_regularizer: a Keras regularizer of the outputs (`core.layer_losses`).

    Example:

        >>> import tensorflow as tf, graphfit as gf
        >>> class Scale(gf.Layer):
        ...     def build(self, input_shape):
        ...         self.scale = self.add_weight("scale", (input_shape[-1],), initializer="ones")
        ...     def call(self, x, training=False):
        ...         return x * self.compute_value(self.scale)
        >>> layer = Scale(name="scale")
        >>> layer(tf.ones((2, 3))).shape
        TensorShape([2, 3])
        >>> [v.name for v in layer.trainable_variables]
        ['scale/scale:0']
    """

    casts_integer_inputs: bool = False
    """Whether integer and bool inputs are cast to the layer's floating dtype before `call`.

    False (the default): they reach `call` unchanged, so ids, indices, segment ids and labels
    stay integers. Layers that compute on floats (Dense, Conv2D, BatchNormalization, ...) set
    it True so that integer features work; set it on a custom layer that wants floats.
    Floating inputs are cast to the layer's compute dtype unless `casts_floating_inputs` is
    False."""

    casts_floating_inputs: bool = True
    """Whether floating inputs are cast to the layer's compute dtype before `call`. Embedding
    sets it False: its floating inputs are ids, which a 16-bit compute dtype would round."""

    mixes_examples: bool = False
    """Whether `call(training=True)` mixes the examples of a batch (batch statistics).

    Such a layer computes something else on a batch of one, so LevenbergMarquardt's
    per-example Jacobian avoids models holding one. Set it on a custom layer that does."""

    function_arguments: tuple[str, ...] = ()
    """The constructor arguments that take a function as a `'package.module:name'` reference
    (BlackBox's `function`, GradientHook's `fn`). A recipe naming one lists it as user code:
    the reference is checked like `data.function`, and safe mode never imports it."""

    stochastic_in_training: bool = False
    """Whether `call(training=True)` draws random numbers or calls out to something that may
    answer differently each time (Dropout, noise, a BlackBox). `fit(cache_frozen=True)`
    never caches the outputs of a frozen part holding such a layer. Set it on a custom layer
    that is random in training."""

    vectorizes_per_example: bool = True
    """Whether TensorFlow's vectorizer (pfor) can map the layer's gradients over single
    examples; False makes LevenbergMarquardt's `jacobian_mode="auto"` avoid "per_example"."""

    supports_jit: bool = True
    """Whether the layer's computation can be XLA-compiled; `compile(jit_compile=True)`
    refuses a model holding a layer that sets it False."""

    xla_friendly_on_cpu: bool = True
    """Whether XLA makes this layer faster (or no slower) on CPU; `jit_compile="auto"` turns
    XLA on for CPU only when every layer says so (convolutions and pooling say False)."""

    def __new__(cls, *args, **kwargs):
        instance = super().__new__(cls)
        # Remember the constructor arguments so that the default get_config can return them.
        instance._constructor_arguments = constructor_config.capture(cls, args, kwargs)
        return instance

    def __init__(self, name: str | None = None, dtype=None, trainable: bool = True,
                 activity_regularizer=None):
        if name is not None and (not isinstance(name, str) or not name or "/" in name):
            raise ValueError(
                f"name must be a non-empty string without '/'. Received: name={name!r}"
            )
        layer_name = name or unique_name(snake_case(type(self).__name__))
        scope_name = re.sub(r"[^A-Za-z0-9_]", "_", layer_name)
        if not scope_name[0].isalpha():
            scope_name = "layer_" + scope_name
        super().__init__(name=scope_name)
        self._layer_name = layer_name
        self._scope_name = scope_name
        self._explicit_policy = None if dtype is None else dtype_policy(dtype, "dtype")
        self._inherited_policy: DTypePolicy | None = None
        self._trainable = bool(trainable)
        self._trainable_weights: list[tf.Variable] = []
        self._non_trainable_weights: list[tf.Variable] = []
        self.activity_regularizer = activity_regularizer
        self.built = False
        self.input_spec: InputSpec | None = None
        self._build_input_shape = None
        self._output_shape = None
        self._in_call = False

    # ----------------------------------------------------------------- identity and dtype
    @property
    def name(self) -> str:
        return self._layer_name

    @property
    def output_shape(self):
        """The shape of one call's output with the batch axis as None (a nest of tuples for
        several outputs), recorded at the first call; None before it."""
        return self._output_shape

    @property
    def constructor_arguments(self):
        """The arguments the layer was constructed with (an `inspect.BoundArguments`), which
        the default `get_config` returns."""
        return self._constructor_arguments

    @property
    def in_call(self) -> bool:
        """Whether the layer's `call` is running now (graph inspection attributes the ops
        created meanwhile to it)."""
        return self._in_call

    @property
    def dtype_policy(self) -> DTypePolicy:
        """The layer's dtype policy: its own, else its model's, else float32."""
        return self._explicit_policy or self._inherited_policy or _FLOAT32

    @property
    def dtype(self) -> tf.DType:
        """The dtype of the layer's variables (as in Keras; see `compute_dtype`)."""
        return self.dtype_policy.variable_dtype

    @property
    def variable_dtype(self) -> tf.DType:
        """The dtype of the layer's variables."""
        return self.dtype_policy.variable_dtype

    @property
    def compute_dtype(self) -> tf.DType:
        """The dtype of the layer's inputs, arithmetic and outputs."""
        return self.dtype_policy.compute_dtype

    @graphfit_api
    def compute_value(self, value):
        """`value` (a variable or tensor) in the compute dtype, for use in `call`.

        Under a mixed policy variables stay in float32 and `call` reads them through this;
        the cast's gradient flows back to the float32 variable. A no-op otherwise.
        """
        if value.dtype.is_floating and value.dtype != self.compute_dtype:
            return tf.cast(value, self.compute_dtype)
        return value

    def inherit_dtype_policy(self, policy: DTypePolicy) -> None:
        """Gives layers without a policy of their own the policy of the model that holds them.

        A built layer takes a new policy only when its variable dtype stays the same (float32
        to mixed and back): variables, once created, keep their dtype."""
        if self._explicit_policy is None and (
                not self.built or policy.variable_dtype == self.variable_dtype):
            self._inherited_policy = policy
        for layer in self.direct_sublayers():
            layer.inherit_dtype_policy(self.dtype_policy)

    # ------------------------------------------------------------------------- the contract
    @built_once
    def build(self, input_shape) -> None:
        """Creates the layer's variables with `add_weight`. Runs once: at the first call, or
        when called by hand with a shape ((None, 4), a list or a `TensorShape`), after which
        the layer is built and its calls reuse those variables."""

    def call(self, inputs, training: bool = False):
        """The layer's computation. Subclasses implement it."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement call(self, inputs, training=False)."
        )

    @graphfit_api
    def __call__(self, inputs, *args, training: bool | None = None, **kwargs):
        if symbolic.is_symbolic(inputs):  # the functional API: record the call, compute later
            return symbolic.call_symbolically(self, inputs, args, kwargs, training)
        training = _python_bool(training, self)
        inputs = tf.nest.map_structure(self._convert_input, inputs)
        if not self.built:
            self._check_input_spec(inputs)
            self.inherit_dtype_policy(self.dtype_policy)
            self._build_from(inputs)
        self._check_input_spec(inputs)
        with tf.name_scope(self._scope_name), self._start_call():
            inputs = self._batch_checked_inputs(inputs, training)
            self._in_call = True
            try:
                if self._call_accepts_training():
                    kwargs["training"] = training
                outputs = autograph_scope.convert_user_code(self.call)(inputs, *args, **kwargs)
            except (TypeError, ValueError, tf.errors.InvalidArgumentError) as error:
                wrapped = mixed_dtype_error(self, error)
                if wrapped is error:
                    raise
                raise wrapped from error
            finally:
                self._in_call = False
            self._add_call_losses(outputs)  # activity regularizer, weight penalties
        if self._output_shape is None:
            self._output_shape = tf.nest.map_structure(unbatched_shape, outputs)
        return outputs

    def _convert_input(self, value):
        tensor = value if isinstance(value, tf.Tensor) else tf.convert_to_tensor(value)
        dtype = tensor.dtype
        if dtype == self.compute_dtype:
            return tensor
        wants_float = self.casts_integer_inputs and (dtype.is_integer or dtype.is_bool)
        if (dtype.is_floating and self.casts_floating_inputs) or wants_float:
            return tf.cast(tensor, self.compute_dtype)
        return tensor

    def _check_input_spec(self, inputs) -> None:
        if self.input_spec is None or not isinstance(inputs, tf.Tensor):
            return
        self.input_spec.check(self, inputs.shape)

    @classmethod
    def _call_accepts_training(cls) -> bool:
        cached = cls.__dict__.get("_accepts_training_cache")
        if cached is None:
            parameters = inspect.signature(cls.call).parameters
            cached = "training" in parameters or any(
                p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
            )
            cls._accepts_training_cache = cached
        return cached

    # -------------------------------------------------------------------------- variables
    def add_weight(self, name: str | None = None, shape=(), initializer=None,
                   trainable: bool = True, dtype=None, regularizer=None,
                   constraint=None) -> tf.Variable:
        """Creates a variable owned by this layer. Call it from `build`, never from `call`.

        Args:
            name: the variable's name inside the layer ('kernel', 'moving_mean');
                "variable" when not given (Keras code often omits it).
            shape: its shape.
            initializer: a Keras initializer or its name; default 'glorot_uniform' for
                trainable variables and 'zeros' for the others. A callable
                `(shape, dtype) -> tensor` works too.
            trainable: False puts it in the non-trainable collection: gradients never update
                it, update hooks may.
            dtype: defaults to the layer's variable dtype (float32 under a mixed policy).
            regularizer: a Keras regularizer ('l2', `keras.regularizers.L2(0.01)`, a config)
                whose penalty joins the training loss while the weight trains (`losses`).
            constraint: a Keras constraint ('non_neg', `keras.constraints.MaxNorm(2)`) or a
                callable `(value) -> value`, applied after each optimizer update.

        Returns:
            The new `tf.Variable`, with its `regularizer` (or None) as an attribute.
        """
        name = name or "variable"
        if self._in_call:
            raise RuntimeError(
                f"Layer {self.name!r} called add_weight({name!r}) from call(). Variables are "
                f"created once, in build(input_shape); move the add_weight call there."
            )
        dtype = tf.as_dtype(dtype) if dtype is not None else self.dtype
        init = weight_initializer(name, initializer, trainable)
        regularizer = get_regularizer(regularizer, "regularizer")
        constraint = get_constraint(constraint, "constraint")
        shape = tuple(int(d) for d in tf.TensorShape(shape).as_list())
        with tf.init_scope(), tf.name_scope(self._scope_name):
            initial = tf.cast(init(shape, dtype=dtype), dtype)
            # Under a tf.distribute strategy every replica computes the same update (the
            # gradients are all-reduced first): the first replica's value is assigned once.
            variable = tf.Variable(initial, name=name, trainable=trainable, dtype=dtype,
                                   aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
                                   constraint=constraint)
        variable.regularizer = regularizer  # Keras's attribute, read by `losses` and LM
        (self._trainable_weights if trainable else self._non_trainable_weights).append(variable)
        return variable

    # ------------------------------------------------------------------------ counters
    def epoch_counters(self) -> dict[str, int]:
        """Running totals to show at the end of every epoch of `fit` (progress bar, History,
        CSVLogger and TensorBoard's train run), such as a `BlackBox`'s calls to its function.

        The default has none. Prefix keys with the layer's name: they share the epoch's logs
        with the loss and metrics of every layer in the model.
        """
        return {}

    # ------------------------------------------------------------------ configuration
    def get_config(self) -> dict[str, Any]:
        """The constructor arguments that rebuild this layer with `from_config`.

        The default returns the arguments the constructor received when they are plain data
        (numbers, strings, lists, dicts); layers with other arguments override it.
        """
        return {**self._base_config(), **constructor_config.plain_arguments(self)}

    def _base_config(self) -> dict[str, Any]:
        """The arguments every layer takes: name, and dtype / trainable when they were set.

        Layers whose constructor takes non-plain arguments (initializer objects, callables)
        start their own `get_config` from this and add serialized forms of the rest.
        """
        config: dict[str, Any] = {"name": self.name}
        if self._explicit_policy is not None:
            config["dtype"] = self._explicit_policy.name
        if not self._trainable:
            config["trainable"] = False
        config.update(self._losses_config())  # activity_regularizer, when set
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Layer":
        """Rebuilds a layer from `get_config()` output."""
        return cls(**config)

    # ---------------------------------------------------------------------- conveniences
    def __getattr__(self, name: str):
        # Only called for missing attributes: explain the usual cause, a layer not built yet.
        if not name.startswith("_") and not self.__dict__.get("built", True):
            raise AttributeError(
                f"{type(self).__name__} {self.__dict__.get('_layer_name', '')!r} has no "
                f"attribute {name!r} yet: it is not built, and its variables are created in "
                f"build() on the first call. Call it on data first (layer(x), model.build("
                f"input_shape) or model.fit(...))."
            )
        raise AttributeError(f"{type(self).__name__!s} object has no attribute {name!r}")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name!r} built={self.built}>"


def _python_bool(training, layer: Layer) -> bool:
    if isinstance(training, (bool, np.bool_)) or training is None:
        return bool(training)
    if isinstance(training, tf.Tensor) and not tf.is_symbolic_tensor(training):
        return bool(training.numpy())
    raise ValueError(
        f"Layer {layer.name!r}: training must be a Python bool (the train and inference "
        f"graphs are traced separately). Received: training={training!r}"
    )
