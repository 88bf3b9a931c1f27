"""The path of one `fit` stays short: from `Model.fit` to the update rule of a Dense model with
SGD, at most 15 graphfit frames in at most 5 files, with and without XLA (Keras 3's takes 15
in 3). The stack is recorded when the update rule runs (while the step is traced)."""

from __future__ import annotations

import pathlib
import traceback

import numpy as np
import pytest

import graphfit as gf
from graphfit import layers, optimizers

ROOT = pathlib.Path(gf.__file__).resolve().parents[1]  # the checkout: framework/ and the rest
MAX_FRAMES, MAX_FILES = 15, 5


def _graphfit_frame(frame) -> bool:
    path = pathlib.Path(frame.filename).resolve()
    return (path.is_relative_to(ROOT) and not path.is_relative_to(ROOT / "tests")
            and ".venv" not in path.parts and "site-packages" not in path.parts)


class StackRecordingSGD(optimizers.SGD):
    """SGD that records the graphfit frames above its update rule, once."""

    stack = None

    def update_rule(self, gradient, variable_value, slots, learning_rate, step):
        if StackRecordingSGD.stack is None:
            StackRecordingSGD.stack = [f for f in traceback.extract_stack()[:-1]
                                       if _graphfit_frame(f)]
        return super().update_rule(gradient, variable_value, slots, learning_rate, step)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_fit_reaches_the_update_rule_in_few_frames(jit_compile):
    StackRecordingSGD.stack = None
    model = gf.Sequential([layers.Dense(4)])
    model.compile(optimizer=StackRecordingSGD(0.1), loss="mse", jit_compile=jit_compile,
                  steps_per_execution=8)
    model.fit(np.ones((64, 3)), np.ones((64, 4)), batch_size=8, epochs=1, verbose=0)
    stack = StackRecordingSGD.stack
    fits = [i for i, f in enumerate(stack) if f.name == "fit" and f.filename.endswith("model.py")]
    assert fits, "Model.fit is not on the stack"
    path = stack[fits[-1]:]
    shown = "\n".join(f"{pathlib.Path(f.filename).relative_to(ROOT)}:{f.lineno} {f.name}"
                      for f in path)
    assert path[-1].name == "_update_variable" or path[-1].name == "apply_gradients", shown
    assert len(path) <= MAX_FRAMES, f"{len(path)} frames:\n{shown}"
    assert len({f.filename for f in path}) <= MAX_FILES, shown
