"""`SecondOrderOptimizer`: the contract of an optimizer that solves for its own step.

A first-order optimizer (`Optimizer`) turns a gradient into an update. A second-order one —
`LevenbergMarquardt` — linearizes the model's residuals around the current point, solves for
the step, and judges trial points by the loss, so it needs more than a gradient: it implements
`minimize(loss_fn, variables, batch)` itself, and the training step passes it everything in
the `StepBatch` (`graphfit.core.step_types`):

    batch.model, batch.loss_set     to re-run the model and write the loss as residuals
    batch.x, y, sample_weight       the batch
    batch.replicas                  under a `tf.distribute` strategy (the step then runs once,
                                    in cross-replica context: `steps_across_replicas`), the
                                    replicas' slices of the global batch
    batch.bound                     the most examples `fit` promises a batch holds; report
                                    what a trace relied on with `bound.rely_on(n)`
    batch.steps_per_pass            the steps one pass over the training data takes
    batch.skip_non_finite           a `LossScaleOptimizer` asks: leave every variable, state
                                    and update hook as it was when the step is not finite

It returns `(loss, ForwardPass)` of the point it ends on; `ForwardPass.skipping_updates` marks a
step that moved nothing. It refuses, before the first step, what it cannot minimise
(`check_training`), and may ask `fit` to stop once converged (`stop_reason`). It reports its
gradient with `core.step_context.record_gradients` when it computes one.

Example: Gauss–Newton on the residuals of a squared-error loss, without damping.

    >>> import numpy as np, tensorflow as tf, graphfit as gf
    >>> from graphfit import layers
    >>> class GaussNewton(SecondOrderOptimizer):
    ...     def minimize(self, loss_fn, variables, batch=None):
    ...         with tf.GradientTape(persistent=True) as tape:
    ...             loss, aux = loss_fn()
    ...             residuals = tf.reshape(aux.y_pred - tf.cast(batch.y, aux.y_pred.dtype), [-1])
    ...         jac = tf.concat([tf.reshape(j, [tf.shape(residuals)[0], -1]) for j in
    ...                          tape.jacobian(residuals, variables)], axis=1)
    ...         normal = tf.matmul(jac, jac, transpose_a=True)
    ...         step = tf.linalg.solve(normal, -tf.matmul(jac, residuals[:, None],
    ...                                                  transpose_a=True))[:, 0]
    ...         sizes = [int(np.prod(v.shape)) for v in variables]
    ...         for v, part in zip(variables, tf.split(step, sizes)):
    ...             v.assign_add(tf.reshape(part, v.shape))
    ...         self.iterations.assign_add(1)
    ...         return loss, aux
    >>> x = np.linspace(-1, 1, 20)[:, None]
    >>> model = gf.Sequential([layers.Dense(1)], input_shape=(1,), dtype="float64")
    >>> model.compile(optimizer=GaussNewton(), loss="mse")
    >>> _ = model.fit(x, 2 * x - 1, batch_size=None, epochs=1, verbose=0)
    >>> [round(float(v), 6) for w in model.get_weights() for v in w.ravel()]
    [2.0, -1.0]
"""

from __future__ import annotations

from graphfit.optimizers.base import (
    FIRST_ORDER_ARGUMENTS,
    BaseOptimizer,
    refuse_first_order_argument,
)

__all__ = ["SecondOrderOptimizer"]


class SecondOrderOptimizer(BaseOptimizer):
    """Base class of optimizers that solve for their step (see the module docstring).

    Subclasses implement `minimize(loss_fn, variables, batch)`, honouring what `batch`
    carries, and extend `get_config`. Under a `tf.distribute` strategy their `minimize` runs
    once per step for all replicas (`steps_across_replicas`). Constructing one with a Keras
    base-optimizer argument of first-order optimizers (`use_ema`,
    `gradient_accumulation_steps`, ...) raises a ValueError that says so.
    """

    def __new__(cls, *args, **kwargs):
        for key in FIRST_ORDER_ARGUMENTS:
            if key in kwargs:  # else the constructor's bare "unexpected keyword" TypeError
                refuse_first_order_argument(cls, key, kwargs[key])
        return super().__new__(cls)

    steps_across_replicas = True
    # A second-order step is a large graph (a solve, a loop of trials) that XLA compiles for
    # seconds on a CPU: jit_compile="auto" leaves XLA off there (GPUs get it).
    xla_friendly_on_cpu = False
