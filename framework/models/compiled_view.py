"""What a compiled model tells, and accepts, about its training: the public face of `compile`.

A mixin of `Model`. Callbacks and tools read a model's training through these attributes only
(Keras's names where Keras has them: `optimizer`, `jit_compile`, `steps_per_execution`,
`distribute_strategy`, `metrics`, `metrics_names`), never through the compile state's parts.
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["CompiledView"]


class CompiledView:
    """The compiled model's training, read and extended through public attributes (mixed
    into `Model`, which provides `compile_state` and `compiled_for`)."""

    @property
    def compiled(self) -> bool:
        """Whether `compile` has been called."""
        return self.compile_state is not None

    @property
    def optimizer(self):
        """The optimizer given to `compile` (None before), with its slots in `.variables`."""
        return self.compile_state.optimizer if self.compile_state else None

    @property
    def jit_compile(self) -> bool | None:
        """Whether the steps run XLA-compiled: resolved from `compile`'s setting when the
        steps are first built for data (None before)."""
        return None if self.compile_state is None else self.compile_state.jit_compile

    @jit_compile.setter
    def jit_compile(self, value) -> None:
        """Changes `compile`'s setting (Keras's setter): the steps are traced again, with
        it, by the next `fit`, `evaluate` or `predict`.

        Raises:
            RuntimeError: before `compile`.
            ValueError: for a value other than True, False or "auto".
        """
        state = self.compiled_for("setting jit_compile")
        if value not in (True, False, "auto"):
            raise ValueError(
                f"jit_compile must be True, False or 'auto'. Received: jit_compile={value!r}")
        if value is True and state.strategy is not None:
            raise ValueError("jit_compile=True is not supported under a tf.distribute strategy.")
        state.jit_compile_setting = state.arguments["jit_compile"] = value
        state.steps, state.jit_compile = None, None  # traced again, resolved again

    @property
    def steps_per_execution(self):
        """`compile`'s `steps_per_execution` setting: an int, or "auto" (None before)."""
        if self.compile_state is None:
            return None
        return self.compile_state.sizers["train"].setting

    @property
    def distribute_strategy(self):
        """The `tf.distribute` strategy the model was compiled under, or None."""
        return None if self.compile_state is None else self.compile_state.strategy

    @property
    def metrics(self) -> list:
        """The Keras metric objects of the training stage (inside a `test_step`, of the stage
        it runs for): the loss tracker, the per-output loss trackers, then the compiled
        metrics (empty before the first `fit` or `evaluate` builds them). Validation and test
        keep metric objects of their own. A custom step may update them and return
        `{m.name: m.result() for m in self.metrics}`, as in Keras; a model may override this
        property to list metric objects of its own, which each stage resets when it starts."""
        stage = self._stage_metrics()
        return [] if stage is None else stage.metric_objects

    @property
    def metrics_names(self) -> list[str]:
        """The keys `metrics` are logged under, in the same order ("loss", "out_loss",
        "accuracy", ...)."""
        stage = self._stage_metrics()
        if stage is None:
            return []
        return ["loss", *(t.name for t in stage.output_loss_trackers.values()),
                *(key for _, key, _, _ in stage.metrics)]

    def _stage_metrics(self):
        """The `StageMetrics` of the step being traced, else of the training stage."""
        if self.compile_state is None:
            return None
        steps = self.compile_state.steps
        stage = None if steps is None else steps.tracing_stage
        return self.compile_state.stage_metrics.get(stage or "train")

    def reset_metrics(self) -> None:
        """Resets every metric object in `metrics` (Keras's method)."""
        for metric in self.metrics:
            metric.reset_state()

    def get_metrics_result(self) -> dict:
        """{name: result} of every metric object in `metrics` (Keras's method; a compiled
        metric under its log key, a dict result merged in)."""
        stage = self._stage_metrics()
        keys = {} if stage is None else stage.metric_keys()
        results = {}
        for metric in self.metrics:
            value = metric.result()
            if isinstance(value, dict):
                results.update(value)
            else:
                results[keys.get(id(metric), metric.name)] = value
        return results

    # ------------------------------------------------------------------ step recorders
    @property
    def step_recorders(self) -> tuple:
        """The recorders the training step runs (`graphfit.training.recorders`)."""
        return () if self.compile_state is None else tuple(self.compile_state.recorders)

    def add_step_recorder(self, recorder) -> None:
        """Has every training step from now on record with `recorder` (a
        `graphfit.training.recorders.StepRecorder`); the training step is traced again.

        Raises:
            RuntimeError: before `compile`.
            ValueError: under a `tf.distribute` strategy, or for a recorder that wraps the
                default step's loss function when the model overrides `train_step`.
        """
        from graphfit.training.compiled_steps import overrides_step

        state = self.compiled_for("add_step_recorder")
        if state.strategy is not None:
            raise ValueError(
                f"Step recorders ({type(recorder).__name__}) are not supported under a "
                f"tf.distribute strategy ({type(state.strategy).__name__}): turn them off, "
                f"or train on one device.")
        if recorder.needs_default_step and overrides_step(self):
            raise ValueError(
                f"{type(recorder).__name__} reads the default train_step's forward pass, but "
                f"{type(self).__name__} overrides train_step: remove it, or return what you "
                f"need from your train_step in StepResult.logs.")
        if recorder not in state.recorders:
            state.set_recorders([*state.recorders, recorder])

    def remove_step_recorder(self, recorder) -> None:
        """Stops recording with `recorder`; the training step is traced again."""
        state = self.compiled_for("remove_step_recorder")
        state.set_recorders([r for r in state.recorders if r is not recorder])

    def train_step_graph(self) -> tf.Graph | None:
        """The traced graph of the training step (forward pass, gradients, update, update
        hooks; what XLA compiles under `jit_compile`), or None before the first training
        step, when running eagerly and under a strategy."""
        steps = None if self.compile_state is None else self.compile_state.steps
        return None if steps is None else steps.train_step_graph()
