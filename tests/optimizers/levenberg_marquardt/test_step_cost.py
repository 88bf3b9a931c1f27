"""The size of the traced Levenberg–Marquardt step, so that a regression in trace or step
cost shows as a failing count.

Each `tf.cond` or `tf.while_loop` in the step adds two functions to the graph's library
(traced, instantiated and lowered on the first call) and runs its own executor on every
step; each op costs its trace and a few microseconds per run on this scale of problem (the
sinc benchmark: 61 parameters, batches of 1000). The budgets below are today's counts with
a small margin; raise them only for a feature that needs the ops, and say so.
"""

import collections

import numpy as np
import pytest

import graphfit as gf
from graphfit import layers, optimizers

# The traced step of the 1-20-1 tanh MLP with mean squared error (benchmarks/lm.py's sinc),
# in `fit`, whose batches fit one Jacobian chunk: no loop over chunks.
# The library: conds' branches and loops' bodies (10, 2 for the cond that cleans up an
# overflowed Jacobian only when JᵀJ's diagonal is not finite, and 2 for the cond that
# decomposes JᵀJ once per step when λ starts below its resolution).
MAX_FUNCTIONS = 14
MAX_CONTROL_FLOW = 7  # If / StatelessIf / While ops, nested ones included
# All nodes, the library's included: 737 since a trial's ftol or xtol is tested again at the
# next step's start against the undamped step (`convergence.deferred`, `damping_limited`:
# the eigenbasis of the step's decomposition, the deferred code's variable, the selects
# that confirm it; no new cond, loop or factorization; 686 before); 692 since the step
# writes the loss's unweighted element weights in closed form (no probe and tape), reshapes
# with static sizes instead of new axes and shape ops, builds its identity matrix from the
# static n, and reads variables without an extra Identity; 769 since the step counts its
# function and Jacobian evaluations (`optimizer.evaluations`, for `fit_report`); 752 since a
# step from a NaN or inf loss stops saying so (NOT_FINITE: finiteness tests in the gradient
# test, the trials and their code); 731 since a batch that `fit` says fits one chunk is
# linearized without the chunk loop (813 with it; 827 before the damped system's identity
# was built once per step, 1099 with pfor for the Dense layers' Jacobian, 1170 before the
# step stopped differentiating the loss itself, whose gradient b = Jᵀr the Jacobian already
# gives).
MAX_NODES = 750


@pytest.fixture(scope="module")
def traced():
    gf.set_seed(0)
    x = np.linspace(-1, 1, 200, dtype=np.float32)[:, None]
    y = np.sinc(10 * x).astype(np.float32)
    model = gf.Sequential([layers.Dense(20, activation="tanh"), layers.Dense(1)],
                          input_shape=(1,))
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    history = model.fit(x, y, batch_size=100, epochs=2, verbose=0)
    steps = model.compile_state.steps
    return steps, steps.train_step_graph().as_graph_def(), history


def _ops(graph_def):
    counts = collections.Counter(node.op for node in graph_def.node)
    for function in graph_def.library.function:
        counts.update(node.op for node in function.node_def)
    return counts


def test_the_step_trains_and_is_traced_once(traced):
    steps, _, history = traced
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert steps.tracing_counts()["train_step"] == 1


def test_the_traced_step_stays_within_its_op_budget(traced):
    _, graph_def, _ = traced
    ops = _ops(graph_def)
    control_flow = sum(count for op, count in ops.items() if op.endswith(("If", "While")))
    assert len(graph_def.library.function) <= MAX_FUNCTIONS, len(graph_def.library.function)
    assert control_flow <= MAX_CONTROL_FLOW, control_flow
    assert sum(ops.values()) <= MAX_NODES, sum(ops.values())
    # One factorization per trial, traced once (the loop's body); no symmetrizing transpose
    # of JᵀJ (Cholesky and eigh read its lower triangle).
    assert ops["Cholesky"] == 1 and ops["Transpose"] == 0, ops
    # One eigendecomposition per step at most, outside the trial loop; no pfor (whose
    # vectorized ops are named after its loop_body).
    assert ops["SelfAdjointEigV2"] == 1, ops
    assert ops["While"] == 1, ops  # the trial loop; no loop over chunks
    names = [n.name for n in graph_def.node] + [
        n.name for f in graph_def.library.function for n in f.node_def]
    assert not any("loop_body" in name for name in names)


# The traced step of a small Formula fit (Misra1a's model, float64, full batch, with geodesic
# acceleration): 1199 nodes since the Formula gives its per-example Jacobian through its layer
# hook (`example_jacobian`), 1663 with pfor.
MAX_FORMULA_NODES = 1250


def test_a_formula_step_takes_its_jacobian_from_the_layer_hook():
    x = np.linspace(77.6, 790.0, 14)[:, None]
    y = 240.0 * (1 - np.exp(-5.5e-4 * x))
    model = gf.Sequential([layers.Formula("b1*(1-exp(-b2*x))", params={"b1": 500.0, "b2": 1e-4},
                                          dtype="float64")], input_shape=(1,),
                          dtype="float64")
    model.compile(optimizer=optimizers.LevenbergMarquardt(), loss="mse")
    model.fit(x, y, batch_size=14, epochs=1, verbose=0)
    graph_def = model.compile_state.steps.train_step_graph().as_graph_def()
    ops = _ops(graph_def)
    assert sum(ops.values()) <= MAX_FORMULA_NODES, sum(ops.values())
    names = [n.name for n in graph_def.node] + [
        n.name for f in graph_def.library.function for n in f.node_def]
    assert not any("loop_body" in name for name in names)  # no pfor
