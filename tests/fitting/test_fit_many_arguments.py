"""`fit_many`'s argument checks (framework/fitting/arguments.py): a clear ValueError naming
the argument and the data set, never a raw NumPy or parser error, nor a silent fit that
stops at its starts."""

import numpy as np
import pytest

from graphfit import fitting

F = "a*exp(-k*x) + c"
P = {"a": 1.0, "k": 0.3, "c": 0.1}
X1, X2 = np.linspace(0, 5, 40), np.linspace(0, 8, 25)
Y1, Y2 = 2.0 * np.exp(-0.7 * X1) + 0.1, 1.5 * np.exp(-0.4 * X2) + 0.1


@pytest.mark.parametrize("call, match", [
    (lambda: fitting.fit_many(F, X1, np.stack([Y1, np.where(X1 > 4, np.nan, Y1)]), p0=P),
     r"data set\(s\) 1 \(y\).*mask=np.isfinite\(y\)"),
    (lambda: fitting.fit_many(F, np.where(X1 > 4, np.inf, X1)[None], Y1[None], p0=P),
     r"data set\(s\) 0 \(x\)"),
    (lambda: fitting.fit_many(F, np.where(X1 > 4, np.nan, X1)[None], Y1[None], p0=P,
                              mask=np.isfinite(Y1)[None]),
     r"unmasked points of data set\(s\) 0 \(x\).*mask False"),
    (lambda: fitting.fit_many(F, [X1, X2], [Y1, Y2[:-1]], p0=P),
     r"x: data set 1 has 24 points in y.*x\[1\] of shape \(25,\)"),
    (lambda: fitting.fit_many(F, [X1, X2], [Y1], p0=P),
     r"x as a list needs one array per data set of y \(1 data set\(s\)\)\. Received: 2"),
    (lambda: fitting.fit_many(F, [X1, X2], [Y1, Y2], p0=P, sigma=[np.ones(40), np.ones(24)]),
     r"sigma: data set 1"),
    (lambda: fitting.fit_many(F, [X1, X2], [Y1, Y2], p0={
        **P, "c": {"value": np.array([0.1, 0.1, 0.1]), "vary": False}}),
     r"p0\['c'\]: a start given per data set needs one value per data set \(2\)"),
    (lambda: fitting.fit_many(F, X1, Y1[None], p0={"a": 1.0, "k": 0.3}),
     r"p0 lacks a start for 'c'.*keys \['a', 'k'\]"),
    (lambda: fitting.fit_many(F, [X1, X2[:2]], [Y1, Y2[:2]], p0=P),
     r"\(3: \['a', 'k', 'c'\]\)"),
])
def test_bad_arguments_get_a_clear_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_masked_nan_still_fits_and_report_indices_are_checked():
    y = np.stack([Y1, np.where(X1 > 4, np.nan, Y1)])
    fits = fitting.fit_many(F, X1, y, p0=P, mask=np.isfinite(y))
    assert fits.converged.all(), fits.reasons
    np.testing.assert_allclose(fits.params, [[2.0, 0.7, 0.1]] * 2, rtol=1e-6)
    assert fits.report(-1).to_dict() and fits.curve(1).converged
    for index, match in ((2, r"index 2 is out of range: there are 2 data sets \(0 to 1"),
                         (-3, "out of range"), (1.0, r"must be an int.*Received: 1\.0"),
                         ("1", "must be an int")):
        with pytest.raises(ValueError, match=match):
            fits.report(index)
    with pytest.raises(ValueError, match="out of range"):
        fits.curve(5)
    with pytest.raises(ValueError, match="out of range"):
        fits.strong_correlations(5)
