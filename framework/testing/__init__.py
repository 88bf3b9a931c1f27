"""graphfit.testing: the layer and optimizer contracts, usable on your own layers.

Every built-in layer, model and optimizer passes these checks (the conformance test runs
each registered class with its arguments from `LAYER_EXAMPLES` / `OPTIMIZER_EXAMPLES`). They
need no pytest: a failed check raises an `AssertionError` that names it, so one call in a
script checks a layer of your own.

Example:

    >>> import numpy as np, graphfit as gf
    >>> @gf.register_layer
    ... class TimesTwo(gf.Layer):
    ...     def call(self, x, training=False):
    ...         return 2.0 * x
    >>> x = np.ones((2, 3), "float32")
    >>> layer = gf.testing.run_layer_test(TimesTwo, {}, x, expected_output_shape=(2, 3),
    ...                                   expected_trainable=0, expected_non_trainable=0,
    ...                                   reference=lambda layer, x: 2 * x)
"""

from __future__ import annotations

from graphfit.testing.examples import (
    LAYER_EXAMPLES,
    OPTIMIZER_EXAMPLES,
    LayerExample,
    OptimizerExample,
)
from graphfit.testing.fit_contract import run_fit_optimizer_test
from graphfit.testing.jacobian_hook import check_example_jacobian
from graphfit.testing.layer_contract import (
    assert_gradients_match_keras,
    copy_weights_to_keras,
    registered_name,
    run_layer_test,
)
from graphfit.testing.optimizer_contract import assert_matches_keras, run_optimizer_test

__all__ = [
    "run_layer_test",
    "run_optimizer_test",
    "run_fit_optimizer_test",
    "assert_matches_keras",
    "assert_gradients_match_keras",
    "copy_weights_to_keras",
    "registered_name",
    "LayerExample",
    "OptimizerExample",
    "LAYER_EXAMPLES",
    "OPTIMIZER_EXAMPLES",
    "check_example_jacobian",
]
