"""CallbackList: dispatch order and arguments, stages, default callbacks, batch-hook detection."""

import doctest
import io

import pytest

import graphfit.callbacks as callbacks_package
from graphfit.callbacks import Callback, CallbackList, History, ProgressBar
from graphfit.callbacks import callback as callback_module
from graphfit.callbacks import callback_list as callback_list_module
from graphfit.callbacks import history as history_module
from graphfit.callbacks import progress as progress_module
from graphfit.core.registry import CALLBACKS


class Recorder(Callback):
    """Writes (name, hook, arguments) of every hook call into a shared journal."""

    def __init__(self, name, journal):
        super().__init__()
        self.name = name
        self.journal = journal

    def _note(self, hook, *args, **kwargs):
        self.journal.append((self.name, hook, args, kwargs))

    def on_train_begin(self, logs=None):
        self._note("on_train_begin", logs)

    def on_train_end(self, logs=None):
        self._note("on_train_end", logs)

    def on_epoch_begin(self, epoch, logs=None):
        self._note("on_epoch_begin", epoch, logs)

    def on_epoch_end(self, epoch, logs=None):
        self._note("on_epoch_end", epoch, logs)

    def on_train_batch_begin(self, batch, logs=None):
        self._note("on_train_batch_begin", batch, logs)

    def on_train_batch_end(self, batch, logs=None):
        self._note("on_train_batch_end", batch, logs)

    def on_test_begin(self, logs=None, stage="test"):
        self._note("on_test_begin", logs, stage=stage)

    def on_test_end(self, logs=None, stage="test"):
        self._note("on_test_end", logs, stage=stage)

    def on_test_batch_begin(self, batch, logs=None, stage="test"):
        self._note("on_test_batch_begin", batch, logs, stage=stage)

    def on_test_batch_end(self, batch, logs=None, stage="test"):
        self._note("on_test_batch_end", batch, logs, stage=stage)

    def on_predict_begin(self, logs=None):
        self._note("on_predict_begin", logs)

    def on_predict_end(self, logs=None):
        self._note("on_predict_end", logs)

    def on_predict_batch_begin(self, batch, logs=None):
        self._note("on_predict_batch_begin", batch, logs)

    def on_predict_batch_end(self, batch, logs=None):
        self._note("on_predict_batch_end", batch, logs)


class StubModel:
    """Stands in for a model: callbacks only store it and set attributes on it."""


def test_every_hook_reaches_every_callback_in_order_with_its_arguments():
    journal = []
    callbacks = CallbackList([Recorder("a", journal), Recorder("b", journal)])
    logs = {"loss": 0.5}
    callbacks.on_train_begin()
    callbacks.on_epoch_begin(3)
    callbacks.on_train_batch_begin(7)
    callbacks.on_train_batch_end(7, logs)
    callbacks.on_test_begin(stage="val")
    callbacks.on_test_batch_begin(1, stage="val")
    callbacks.on_test_batch_end(1, logs, stage="val")
    callbacks.on_test_end(logs, stage="val")
    callbacks.on_epoch_end(3, {"loss": 0.5, "val_loss": 0.75})
    callbacks.on_test_begin(stage="test")
    callbacks.on_test_end({"loss": 0.25})
    callbacks.on_train_end()
    callbacks.on_predict_begin()
    callbacks.on_predict_batch_begin(0)
    callbacks.on_predict_batch_end(0)
    callbacks.on_predict_end()

    expected_calls = [
        ("on_train_begin", ({},), {}),
        ("on_epoch_begin", (3, {}), {}),
        ("on_train_batch_begin", (7, {}), {}),
        ("on_train_batch_end", (7, {"loss": 0.5}), {}),
        ("on_test_begin", ({},), {"stage": "val"}),
        ("on_test_batch_begin", (1, {}), {"stage": "val"}),
        ("on_test_batch_end", (1, {"loss": 0.5}), {"stage": "val"}),
        ("on_test_end", ({"loss": 0.5},), {"stage": "val"}),
        ("on_epoch_end", (3, {"loss": 0.5, "val_loss": 0.75}), {}),
        ("on_test_begin", ({},), {"stage": "test"}),
        ("on_test_end", ({"loss": 0.25},), {"stage": "test"}),
        ("on_train_end", ({},), {}),
        ("on_predict_begin", ({},), {}),
        ("on_predict_batch_begin", (0, {}), {}),
        ("on_predict_batch_end", (0, {}), {}),
        ("on_predict_end", ({},), {}),
    ]
    assert journal == [(name, *call) for call in expected_calls for name in ("a", "b")]


def test_keras_style_hooks_without_stage_still_receive_the_call():
    seen = []

    class KerasStyle(Callback):
        def on_test_end(self, logs=None):
            seen.append(("end", logs))

        def on_test_batch_end(self, batch, logs=None):
            seen.append(("batch", batch, logs))

    class TakesKwargs(Callback):
        def on_test_begin(self, logs=None, **kwargs):
            seen.append(("begin", kwargs))

    callbacks = CallbackList([KerasStyle(), TakesKwargs()])
    callbacks.on_test_begin(stage="val")
    callbacks.on_test_batch_end(2, {"loss": 1.0}, stage="val")
    callbacks.on_test_end({"loss": 1.0}, stage="val")
    assert seen == [("begin", {"stage": "val"}), ("batch", 2, {"loss": 1.0}),
                    ("end", {"loss": 1.0})]


def test_unknown_stage_is_rejected():
    with pytest.raises(ValueError, match=r"stage must be 'val' or 'test'. Received: stage='train'"):
        CallbackList([Callback()]).on_test_begin(stage="train")


def test_logs_are_shared_by_callbacks_but_never_change_the_callers_dict():
    seen = []

    class AddsKey(Callback):
        def on_epoch_end(self, epoch, logs=None):
            logs["lr"] = 0.01

    class Reads(Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen.append(dict(logs))

    callers_logs = {"loss": 1.0}
    CallbackList([AddsKey(), Reads()]).on_epoch_end(0, callers_logs)
    assert seen == [{"loss": 1.0, "lr": 0.01}]
    assert callers_logs == {"loss": 1.0}


def test_default_callbacks_follow_keras_order_after_the_users():
    user = Callback()
    callbacks = CallbackList(user, add_history=True, add_progress_bar=True, verbose=2)
    assert len(callbacks) == 3
    first, history, bar = callbacks
    assert first is user
    assert isinstance(history, History) and callbacks.history is history
    assert isinstance(bar, ProgressBar) and callbacks.progress_bar is bar and bar.verbose == 2


def test_existing_history_and_progress_bar_are_reused_not_duplicated():
    history, bar = History(), ProgressBar(verbose=2)
    callbacks = CallbackList([bar, history], add_history=True, add_progress_bar=True)
    assert list(callbacks) == [bar, history]
    assert callbacks.history is history and callbacks.progress_bar is bar


def test_silent_lists_get_no_progress_bar_and_no_history_unless_asked():
    callbacks = CallbackList(add_progress_bar=True, verbose=0)
    assert len(callbacks) == 0 and callbacks.history is None and callbacks.progress_bar is None


def test_model_and_params_reach_every_callback_and_model_history_is_set():
    user = Callback()
    model = StubModel()
    params = {"epochs": 4, "steps": 10, "verbose": 1}
    callbacks = CallbackList([user], add_history=True, model=model, params=params)
    assert user.model is model and callbacks.history.model is model
    assert user.params is params and callbacks.history.params is params
    assert model.history is callbacks.history
    late = Callback()
    callbacks.append(late)
    assert late.model is model and late.params == params and list(callbacks)[-1] is late


def test_nested_lists_are_flattened():
    a, b, c = Callback(), Callback(), Callback()
    assert list(CallbackList([a, [b, (c,)]])) == [a, b, c]


def test_a_non_callback_is_rejected_with_its_type():
    with pytest.raises(TypeError, match=r"Received an object of type builtins\.str: 'history'"):
        CallbackList(["history"])
    with pytest.raises(TypeError, match=r"Received the class History; pass History\(\) instead"):
        CallbackList([History])
    with pytest.raises(TypeError, match="builtins.int"):
        CallbackList([Callback()]).append(3)


@pytest.mark.parametrize("verbose", [3, -1, True, "loud"])
def test_bad_verbose_is_rejected(verbose):
    with pytest.raises(ValueError, match=f"Received: verbose={verbose!r}"):
        CallbackList(verbose=verbose)


def _needs(callbacks):
    return (
        callbacks.needs_train_batch_hooks,
        callbacks.needs_test_batch_hooks,
        callbacks.needs_predict_batch_hooks,
    )


def test_batch_hook_detection_follows_the_overridden_hooks():
    class TrainBatches(Callback):
        def on_train_batch_end(self, batch, logs=None):
            pass

    class LegacyBatches(Callback):
        def on_batch_begin(self, batch, logs=None):
            pass

    class TestBatches(Callback):
        def on_test_batch_begin(self, batch, logs=None, stage="test"):
            pass

    class PredictBatches(Callback):
        def on_predict_batch_end(self, batch, logs=None):
            pass

    class EpochsOnly(Callback):
        def on_epoch_end(self, epoch, logs=None):
            pass

    lambda_style = Callback()
    lambda_style.on_predict_batch_begin = lambda batch, logs=None: None

    assert _needs(CallbackList()) == (False, False, False)
    assert _needs(CallbackList([EpochsOnly()], add_history=True)) == (False, False, False)
    assert _needs(CallbackList([TrainBatches()])) == (True, False, False)
    assert _needs(CallbackList([LegacyBatches()])) == (True, False, False)
    assert _needs(CallbackList([TestBatches()])) == (False, True, False)
    assert _needs(CallbackList([PredictBatches()])) == (False, False, True)
    assert _needs(CallbackList([lambda_style])) == (False, False, True)
    assert _needs(CallbackList([EpochsOnly(), TestBatches(), TrainBatches()])) == (
        True,
        True,
        False,
    )


def test_progress_bar_asks_for_batches_only_when_it_draws_from_them():
    def bar_needs(steps, **kwargs):
        bar = ProgressBar(stream=io.StringIO(), **kwargs)
        return _needs(CallbackList([bar], params={"epochs": 1, "steps": steps, "verbose": 1}))

    assert bar_needs(10, interactive=True) == (True, True, True)
    assert bar_needs(10, interactive=False) == (False, False, False)
    assert bar_needs(None, interactive=False) == (True, True, True)  # it must count the steps
    assert bar_needs(None, verbose=2) == (False, False, False)
    # Inside fit the validation and test stages draw nothing.
    bar = ProgressBar(stream=io.StringIO(), interactive=True)
    callbacks = CallbackList([bar], params={"epochs": 1, "steps": 10, "verbose": 1})
    callbacks.on_train_begin()
    assert _needs(callbacks) == (True, False, True)
    callbacks.on_train_end()
    assert callbacks.needs_test_batch_hooks


def test_train_batch_hooks_call_the_keras_legacy_aliases():
    calls = []

    class Legacy(Callback):
        def on_batch_begin(self, batch, logs=None):
            calls.append(("begin", batch))

        def on_batch_end(self, batch, logs=None):
            calls.append(("end", batch, logs))

    callbacks = CallbackList([Legacy()])
    callbacks.on_train_batch_begin(4)
    callbacks.on_train_batch_end(4, {"loss": 2.0})
    assert calls == [("begin", 4), ("end", 4, {"loss": 2.0})]


def test_registry_and_exports():
    assert set(callbacks_package.__all__) == {
        "Callback", "CallbackList", "History", "ProgressBar", "TensorBoard", "ModelCheckpoint",
        "CSVLogger", "EarlyStopping", "LearningRateScheduler", "ReduceLROnPlateau",
        "TerminateOnNaN", "LambdaCallback", "BackupAndRestore", "SwapEMAWeights",
        "FinalizeVariableValues", "MLflowLogger"}
    # Python only: a recipe cannot hold functions, and a recipe's run resumes with
    # `graphfit train --resume`, which restores the same checkpoints; an optimizer with
    # use_ema adds FinalizeVariableValues to fit itself.
    python_only = {"Callback", "CallbackList", "LambdaCallback", "BackupAndRestore",
                   "FinalizeVariableValues"}
    for name in set(callbacks_package.__all__) - python_only:
        assert CALLBACKS.get(name) is getattr(callbacks_package, name)
    assert "LambdaCallback" not in CALLBACKS and "BackupAndRestore" not in CALLBACKS
    assert CALLBACKS.get("History") is History
    assert CALLBACKS.get("ProgressBar") is ProgressBar


@pytest.mark.parametrize(
    "module", [callback_module, callback_list_module, history_module, progress_module]
)
def test_docstring_examples_run(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
