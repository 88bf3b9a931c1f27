"""`Model`: a `Layer` that trains, evaluates and predicts (Keras names and signatures)."""

# One class, one file: `Model` is keras.Model's public surface, each method a thin delegate
# (to training.loops, saving, summary), so the whole surface reads in one place.

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from graphfit.core import update_hooks
from graphfit.core.autograph_scope import graphfit_api
from graphfit.core.dtype_policy import dtype_policy
from graphfit.core.layer import Layer
from graphfit.core.step_types import StepResult
from graphfit.models import summary as summary_lib
from graphfit.models.compiled_view import CompiledView
from graphfit.saving import compile_config, model_file, weights_io
from graphfit.training import batch_calls, frozen_cache, steps
from graphfit.training import loops as training_loop
from graphfit.training.array_data import spec_of
from graphfit.training.compile_state import CompileState
from graphfit.training.feeds import DEFAULT_BATCH_SIZE
from graphfit.training.fit_data import fit_data
from graphfit.training.input_checks import check_features

__all__ = ["Model"]


def _spec_from_shape(shape, dtype: tf.DType):
    """(None, 64) -> TensorSpec; a list or dict of shapes -> the same structure of specs."""
    if isinstance(shape, dict):
        return {k: _spec_from_shape(v, dtype) for k, v in shape.items()}
    nested = isinstance(shape, (list, tuple)) and shape and isinstance(
        shape[0], (list, tuple, tf.TensorShape))
    if nested:
        return [_spec_from_shape(s, dtype) for s in shape]
    dims = list(tf.TensorShape(shape).as_list())
    return tf.TensorSpec([None, *dims[1:]], dtype)


@dataclasses.dataclass
class _Signature:
    """What the model was built for. A plain object, so TensorFlow's attribute tracking does
    not wrap the specs (a tracked dict would no longer flatten like the data's dict)."""

    inputs: object = None
    outputs: object = None
    update_ops: tuple | None = None


class Model(CompiledView, Layer):
    """A trainable model. Subclass it (define layers in `__init__`, compute in `call`), call
    it with symbolic inputs and outputs (`gf.Model(inputs, outputs)`, Keras's functional API:
    see `graphfit.models.Functional`), or use `Sequential` and `GraphModel`.

    Training follows Keras: `compile(optimizer, loss, metrics)`, then `fit`, `evaluate`,
    `predict`. The train, validation and test stages keep separate metric state, each reset at
    the start of its stage.

    Attributes set while training (callbacks read and write them):
        stop_training: set True to end `fit` after the current execution of
            `steps_per_execution` batches (Keras's flag; reset when `fit` starts).
        stop_evaluating: set True to end an evaluation (`evaluate`, or `fit`'s validation
            and test) after the current execution (Keras's flag; reset at each one's start).
        stop_predicting: set True to end `predict` after the current execution; it returns
            the outputs so far (Keras's flag; reset when `predict` starts).
        stop_reason: why `fit` stopped early, in words (`EarlyStopping`, `TerminateOnNaN`, an
            optimizer's own stopping test), or None.
        nonfinite_step: the step whose loss was not finite (`TerminateOnNaN`), or None.
        history: the `History` of the last `fit`.

    Example:

        >>> import numpy as np, graphfit as gf
        >>> from graphfit import layers
        >>> class TwoLayer(gf.Model):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.hidden = layers.Dense(8, activation="relu")
        ...         self.out = layers.Dense(1)
        ...     def call(self, x, training=False):
        ...         return self.out(self.hidden(x))
        >>> model = TwoLayer()
        >>> model.compile(optimizer="adam", loss="mse")
        >>> history = model.fit(np.ones((16, 3)), np.ones((16, 1)), epochs=2, verbose=0)
        >>> len(history.history["loss"])
        2
    """

    builds_by_tracing = True  # build(input_shape) traces a forward pass; the layers build

    def __new__(cls, *args, **kwargs):
        # Keras's signature detection: Model(inputs, outputs) makes a functional model, also
        # for a subclass that keeps Model.__init__ (one that only overrides train_step).
        from graphfit.models import functional  # it subclasses Model

        if cls.__init__ is Model.__init__ and functional.functional_arguments(args, kwargs):
            cls = functional.functional_class(cls)
        return super().__new__(cls, *args, **kwargs)

    def __init__(self, *args, **kwargs):
        """`Model(name=None, dtype=None, trainable=True)`; `Model(inputs, outputs, name=...)`
        makes a functional model, also from a subclass's `super().__init__(inputs, outputs)`.
        """
        from graphfit.models import functional

        if functional.functional_arguments(args, kwargs):
            functional.become_functional(self, args, kwargs)
            return
        self._init_model(*args, **kwargs)

    def _init_model(self, name: str | None = None, dtype=None, trainable: bool = True):
        super().__init__(name=name, dtype=dtype, trainable=trainable)
        self.compile_state: CompileState | None = None
        self._signature = _Signature()
        self._predict_state: CompileState | None = None
        self._building = False
        self.stop_training = False
        self.stop_evaluating = False
        self.stop_predicting = False
        self.stop_reason: str | None = None
        self.nonfinite_step: int | None = None
        self.history = None

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: dict | None = None):
        """Rebuilds a model from `get_config()`; a functional model's config (Keras's
        layout, with `input_layers`) gives a functional model, as `keras.Model.from_config`."""
        from graphfit.models import functional

        if "input_layers" in config and "layers" in config:
            return functional.functional_class(cls).from_config(config, custom_objects)
        return super().from_config(config)

    # ------------------------------------------------------------------------- building
    def build(self, input_shape=None, dtype=None) -> None:
        """Creates every variable by tracing a forward pass on `input_shape` (batch axis
        included, e.g. (None, 64); a list or dict of shapes for several inputs)."""
        if self._building or input_shape is None:
            return  # the Layer hook: sublayers build as the first call reaches them
        self.build_for(_spec_from_shape(input_shape, tf.as_dtype(dtype or self.dtype)))

    def _build_from(self, inputs) -> None:
        # The data's dtype, not the compute dtype the inputs were cast to for this call.
        self._signature.inputs = tf.nest.map_structure(
            lambda s: tf.TensorSpec(s.shape, self.variable_dtype) if s.dtype.is_floating else s,
            spec_of(inputs))
        self._building = True
        try:
            super()._build_from(inputs)
        finally:
            self._building = False

    def build_for(self, input_spec, name: str = "x") -> None:
        """Builds from a spec by tracing, or checks the spec (of the data called `name`)
        against the built model."""
        input_spec = self.arrange_inputs(input_spec)
        if self._signature.inputs is None:
            try:
                self._trace_forward(input_spec)
            except Exception:
                # Not built for inputs it failed on: a call with the right ones builds it.
                self._signature.inputs = self._signature.outputs = None
                self.built = False
                raise
            return
        built, given = tf.nest.flatten(self._signature.inputs), None
        try:
            tf.nest.assert_same_structure(self._signature.inputs, input_spec, check_types=False)
            given = tf.nest.flatten(input_spec)
        except (ValueError, TypeError):
            raise ValueError(
                f"Model {self.name!r} was built for inputs structured as {self._signature.inputs}, "
                f"but {name} is structured as {input_spec}."
            ) from None
        for expected, spec in zip(built, given):
            check_features(name, spec.shape, expected)

    def _trace_forward(self, input_spec):
        def forward(x):
            return self(x, training=False)

        # autograph=False: `forward` is graphfit's; the layers convert the user's code.
        concrete = tf.function(forward, autograph=False).get_concrete_function(input_spec)
        self._signature.outputs = spec_of(concrete.structured_outputs)

    def arrange_inputs(self, x):
        """Puts user data in the structure the model's call expects (GraphModel: by name)."""
        return x

    @property
    def built_input_spec(self):
        """TensorSpecs of the inputs the model was built for (batch axis None), or None
        before it is built."""
        return self._signature.inputs

    @property
    def output_spec(self):
        """TensorSpecs of the outputs (batch axis None); traced from the input spec if needed."""
        if self._signature.outputs is None:
            self.require_built("output_spec")
            self._trace_forward(self._signature.inputs)
        return self._signature.outputs

    @property
    def output_names(self) -> list[str] | None:
        """Names of the outputs when the model has several (it returns a dict), else None."""
        spec = self.output_spec
        if isinstance(spec, dict):
            return list(spec)
        if isinstance(spec, (list, tuple)):
            raise ValueError(
                f"Model {self.name!r} returns a {type(spec).__name__} of outputs; return a dict "
                f"{{name: tensor}} from call() so that losses and labels can be matched by name."
            )
        return None

    def require_built(self, what: str) -> None:
        if not self.built or self._signature.inputs is None:
            raise ValueError(
                f"Model {self.name!r} is not built yet, so {what} is not available. Build it "
                f"with model.build(input_shape), by calling it on data, or by fit()."
            )

    @property
    def layers(self) -> list[Layer]:
        """The model's layers, in order."""
        return self.direct_sublayers()

    def get_layer(self, name: str | None = None, index: int | None = None) -> Layer:
        """The layer called `name`, searched through nested models too; or the one at
        `index` in `model.layers` (Keras's `get_layer(index=...)`)."""
        if (name is None) == (index is None):
            raise ValueError(f"get_layer takes a layer name or an index, one of them. Received: "
                             f"name={name!r}, index={index!r}")
        if index is not None:
            layers = self.layers
            if not isinstance(index, int) or not -len(layers) <= index < len(layers):
                raise ValueError(f"Model {self.name!r} has {len(layers)} layers; index={index!r} "
                                 f"is not one of them.")
            return layers[index]
        for layer in self.flatten_layers(include_self=False):
            if layer.name == name:
                return layer
        raise ValueError(
            f"Model {self.name!r} has no layer named {name!r}. Its layers: "
            f"{[l.name for l in self.flatten_layers(include_self=False)]}"
        )

    # ------------------------------------------------------------------- update hooks
    @property
    def update_ops(self) -> list[update_hooks.UpdateHook]:
        """The update hooks one training step runs, in order (layer, variable, kind).

        Found by tracing a training-mode forward pass; frozen layers register none.
        """
        self.require_built("update_ops")
        key = tuple((id(l), l.trainable) for l in self.flatten_layers())
        if self._signature.update_ops is None or self._signature.update_ops[0] != key:
            hooks: list[update_hooks.UpdateHook] = []

            def forward(x):
                with update_hooks.collect_updates() as pending:
                    outputs = self(x, training=True)
                hooks.extend(p.hook for p in pending)
                return outputs

            tf.function(forward).get_concrete_function(self._signature.inputs)
            self._signature.update_ops = (key, hooks)
        return list(self._signature.update_ops[1])

    # ---------------------------------------------------------------------------- steps
    @graphfit_api
    def train_step(self, data) -> StepResult:
        """One training step on a batch; override it to customise training, as in Keras.

        `fit` traces it (XLA under `jit_compile`), runs `steps_per_execution` of them per
        call, updates the train metrics from its result, and applies after it any update
        hook it left uncollected. The default runs `self.optimizer.minimize` on the compiled
        loss (`graphfit.training.steps.train_step`); an override may use any optimizers it
        holds (their slots are created on first use and checkpointed with the model).

        Args:
            data: one batch as the data yields it: (x,), (x, y) or (x, y, sample_weight);
                `graphfit.core.step_types.unpack_data` splits it.

        Returns:
            A `StepResult(loss, y_pred=None, output_losses={}, logs={})`: "loss" and each
            entry of `logs` are averaged over the epoch; the compiled metrics read `y_pred`.
        """
        return steps.train_step(self, data)

    @graphfit_api
    def test_step(self, data) -> StepResult:
        """One evaluation step on a batch (`evaluate`, validation, test); overridable like
        `train_step`. The default returns the compiled loss and the outputs."""
        return steps.test_step(self, data)

    @graphfit_api
    def predict_step(self, data):
        """The outputs for one batch of `predict`; overridable. `data` is (x,) or x."""
        return steps.predict_step(self, data)

    # ------------------------------------------------------- Keras 3's custom-step idioms
    @graphfit_api
    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The compiled loss of `y_pred` against `y` plus the losses layers added in this
        step, for an overridden `train_step` / `test_step` (Keras's method; `x` and
        `training` are unused, as in Keras's default).

        Raises:
            ValueError: when there is no loss (none compiled, none added).
        """
        del x, training
        return steps.compute_loss(self, y, y_pred, sample_weight)

    @graphfit_api
    def compute_metrics(self, x, y, y_pred, sample_weight=None) -> dict:
        """Updates the compiled metrics of the running stage from one batch and returns
        `get_metrics_result()` (Keras's method). Metrics compiled as `metrics` ignore
        `sample_weight`; `weighted_metrics` apply it."""
        del x
        stage = self._stage_metrics()
        if stage is None:
            raise RuntimeError(
                f"Model {self.name!r} has no compiled metrics yet: compile it and call "
                f"compute_metrics from a train_step or test_step that fit or evaluate runs.")
        stage.update_compiled(y, y_pred, sample_weight)
        return self.get_metrics_result()

    # ------------------------------------------------------------------------ training
    def compile(
        self,
        optimizer="adam",
        loss=None,
        metrics=None,
        loss_weights=None,
        weighted_metrics=None,
        jit_compile="auto",
        steps_per_execution="auto",
        run_eagerly: bool = False,
        dtype_policy=None,
        auto_scale_loss: bool = True,
    ) -> None:
        """Configures training.

        Args:
            optimizer: a graphfit optimizer, its name ("sgd", "adam") or a config dict.
            loss: a Keras loss name or object, or a function (y_true, y_pred); for several
                outputs a list in output order or a dict by output name, None for an output
                without a loss (it then needs no labels).
            metrics: Keras metric names or objects, or functions; a dict by output name for
                several outputs. "accuracy" picks binary, sparse or categorical accuracy from
                the shapes; with a binary from-logits loss, threshold metrics use logits.
                As in Keras, they ignore sample weights.
            loss_weights: a number that scales the loss of a single-output model, or for
                several outputs a list in output order or a dict by output name: the total
                loss is the weighted sum (the logged per-output losses are unweighted).
            weighted_metrics: metrics that apply the sample weights (same forms as metrics).
            jit_compile: True, False, or "auto" (XLA where it helps; decided once, before
                the steps are traced: see `graphfit.training.xla_support.resolve_jit_compile`).
            steps_per_execution: training steps per call of the compiled loop: an int, or
                "auto": as many as fit in about 0.1 s, or one when a callback listens to
                every training batch. Batch callbacks run once per call.
            run_eagerly: run the steps eagerly, for debugging with print and pdb.
            dtype_policy: None keeps the model's policy (float32 unless it was constructed
                with another); "mixed_bfloat16" or "mixed_float16" computes in 16 bits with
                variables, slots, update-hook state, loss and metrics in float32 (see
                `set_dtype_policy`); under "mixed_float16" the optimizer is wrapped in a
                `LossScaleOptimizer` unless it is one.
            auto_scale_loss: False leaves the optimizer unwrapped under "mixed_float16"
                (Keras's argument).

        Raises:
            ValueError: for an unknown loss, metric or optimizer name (listing the valid ones)
                or a bad setting.
        """
        if dtype_policy is not None:
            self.set_dtype_policy(dtype_policy)
        self.compile_state = CompileState(optimizer, loss, metrics, loss_weights, jit_compile,
                                           steps_per_execution, run_eagerly, weighted_metrics,
                                           self.dtype_policy, auto_scale_loss)

    def set_dtype_policy(self, policy) -> None:
        """Sets the model's dtype policy, which every layer without its own inherits.

        A built model can switch between policies with the same variable dtype (float32 and
        the mixed ones); its variables are kept as they are. Call `compile` again after it
        (compile's `dtype_policy` does both).

        Args:
            policy: a `DTypePolicy` or its name ("float32", "float64", "mixed_bfloat16",
                "mixed_float16").

        Raises:
            ValueError: for an unknown policy, or one whose variable dtype differs from the
                built model's variables.
        """
        policy = dtype_policy(policy, "dtype_policy")
        if self.built and policy.variable_dtype != self.variable_dtype:
            raise ValueError(
                f"Model {self.name!r} was built with {self.variable_dtype.name} variables, and "
                f"dtype_policy={policy.name!r} keeps variables in "
                f"{policy.variable_dtype.name}: variables keep the dtype they were created "
                f"with. Construct the model with dtype={policy.name!r} (or set the policy "
                f"before it is built)."
            )
        self._explicit_policy = policy
        for layer in self.direct_sublayers():
            layer.inherit_dtype_policy(policy)
        self._signature.outputs = None  # their dtype follows the compute dtype: traced again

    def state_for_predict(self) -> CompileState:
        """The compiled state, or, before `compile`, one that only predicts."""
        if self.compile_state is not None:
            return self.compile_state
        if self._predict_state is None:
            self._predict_state = CompileState(None, None, None, None, "auto", "auto", False)
        return self._predict_state

    def compiled_for(self, caller: str) -> CompileState:
        if self.compile_state is None:
            raise RuntimeError(
                f"Model {self.name!r} must be compiled before {caller}(): call "
                f"model.compile(optimizer=..., loss=..., metrics=[...]) first."
            )
        return self.compile_state

    def fit(self, x=None, y=None, batch_size: int | None = DEFAULT_BATCH_SIZE, epochs: int = 1,
            verbose="auto", callbacks=None, validation_split: float = 0.0,
            validation_data=None, shuffle: bool | str = True, class_weight=None,
            sample_weight=None, initial_epoch: int = 0, steps_per_epoch: int | None = None,
            validation_steps: int | None = None, validation_batch_size: int | None = None,
            validation_freq=1, test_data=None, test_steps: int | None = None,
            test_freq: int | None = None, check_finite: bool = True,
            cache_frozen: bool = False):
        """Trains the model; returns a `History` (`history.history["loss"]`, ...).

        Keras's arguments in Keras's order, then graphfit's own (`test_data`, `test_steps`,
        `test_freq`, `check_finite`, `cache_frozen`); `docs/guides/keras_parity.md` lists where
        they differ.

        Args:
            x, y: arrays (or dicts of arrays by input/output name), or a tf.data.Dataset of
                (x, y) or (x, y, sample_weight) batches (then y is None).
            batch_size: samples per step; None trains on all samples in one batch (Keras's
                None means 32).
            epochs: the epoch to stop at (epochs - initial_epoch epochs run).
            verbose: 0 silent, 1 progress bar, 2 one line per epoch; "auto" is 1.
            callbacks: `graphfit.callbacks.Callback`s.
            validation_split: the fraction of the in-memory samples to validate on instead
                of training: the last ones, before shuffling (as Keras). Ignored when
                validation_data is given; refused for a dataset.
            validation_data: (x, y), (x, y, sample_weight) or a Dataset, evaluated every
                `validation_freq` epochs with its own metric state ("val_" keys).
            shuffle: a new order of the samples every epoch (arrays only); "batch" reorders
                the samples inside each batch only (Keras's).
            class_weight: {class id: weight}: each training sample's loss is weighted by its
                class's weight (1 for classes not named); single-output models only, labels
                as class ids, one column, or one-hot rows. Multiplied into sample_weight when
                both are given (Keras 3 refuses both at once).
            sample_weight: per-sample weights for the loss and the weighted metrics.
            initial_epoch: the epoch to start from (resuming).
            steps_per_epoch: batches per epoch, as in Keras 3: the epochs walk on through
                a pass over the data, and an epoch ends early (with a warning) where the pass
                ends; a dataset that repeats forever needs it. Default: one pass.
            validation_steps: batches per validation: for arrays the first ones, for a
                dataset the iterator carries on from one validation to the next.
            validation_batch_size: the batch size of validation (default: batch_size).
            validation_freq: validate every so many epochs, or after the epochs listed
                (counted from 1), as Keras.
            test_data: like validation_data, evaluated at the end of training (and every
                `test_freq` epochs when set) with its own metric state ("test_" keys).
            test_steps, test_freq: like validation_steps and validation_freq, for test_data.
            check_finite: refuse data with NaN or infinite values (arrays only).
            cache_frozen: compute the frozen leading layers' outputs once (per data set,
                again when their weights or the data change) and train the rest on them: the
                same weights as without it, faster. In-memory arrays only; off, with a
                one-line warning, when nothing can be cached (`graphfit.training.frozen_cache`).

        Raises:
            RuntimeError: when the model was not compiled.
            ValueError: for bad data (mismatched lengths, wrong feature shape, labels outside
                the number of classes, NaN or infinite values) or a bad argument, before any
                step runs.
        """
        x, y, sample_weight, validation_data = fit_data(
            self, x, y, sample_weight, class_weight=class_weight,
            validation_split=validation_split, validation_data=validation_data)
        arguments = dict(
            batch_size=batch_size, epochs=epochs, verbose=verbose, callbacks=callbacks,
            validation_data=validation_data, test_data=test_data, shuffle=shuffle,
            initial_epoch=initial_epoch, sample_weight=sample_weight,
            steps_per_epoch=steps_per_epoch, validation_steps=validation_steps,
            test_steps=test_steps, validation_freq=validation_freq, test_freq=test_freq,
            check_finite=check_finite, validation_batch_size=validation_batch_size)
        if frozen_cache.check_cache_frozen(cache_frozen):
            history = frozen_cache.fit_on_cached_features(self, x, y, **arguments)
            if history is not None:
                return history
        return training_loop.fit(self, x, y, **arguments)

    def evaluate(self, x=None, y=None, batch_size: int | None = 32, verbose="auto",
                 sample_weight=None, steps: int | None = None, callbacks=None,
                 return_dict: bool = False, stage: str = "test", check_finite: bool = True):
        """Computes the loss and metrics on data, with the `stage`'s own metric state.

        Args:
            x, y: as for `fit` (arrays or a Dataset of (x, y) batches).
            batch_size: samples per step; None puts all samples in one batch.
            verbose: 0 silent, 1 progress bar; "auto" is 1.
            sample_weight: per-sample weights for the loss and the weighted metrics.
            steps: batches to evaluate (default: one pass over the data); more than a pass
                holds starts another.
            callbacks: callbacks; their test hooks receive `stage`.
            return_dict: return {"loss": ..., metric: ...} instead of a list.
            stage: "test" (default) or "val": whose metric state is used and reported.
            check_finite: refuse data with NaN or infinite values.

        Returns:
            The loss alone when there are no metrics, else a list in Keras's order (the loss,
            a single output's metrics, the per-output losses, then the other keys sorted),
            or a dict with return_dict=True.

        Raises:
            RuntimeError: when the model was not compiled with a loss.
            ValueError: for bad data, as `fit`.
        """
        return training_loop.evaluate(
            self, x, y, batch_size=batch_size, verbose=verbose, sample_weight=sample_weight,
            steps=steps, callbacks=callbacks, return_dict=return_dict, stage=stage,
            check_finite=check_finite,
        )

    def predict(self, x, batch_size: int | None = 32, verbose="auto", steps: int | None = None,
                callbacks=None):
        """The model's outputs in inference mode (no update hooks run).

        Works before `compile` too.

        Args:
            x: arrays (a dict or list of them for several inputs) or a Dataset of x batches.
            batch_size: samples per step; None puts all samples in one batch.
            verbose: 0 silent, 1 progress bar; "auto" is 1.
            steps: batches to predict (default: until the data ends); arrays stop at their
                end.
            callbacks: callbacks; their predict hooks are called.

        Returns:
            A NumPy array, or a dict of arrays by output name for several outputs.
        """
        return training_loop.predict(self, x, batch_size=batch_size, verbose=verbose,
                                     steps=steps, callbacks=callbacks)

    def train_on_batch(self, x, y=None, sample_weight=None, class_weight=None,
                       return_dict: bool = False):
        """One training step on one batch: all of `x` (Keras's signature and return value).

        The train metrics are reset first, as in Keras 3, so the numbers are those of this
        batch (computed before the update); no callback is called.

        Args:
            x, y: one batch of arrays (or dicts/lists of them).
            sample_weight: per-sample weights.
            class_weight: {class id: weight}, as for `fit` (multiplied into sample_weight).
            return_dict: return {"loss": ..., metric: ...} instead of a list.

        Returns:
            The loss alone when there are no metrics, else [loss, *metrics], or a dict.
        """
        return batch_calls.train_on_batch(self, x, y, sample_weight, class_weight, return_dict)

    def test_on_batch(self, x, y=None, sample_weight=None, return_dict: bool = False):
        """The loss and metrics of one batch (all of `x`), in inference mode; returns as
        `train_on_batch`. Uses the test stage's metrics, reset first."""
        return batch_calls.test_on_batch(self, x, y, sample_weight, return_dict)

    def predict_on_batch(self, x):
        """The outputs for one batch (all of `x`) as NumPy arrays, like `predict`."""
        return batch_calls.predict_on_batch(self, x)

    # ------------------------------------------------------------------------ weights
    def get_weights(self) -> list[np.ndarray]:
        """The values of `weights`, in Keras order, so a Keras twin can be copied in (as
        in Keras, random seed state is not a weight; `save_weights` keeps it)."""
        self.require_built("get_weights()")
        return [v.numpy() for v in self.weights]

    def set_weights(self, weights) -> None:
        """Assigns values in the order of `get_weights()`."""
        self.require_built("set_weights()")
        weights_io.assign_in_order(self.weights, weights, self.name)

    def save_weights(self, filepath: str) -> str:
        """Writes the model's variables to a TensorFlow checkpoint at the prefix `filepath`."""
        self.require_built("save_weights()")
        return weights_io.save(self, filepath)

    def load_weights(self, filepath: str) -> None:
        """Reads variables written by `save_weights` (or a training checkpoint) into the model."""
        self.require_built("load_weights()")
        weights_io.load(self, filepath)

    def save(self, filepath: str, overwrite: bool = True, zipped: bool | None = None) -> str:
        """Writes the whole model to one ".graphfit" file: its config, weights, compile
        arguments and optimizer state (`graphfit.saving.model_file`); `load_model` reads it
        back into an identical model whose `fit` carries on as this one's would.

        Raises:
            ValueError: for a path not ending in ".graphfit" (".keras" is Keras's format),
                an unregistered model or layer class, compile arguments a file cannot hold,
                or `zipped=False` (Keras's unzipped folder: graphfit writes one file).
        """
        if zipped is False:
            raise ValueError(
                "zipped=False (Keras's unzipped folder) is not supported: graphfit writes one "
                ".graphfit file; unzip it to see its parts.")
        return model_file.save_model(self, filepath, overwrite=overwrite)

    def to_json(self, **kwargs) -> str:
        """The architecture as JSON, without weights (Keras's `to_json`);
        `graphfit.models.model_from_json` reads it back. `kwargs` go to `json.dumps`."""
        return model_file.model_to_json(self, **kwargs)

    def get_compile_config(self) -> dict | None:
        """`compile`'s arguments as plain data (None before `compile`), as a saved model
        holds them (Keras's method)."""
        return compile_config.compile_config(self)

    def compile_from_config(self, config: dict) -> None:
        """Compiles the model as `get_compile_config()` describes (Keras's method)."""
        self.compile(**compile_config.compile_arguments(config))

    def export(self, filepath: str, *, classify: bool | None = None, layers=(),
               preprocessing=None, format: str = "saved_model",
               quantize: str | None = None) -> str:
        """Writes a TensorFlow SavedModel that serves without graphfit (see
        `graphfit.export.export_model`): `serving_default` and `predict`, `classify` for a
        classifier, one signature per name in `layers`; returns its path. `format="tflite"`
        (with `quantize="float16"` or `"dynamic_range"`) or `"onnx"` writes that file of
        `serving_default` instead, checked in its runtime against `predict` on sample rows
        (`graphfit.export.export_as`, which returns the check)."""
        from graphfit.export import export_as, export_model  # export imports training

        if format == "saved_model" and quantize is None:
            return export_model(self, filepath, preprocessing=preprocessing,
                                classify=classify, layers=layers)
        return export_as(self, filepath, format, preprocessing=preprocessing,
                         quantize=quantize, classify=classify, layers=layers).path

    def fit_report(self, x, y, sample_weight=None, absolute_sigma: bool = False):
        """How well the fitted parameters are determined by the data `x, y` they were fitted
        to: values ± standard errors, correlations, χ², reduced χ², R², AIC, BIC, the steps
        and why `fit` stopped (`graphfit.fitting.fit_report`; `print()` shows it).

        Args:
            x, y: the data the model was fitted to.
            sample_weight: the weights of the fit, read as 1/σ².
            absolute_sigma: take the weights as absolute (SciPy's `curve_fit` choice).
        """
        from graphfit.fitting import fit_report

        return fit_report(self, x, y, sample_weight=sample_weight,
                          absolute_sigma=absolute_sigma)

    def summary(self, print_fn: Callable[[str], Any] | None = None, line_length: int = 88) -> None:
        """Prints the layers with output shapes and trainable / non-trainable counts."""
        self.require_built("summary()")
        summary_lib.print_summary(self, print_fn or print, line_length)

    def flops(self, batch_size: int = 1, inputs=None) -> dict:
        """FLOPs of the forward pass and of the training step, total and per layer.

        Counted by TensorFlow's profiler on the traced graphs (traced, never run: no variable
        changes); see `graphfit.inspect.flops` for the method and its pitfalls.

        Args:
            batch_size: the batch size to count at.
            inputs: an example batch whose shapes to count at instead (a graph batch: its
                nodes and edges; `batch_size` is then its graphs, the labels' rows).

        Returns:
            {"forward", "backward", "update", "training_step": ints, "per_layer": {layer
            name: {"forward", "forward_train", "backward"}}, "method": str, ...}.

        Raises:
            ValueError: if the model is not built, or `batch_size` is not a positive integer.

        Example:

            >>> import graphfit as gf
            >>> from graphfit import layers
            >>> model = gf.Sequential([layers.Dense(3)])
            >>> model.build((None, 4))
            >>> model.flops(batch_size=2)["forward"]  # MatMul 2*2*4*3 + bias 2*3
            54
        """
        from graphfit.inspect import flops as flops_lib  # flops imports model lazily too

        return flops_lib.count_flops(self, batch_size, inputs)
