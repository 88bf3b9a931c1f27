"""The damped Gauss–Newton step of Levenberg–Marquardt, and the damping's update.

With `A = CᵀC` (n × n), `b = ½∇f` and the damping matrix `D` (diagonal), the step solves

    (A + λ D) δ = −b.

It is solved in the scaled variables `u = D^½ δ`, `(Ã + λ I) u = −D^-½ b` with
`Ã = D^-½ A D^-½`, by Cholesky. Marquardt's scaling is MINPACK's: `D` is the running maximum
of `diag(A)` over the steps so far (`running_scale`; with geodesic acceleration the earlier
maximum is halved per pass over the data, `scale_memory`), so a parameter whose column of J
has collapsed (a saturated exponential, a term that has faded) keeps the damping its (recent)
effect earned instead of being free to jump to infinity. A float64 JᵀJ shifts each column
of `Ã` by `max(λ, n·ε·Ã_jj)`, its own resolution where λ is below it, and λ's floor is the
least λ that still shifts a column (`least_damping`): a column whose curvature fell far below
its running scale is not damped by the largest column's resolution. A float32 JᵀJ keeps one
resolution: below the damping at which rounding in JᵀJ can make the matrix indefinite, an
eigendecomposition with the negative eigenvalues clipped to zero solves it, computed once
per step. The same
decomposition solves a trial whose Cholesky factorization fails (it yields NaN, which
TensorFlow reports instead of raising) within `EIGEN_MARGIN` times the resolution; further
above, such a trial is rejected.

In the underdetermined case (m rows < n parameters) the same step comes from the m × m system:
`δ = −D⁻¹ Cᵀ (C D⁻¹ Cᵀ + λ I)⁻¹ ρ`, where `Cᵀρ = b`; `C` and `ρ` arrive padded with zero rows to
n, which leaves that solution unchanged.

The damping follows Nielsen (1999): after an accepted step with gain ratio
`ρ_gain = (actual reduction) / (predicted reduction)`,
`λ ← λ · max(1/3, 1 − (2ρ_gain − 1)³)` and `ν ← 2`; after a rejected one `λ ← λ ν`, `ν ← 2ν`.
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["scaling", "running_scale", "ScaledSystem", "nielsen_update", "least_damping",
           "MAX_DAMPING", "EIGEN_MARGIN", "SCALE_MEMORY", "scale_memory"]

# Below this multiple of the resolution `ScaledSystem` decomposes JᵀJ once per step, before
# the trials, so that a trial whose Cholesky fails there still has the eigen solve.
EIGEN_MARGIN = 10.0

# λ never grows past this (relative to the largest scaled diagonal): a larger one means that
# no step reduces the loss, which the optimizer reports as convergence.
MAX_DAMPING = 1e16

# The running scale's memory with geodesic acceleration: each pass over the data halves the
# earlier maximum before comparing (each step, when nothing says how long a pass is).
# MINPACK keeps the maximum forever (1.0, plain steps here); on NIST's MGH10 from start 1 the
# columns of b2 and b3 shrink a thousandfold as the fit comes down from 1e3 times the data,
# and the kept maximum froze them for thousands of steps. 0.3 to 0.7 fit the same 27 NIST
# problems. Without the acceleration the memory alone does not get MGH10 there and slows a
# float32 minibatch fit (docs/guides/levenberg_marquardt.md, "Scaling and the solve").
SCALE_MEMORY = 0.5


def scale_memory(steps_per_pass) -> tf.Tensor:
    """The running scale's memory per step: `SCALE_MEMORY` per pass over the data.

    A minibatch's `diag(JᵀJ)` varies from batch to batch; halved at every step the maximum
    followed each batch rather than the data, and minibatch fits took more epochs
    (docs/guides/levenberg_marquardt.md, "Geodesic acceleration"). `fit` says how many steps a pass
    has (`StepBatch.steps_per_pass`: the training data's batches, whatever `steps_per_epoch`
    says, or an endless dataset's epoch). Outside `fit` (None), and for a dataset of unknown
    length (0), each step is a pass, so a resumed fit steps as an unbroken one. A full batch
    is one step per pass either way.

    Args:
        steps_per_pass: an int scalar tensor, or None.

    Returns:
        A float64 scalar tensor.

    Example:

        >>> import tensorflow as tf
        >>> round(float(scale_memory(tf.constant(4, tf.int64)) ** 4), 12)
        0.5
        >>> float(scale_memory(None)), float(scale_memory(tf.constant(0, tf.int64)))
        (0.5, 0.5)
    """
    memory = tf.constant(SCALE_MEMORY, tf.float64)
    if steps_per_pass is None:
        return memory
    steps = tf.cast(steps_per_pass, tf.float64)
    return tf.where(steps > 0, memory ** (1.0 / tf.maximum(steps, 1.0)), memory)


def scaling(diag: tf.Tensor, damping: str, eps: float) -> tf.Tensor:
    """The damping matrix's diagonal D.

    "marquardt": `diag(A)`, floored only far below any entry that matters, at
    `max(1e-300 · max(diag(A)), 1e-300)` (a parameter without effect on the loss, a zero
    column, would otherwise make D singular); "identity": ones. `eps` is not used by either
    (kept for the callers' signature).

    A floor relative to the largest entry at the dtype's epsilon damped parameters whose
    columns are small only in their units: on MGH10 `b1` falls to 1e-13 and its entry grows
    past 1e34, so ε · max(D) was far above the entries of `b2` and `b3` and froze them.
    """
    del eps
    if damping == "identity":
        return tf.ones_like(diag)
    floor = tf.maximum(tf.reduce_max(diag) * 1e-300, tf.constant(1e-300, diag.dtype))
    return tf.maximum(diag, floor)


def running_scale(previous: tf.Tensor, diag: tf.Tensor, memory: float = 1.0) -> tf.Tensor:
    """MINPACK's scale (`lmder`'s `diag`, squared): the running maximum of `diag(JᵀJ)`, the
    earlier maximum multiplied by `memory` at each step.

    Args:
        previous: the running scale so far (zeros before the first step).
        diag: `diag(JᵀJ)` of this step.
        memory: 1.0 keeps the maximum (MINPACK's); `SCALE_MEMORY` halves it per step, as
            the optimizer does with geodesic acceleration.

    Returns:
        `max(memory · previous, diag)`, elementwise (a non-finite entry of `diag` leaves
        `previous`); `scaling` floors it as it floors `diag`.

    Example:

        >>> import tensorflow as tf
        >>> old, new = tf.constant([4.0, 1.0]), tf.constant([1.0, 3.0])
        >>> running_scale(old, new).numpy().tolist(), running_scale(old, new, 0.5).numpy().tolist()
        ([4.0, 3.0], [2.0, 3.0])
    """
    # A Python 1.0 (MINPACK's) adds no op; a tensor memory is multiplied.
    kept = previous if isinstance(memory, float) and memory == 1.0 else memory * previous
    return tf.maximum(kept, tf.where(tf.math.is_finite(diag), diag, previous))


def least_damping(ratios: tf.Tensor, n_eps) -> tf.Tensor:
    """λ's floor: `n·ε` times the smallest positive `diag(A)_j / D_j` (along the last axis;
    the largest where none is positive).

    Each column of `P = D^-½ A D^-½` is shifted by `max(λ, n·ε·P_jj)` (`ScaledSystem.solve`):
    by λ, or by its own resolution, the least shift that keeps that column's Cholesky pivot
    above the rounding in JᵀJ. Below this floor λ shifts no column, so it stops there. The
    earlier floor, the resolution `n·ε·max_j P_jj`, damped every column whose curvature had
    fallen below its running scale `D_j` by `max_j P_jj / P_jj`: with MINPACK's scale, which
    never forgets (plain steps), a·exp(b·x) from a far start kept `a` damped about threefold
    for thousands of steps (tests/fitting/test_far_start.py).

    Example:

        >>> import tensorflow as tf
        >>> float(least_damping(tf.constant([1.0, 1e-16, 0.0], tf.float64), 2.0))
        2e-16
    """
    largest = tf.reduce_max(ratios, -1, keepdims=True)
    return n_eps * tf.reduce_min(tf.where(ratios > 0, ratios, largest), -1)


class ScaledSystem:
    """The damped system of one step, ready to solve for any λ.

    Args:
        matrix: `A` (overdetermined) or `C` padded to n × n (underdetermined).
        b: half the loss gradient (overdetermined) or `Cᵀρ` (underdetermined).
        rho: ρ padded to n (only read in the underdetermined case).
        d: the damping diagonal D.
        under: a bool tensor, the underdetermined case.
        resolution: the least λ at which the rounding in JᵀJ cannot make `P + λI`
            indefinite: `n · ε · scale`, ε that of the dtype JᵀJ's products were computed in
            (0: trust Cholesky at every λ). Below it the eigen solve runs without a Cholesky
            attempt, which would fail, and TensorFlow logs a warning for each failure: near a
            minimum of a float32 model, on most trials.
        first_damping: λ of the step's first trial, or None. λ only grows from trial to
            trial within a step, so when the first is below `EIGEN_MARGIN` times the
            resolution the eigendecomposition is computed once, here, and every trial that
            needs it reuses it (near a float32 minimum most trials do: one `eigh` of a 61 × 61
            matrix costs ten Cholesky factorizations). None: a trial decomposes when it needs
            to.
        decompose: a bool tensor, or None: decompose once per step also where λ does not
            start near the resolution, for `undamped_step` (the convergence test of a
            deferred ftol or xtol, `convergence.damping_limited`); the trials still use the
            decomposition only near the resolution, as without it.
        column_resolution: each column's own resolution, `n·ε·P_jj` (P's diagonal is
            `diag(A)/D`), or None. Given (a float64 JᵀJ, and λ's floor `least_damping`),
            each column of P is shifted by `max(λ, column_resolution_j)` and Cholesky
            solves at every λ (the eigen solve, where it fails, at no less than the
            resolution): the eigendecomposition of P cannot resolve a column whose
            curvature has fallen far below its running scale, Cholesky (invariant to the
            scaling) can. None (a float32 JᵀJ, whose eigen solve below the resolution
            converges in fewer steps near a minimum than a shift of `n·ε₃₂` per column
            allows): one shift, `max(λ, resolution)`, and below the resolution the eigen
            solve at λ.
    """

    def __init__(self, matrix, b, rho, d, under, resolution=0.0, first_damping=None,
                 decompose=None, column_resolution=None):
        self.matrix, self.b, self.d, self.under = matrix, b, d, under
        self.resolution = tf.cast(resolution, matrix.dtype)
        inv_sqrt = tf.math.rsqrt(d)
        self.inv_sqrt_d = inv_sqrt

        def over():
            scaled = matrix * tf.reshape(inv_sqrt, [-1, 1]) * tf.reshape(inv_sqrt, [1, -1])
            return scaled, -inv_sqrt * b

        def wide():
            scaled_c = matrix * tf.reshape(inv_sqrt, [1, -1])
            return tf.matmul(scaled_c, scaled_c, transpose_b=True), -rho

        # P is Ã (over) or C D⁻¹ Cᵀ (under, zero-padded); rhs its right-hand side. Cholesky
        # and eigh read only its lower triangle, so rounding asymmetry does not matter.
        self.p, self.rhs = tf.cond(under, wide, over)
        # The m × m form keeps the one resolution (its columns are not the parameters').
        self.column_resolution = None if column_resolution is None else tf.where(
            under, self.resolution, tf.cast(column_resolution, matrix.dtype))
        # Built once, here: inside the trial loop tf.eye is five ops per trial.
        # (n static, as a Python int: no shape ops.)
        self._eye = tf.eye(self.p.shape[0] or tf.shape(self.p)[0], dtype=self.p.dtype)
        self._eigen = self._decomposition = None
        if first_damping is not None:
            # Decomposed also a little above the resolution, where Cholesky can still fail
            # (JᵀJ's rounding grows with the rows of a chunk: float32 chunks of thousands of
            # rows fail at up to three times it). Far above it, a Cholesky that fails (an
            # overflowed JᵀJ) solves to NaN: the trial is rejected and λ grows. A second eigh
            # inside the trial loop, for that rare case, would enlarge every traced step.
            n = self.p.shape[0] or tf.shape(self.p)[0]
            near = first_damping < EIGEN_MARGIN * self.resolution
            wanted = near if decompose is None else near | decompose
            self._decomposition = tf.cond(wanted, self._decompose, lambda: (
                tf.fill([n], tf.constant(float("nan"), self.p.dtype)),
                tf.zeros([n, n], self.p.dtype)))
            # (Where only `decompose` asked for it, a trial whose Cholesky fails also solves
            # by it: far above the resolution that is an overflowed JᵀJ, NaN either way.)
            self._eigen = self._decomposition

    def _decompose(self):
        """`(values, vectors)` of P; values NaN when P is not finite (an overflowed JᵀJ:
        eigh would raise, so it decomposes the identity instead)."""
        finite = tf.reduce_all(tf.math.is_finite(self.p))
        safe = tf.where(finite, self.p, self._eye)
        values, vectors = tf.linalg.eigh(safe)
        return tf.where(finite, values, tf.constant(float("nan"), values.dtype)), vectors

    def solve(self, damping, b=None) -> tuple[tf.Tensor, tf.Tensor]:
        """δ = −(A + λD)⁻¹ b for the damping λ (absolute, same dtype), and whether Cholesky
        was used. `b` defaults to the step's own (half the gradient); another `b` (geodesic
        acceleration's `Jᵀ r_vv`) is only solved for in the overdetermined form (the
        underdetermined one would need its rows: the result is then NaN)."""
        rhs = self.rhs if b is None else tf.where(
            self.under, tf.fill(tf.shape(b), tf.constant(float("nan"), b.dtype)),
            -self.inv_sqrt_d * b)
        # Each column shifted by λ, or by its own resolution where that is larger: at or
        # above the resolution that is λ everywhere.
        # (With one resolution, below it the factor of the safely shifted matrix goes
        # unused: the eigen solve at λ takes over.)
        uniform = self.column_resolution is None
        factor = tf.linalg.cholesky(self.p + self._eye * (
            tf.maximum(damping, self.resolution) if uniform else self.shift(damping)))
        ok = tf.reduce_all(tf.math.is_finite(tf.linalg.band_part(factor, -1, 0)))
        if uniform:
            ok &= damping >= self.resolution
        # Eigenvalues below the resolution are rounding: with column resolutions, λ below
        # it would magnify them.
        eigen_damping = damping if uniform else tf.maximum(damping, self.resolution)

        def cholesky():
            # Reshapes, not new axes and slices: two ops each instead of four, per trial.
            return tf.reshape(tf.linalg.cholesky_solve(factor, tf.reshape(rhs, [-1, 1])), [-1])

        def eigen(values, vectors):
            # A non-finite P gives NaN, which the trial rejects.
            inverse = 1.0 / (tf.maximum(values, 0.0) + eigen_damping)
            return tf.linalg.matvec(vectors, inverse * tf.linalg.matvec(vectors, rhs,
                                                                        transpose_a=True))

        decomposition = self._decompose if self._eigen is None else lambda: self._eigen
        v = tf.cond(ok, cholesky, lambda: eigen(*decomposition()))
        # Both back-transformations cost O(n²), far below the solve: selecting one is cheaper
        # per trial than a tf.cond, which the trial loop would run and trace every time.
        wide = tf.linalg.matvec(self.matrix, v, transpose_a=True) / self.d
        return tf.where(self.under, wide, self.inv_sqrt_d * v), ok

    def shift(self, damping) -> tf.Tensor:
        """The damping matrix is `D·shift(λ)`: `max(λ, column_resolution_j)` per column, λ
        itself wherever λ ≥ the resolution, and without column resolutions."""
        if self.column_resolution is None:
            return damping
        return tf.maximum(damping, self.column_resolution)

    def undamped(self, column_norms=None) -> tuple[tf.Tensor, tf.Tensor]:
        """`(‖S δ‖, predicted reduction)` of the Gauss–Newton step `δ = −(A + λ₀D)⁻¹ b` at
        the least damping the solve resolves, λ₀ = the resolution, through the step's
        eigendecomposition of P with negative eigenvalues clipped (as a trial's eigen
        solve); for `convergence.damping_limited`.

        A system made with `first_damping` reuses the decomposition made before the trials:
        NaN unless `decompose` held there (or λ started near the resolution); without, it
        decomposes here.

        Args:
            column_norms: S, or None for `S = D^½` (Marquardt's damping), whose lengths and
                prediction the eigenbasis gives without forming δ: with `P = V Λ Vᵀ` and
                `w = (Λ + λ₀)⁻¹ Vᵀ rhs`, `‖D^½δ‖² = Σ w²` and the prediction
                `Σ w² (Λ + 2λ₀)`; in the underdetermined form each `w²` is weighted by Λ
                (`δ = D⁻¹Cᵀ V w`, `‖D^½δ‖² = wᵀΛw`, `‖Cδ‖² = wᵀΛ²w`).
        """
        values, vectors = (self._decompose() if self._decomposition is None
                           else self._decomposition)
        values = tf.maximum(values, 0.0)
        w = tf.linalg.matvec(vectors, self.rhs, transpose_a=True) / (values + self.resolution)
        if column_norms is None:
            square = tf.square(w)
            weights = tf.where(self.under, values * square, square)
            return (tf.sqrt(tf.reduce_sum(weights)),
                    tf.reduce_sum(weights * (values + 2.0 * self.resolution)))
        v = tf.linalg.matvec(vectors, w)
        wide = tf.linalg.matvec(self.matrix, v, transpose_a=True) / self.d
        delta = tf.where(self.under, wide, self.inv_sqrt_d * v)
        return (tf.norm(column_norms * delta),
                self.predicted_reduction(delta, self.resolution))

    def curvature(self, delta) -> tf.Tensor:
        """`δᵀ A δ` = ‖C δ‖² (A = JᵀJ overdetermined, C padded underdetermined)."""
        product = tf.linalg.matvec(self.matrix, delta)
        return tf.where(self.under, tf.reduce_sum(tf.square(product)),
                        tf.reduce_sum(delta * product))

    def predicted_reduction(self, delta, damping) -> tf.Tensor:
        """`f − q(δ)` for the quadratic model `q` of `f = ‖r‖²`: `δᵀAδ + 2 δᵀ(D·shift)δ`
        (≥ 0; `shift(λ)` is λ at or above the resolution: `δᵀAδ + 2λ δᵀDδ`)."""
        return self.curvature(delta) + 2.0 * tf.reduce_sum(
            self.shift(damping) * self.d * tf.square(delta))


def nielsen_update(damping, growth, gain, accepted):
    """Nielsen's rule: `(λ, ν)` after a trial step with gain ratio `gain`."""
    two = tf.constant(2.0, damping.dtype)
    shrink = tf.maximum(tf.constant(1.0 / 3.0, damping.dtype),
                        1.0 - tf.pow(2.0 * gain - 1.0, 3))
    new_damping = tf.where(accepted, damping * shrink, damping * growth)
    new_growth = tf.where(accepted, two, growth * two)
    return new_damping, new_growth
