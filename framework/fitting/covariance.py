"""The parameters' covariance `(JᵀWJ)⁻¹`, and which parameters the data do not determine.

One algorithm, for both places that need it: `fit_report` (a fitted model, from the weighted
Jacobian `W^½ J`) and `fit_many`/`fit_curve` (from the `JᵀWJ` their loops return). The
columns are scaled to unit length first, so the rank test does not depend on the
parameters' units. A singular value of the scaled matrix below `tolerance` times the largest
marks the parameters of its singular vector as undetermined (only a combination of them is
fitted): they get no standard error, and the others' come from the pseudo-inverse, so a
model such as `a*b*exp(-k*x)` still reports `k` with its standard error.

From `JᵀWJ` the singular values are the square roots of its eigenvalues, which rounding
knows only to about `p·eps` of the largest: the tolerance there is `sqrt(p·eps)` (2.6e-8
for 3 parameters), against `RANK_TOLERANCE` (1e-12) from the Jacobian itself.

Example:

    >>> import numpy as np
    >>> jacobian = np.array([[1.0, 2.0, 0.0], [2.0, 4.0, 1.0], [3.0, 6.0, 0.0]])
    >>> solved = from_jacobian(jacobian, ["a", "b", "k"])
    >>> solved["undetermined"], solved["free"]
    ([['a', 'b']], ['k'])
    >>> from_gram(jacobian.T @ jacobian, ["a", "b", "k"])["undetermined"]
    [['a', 'b']]
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["from_jacobian", "from_gram", "RANK_TOLERANCE", "ILL_CONDITIONED"]

# Singular values of the column-scaled, weighted Jacobian below this fraction of the largest
# mark undetermined parameters.
RANK_TOLERANCE = 1e-12
# A condition number above this gets a note (fewer correct digits in the standard errors).
ILL_CONDITIONED = 1e8


def from_jacobian(weighted: np.ndarray, names: list[str]) -> dict[str, Any]:
    """`(JᵀWJ)⁻¹` over the determined parameters from the weighted Jacobian `W^½ J`
    `[points, p]` (see the module). Returns `{"covariance": [q, q], "free": the q determined
    names, "undetermined": groups of names, "condition": the scaled matrix's condition number
    or None, "notes": [text]}`."""
    if not names:
        return _solve(np.zeros(0), np.zeros((0, 0)), np.zeros(0), [], RANK_TOLERANCE)
    weighted = np.asarray(weighted, np.float64)
    norms = np.linalg.norm(weighted, axis=0)
    scaled = weighted / np.where(norms > 0, norms, 1.0)
    _, singular, vt = np.linalg.svd(scaled, full_matrices=False)
    return _solve(singular, vt, norms, list(names), RANK_TOLERANCE)


def from_gram(jtj: np.ndarray, names: list[str]) -> dict[str, Any]:
    """`from_jacobian` from `JᵀWJ` `[p, p]` (finite) instead of the Jacobian."""
    jtj = np.asarray(jtj, np.float64)
    if not names:
        return _solve(np.zeros(0), np.zeros((0, 0)), np.zeros(0), [], RANK_TOLERANCE)
    norms = np.sqrt(np.maximum(np.diagonal(jtj), 0.0))
    safe = np.where(norms > 0, norms, 1.0)
    values, vectors = np.linalg.eigh(jtj / np.outer(safe, safe))
    singular = np.sqrt(np.maximum(values[::-1], 0.0))
    tolerance = max(RANK_TOLERANCE, math.sqrt(len(names) * np.finfo(np.float64).eps))
    return _solve(singular, vectors[:, ::-1].T, norms, list(names), tolerance)


def _solve(singular, vt, norms, names, tolerance: float) -> dict[str, Any]:
    notes: list[str] = []
    if not names:
        return {"covariance": np.zeros((0, 0)), "free": [], "undetermined": [],
                "condition": None, "notes": notes}
    zero = [n for n, c in zip(names, norms) if c == 0]
    largest = singular[0] if singular.size else 0.0
    small = singular <= tolerance * largest
    undetermined: list[list[str]] = [[n] for n in zero]
    for row in vt[small] if largest > 0 else vt:
        group = [n for n, v in zip(names, row) if abs(v) > 0.1 and n not in zero]
        if group and group not in undetermined:
            undetermined.append(group)
    if undetermined:
        notes.append("the data do not determine " + "; ".join(
            " and ".join(g) + (" (only a combination of them)" if len(g) > 1 else "")
            for g in undetermined) + ": no standard error for them")
    kept = singular > tolerance * largest
    inverse = (vt[kept].T / singular[kept] ** 2) @ vt[kept]
    condition = float(singular[0] / singular[-1]) if singular[-1] > 0 else math.inf
    if not undetermined and condition > ILL_CONDITIONED:
        notes.append(f"ill-conditioned: the scaled Jacobian's condition number is "
                     f"{condition:.2g}; the standard errors have fewer correct digits")
    bad = {n for g in undetermined for n in g}
    keep = [i for i, n in enumerate(names) if n not in bad]
    inverse = inverse[np.ix_(keep, keep)] / np.outer(norms[keep], norms[keep])
    return {"covariance": inverse, "free": [names[i] for i in keep],
            "undetermined": undetermined, "condition": condition, "notes": notes}
