"""Set-up shared by the framework's tests."""

import pytest


@pytest.fixture
def train_step_traces(monkeypatch):
    """Each trace of the default train step while the test runs, in order: "probed copy"
    (`model.flops()` tracing its own copy of the step) or "compiled" (the model's compiled
    train step). A trace calls `steps.train_step` once; a traced step runs without Python."""
    import tensorflow as tf

    from graphfit.training import steps

    seen = []
    original = steps.train_step

    @tf.autograph.experimental.do_not_convert
    def counted(model, data, **kwargs):
        seen.append("probed copy" if kwargs.get("probe") is not None else "compiled")
        return original(model, data, **kwargs)

    monkeypatch.setattr(steps, "train_step", counted)
    return seen
