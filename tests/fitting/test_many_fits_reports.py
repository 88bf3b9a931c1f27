"""The fit report per data set of `fitting.fit_many` (`ManyFits.statistics`, `report(i)`).

The reference is `fitting.fit_report` of a `Formula` model holding the same fitted
parameters, on the same data set alone: the same numbers to 1e-8 relative.
"""

import numpy as np
import pytest

import graphfit as gf
from graphfit import fitting, layers
from tests.optimizers.levenberg_marquardt import nist

MISRA = "b1*(1-exp(-b2*x))"
NUMBERS = ("chi_square", "reduced_chi_square", "rss", "residual_std", "r_squared", "aic",
           "bic")
# Lines the single-fit report (no optimizer, no history) does not have.
FIT_LINES = ("    # fitting method", "    # steps", "    stopped:", "    # function evals",
             "    # Jacobian evals")


@pytest.fixture(scope="module")
def curves():
    """Misra1a's certified data set and two noisy variants of it."""
    problem = nist.read(nist.DATA / "Misra1a.dat")
    x, y = problem.x[:, 0], problem.y.ravel()
    rng = np.random.default_rng(3)
    ys = np.stack([y, y * (1 + 0.02 * rng.standard_normal(y.shape)),
                   y + 5.0 * rng.standard_normal(y.shape)])
    return x, ys, 0.5 + x / x.max()


def _single_report(x, y, values, sample_weight=None, absolute_sigma=False):
    formula = layers.Formula(MISRA, params=dict(values), dtype="float64")
    model = gf.Sequential([formula], input_shape=(1,), dtype="float64")
    return fitting.fit_report(model, x, y, sample_weight=sample_weight,
                              absolute_sigma=absolute_sigma)


@pytest.mark.parametrize("weighted,absolute", [(False, False), (True, False), (True, True)])
def test_per_data_set_reports_equal_the_single_fit_report(curves, weighted, absolute):
    x, ys, sigma = curves
    fits = fitting.fit_many(MISRA, x, ys, p0={"b1": 500.0, "b2": 1e-4},
                            sigma=sigma if weighted else None, absolute_sigma=absolute)
    assert fits.converged.all(), fits.reasons
    table = fits.statistics()
    for i in range(len(ys)):
        single = _single_report(x, ys[i], fits.curve(i).values,
                                1.0 / sigma ** 2 if weighted else None, absolute)
        many = fits.report(i)
        for key in ("points", "varying_parameters", "dof"):
            assert many.statistics[key] == single.statistics[key] == table[key][i]
        for key in NUMBERS:
            np.testing.assert_allclose(many.statistics[key], single.statistics[key],
                                       rtol=1e-8, err_msg=key)
            np.testing.assert_allclose(table[key][i], single.statistics[key], rtol=1e-8)
        np.testing.assert_allclose(many.statistics["condition_number"],
                                   single.statistics["condition_number"], rtol=1e-6)
        np.testing.assert_allclose([p.stderr for p in many.parameters],
                                   [p.stderr for p in single.parameters], rtol=1e-8)
        np.testing.assert_allclose(many.covariance, single.covariance, rtol=1e-8)
        np.testing.assert_allclose(many.correlation, single.correlation, rtol=1e-8)
        assert [c[:2] for c in many.strong_correlations] == \
            [c[:2] for c in single.strong_correlations] == [("b1", "b2")]
        # ManyFits' batched inverse and the report's (covariance.from_gram) agree to rounding.
        assert [c[:2] for c in fits.strong_correlations(i)] == [("b1", "b2")]
        np.testing.assert_allclose([c[2] for c in fits.strong_correlations(i)],
                                   [c[2] for c in many.strong_correlations], rtol=1e-10)
        np.testing.assert_allclose(many.covariance, fits.covariance[i], rtol=1e-10)
        text = [line for line in str(many).splitlines() if not line.startswith(FIT_LINES)]
        assert text == str(single).splitlines()
        assert many.fit["stop_reason"] == fits.reasons[i] and many.to_json()


def test_a_failed_data_set_reports_no_standard_errors(curves):
    x, ys, _ = curves
    xs = np.repeat(x[None], 2, axis=0)
    xs[1, 3] = -1e7  # the model overflows there: this data set's fit is not finite
    fits = fitting.fit_many(MISRA, xs, ys[:2], p0={"b1": 500.0, "b2": 1e-4})
    statistics = fits.statistics()
    assert np.isfinite(statistics["aic"][0]) and not np.isfinite(statistics["r_squared"][1])
    report = fits.report(1)
    assert [p.stderr for p in report.parameters] == [None, None]
    assert report.to_dict()["statistics"]["chi_square"] is None
    assert "not finite" in str(report)
