"""Levenberg–Marquardt: the optimizer, its damping, Jacobians and residuals.

The theory and the choices behind each piece are in docs/guides/levenberg_marquardt.md.
"""

from graphfit.optimizers.levenberg_marquardt.optimizer import LevenbergMarquardt
from graphfit.optimizers.levenberg_marquardt.residuals import ResidualLoss

__all__ = ["LevenbergMarquardt", "ResidualLoss"]
