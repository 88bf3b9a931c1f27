"""Derivatives beyond the loss gradient: the Jacobian of any named node, and per-example
(unaggregated) gradients. See `graphfit.autodiff.api`."""

from graphfit.autodiff.api import jacobian, per_example_gradients, variable_key
from graphfit.autodiff.node_jacobian import Activation, activation

__all__ = ["jacobian", "per_example_gradients", "variable_key", "activation", "Activation"]
