"""ProgressBar: exact output for fit (interactive or not, verbose 1 and 2), evaluate, predict.

A fake clock replaces time.monotonic, so elapsed times and times per step are exact.
"""

import io
import re

import keras
import pytest

from graphfit.callbacks import CallbackList, ProgressBar, progress


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def make_bar(verbose=1, interactive=False, epochs=2, steps=4):
    out, clock = io.StringIO(), FakeClock()
    bar = ProgressBar(verbose=verbose, stream=out, interactive=interactive)
    bar._clock = clock
    bar.set_params({"epochs": epochs, "steps": steps, "verbose": verbose})
    return bar, out, clock


def bar_of(filled):
    return "━" * filled + "─" * (20 - filled)


def run_epoch(bar, clock, epoch, steps=4, logs=None, test_logs=None):
    """Batches finish at t = 1.0, 1.5, 2.0, ...; validation takes 1.2 s; epoch ends after it."""
    clock.now = 0.0
    bar.on_epoch_begin(epoch)
    for batch in range(steps):
        clock.now = 1.0 + 0.5 * batch
        bar.on_train_batch_end(batch, {"loss": 1.0 / (batch + 1)})
    bar.on_test_begin(stage="val")
    bar.on_test_batch_end(0, {"loss": 0.5}, stage="val")
    bar.on_test_end({"loss": 0.5}, stage="val")
    if test_logs is not None:
        bar.on_test_begin(stage="test")
        bar.on_test_end(test_logs, stage="test")
    clock.now += 1.2
    bar.on_epoch_end(epoch, logs or {"loss": 0.25, "val_loss": 0.5})


def test_metrics_are_formatted_as_keras_formats_them(capsys):
    values = [0.25, -0.5, 1e-5, -1e-5, 0.001, 0.0011, 0.0, 123.456789, 1e6]
    names = [f"m{i}" for i in range(len(values))]
    keras_bar = keras.utils.Progbar(1, verbose=1, stateful_metrics=names)
    keras_bar.update(1, list(zip(names, values)), finalize=True)
    keras_text = dict(re.findall(r" - (m\d+): (\S+)", capsys.readouterr().out))
    assert [progress.format_value(v) for v in values] == [keras_text[n] for n in names]
    assert progress.format_logs({"loss": 0.1234, "accuracy": 0.96875}) == (
        "loss: 0.1234 - accuracy: 0.9688"
    )


def test_non_interactive_fit_prints_only_the_final_line_of_each_epoch():
    bar, out, clock = make_bar()
    bar.on_train_begin()
    run_epoch(bar, clock, 0)
    run_epoch(bar, clock, 1, logs={"loss": 0.125, "val_loss": 0.00025})
    bar.on_train_end()
    assert out.getvalue() == (
        "Epoch 1/2\n"
        f"4/4 {bar_of(20)} 4s 500ms/step - loss: 0.2500 - val_loss: 0.5000\n"
        "Epoch 2/2\n"
        f"4/4 {bar_of(20)} 4s 500ms/step - loss: 0.1250 - val_loss: 2.5000e-04\n"
    )


def test_interactive_fit_redraws_in_place_and_ends_with_val_metrics():
    bar, out, clock = make_bar(interactive=True, epochs=3)
    bar.on_train_begin()
    run_epoch(bar, clock, 1)
    assert out.getvalue() == (
        "Epoch 2/3\n"
        f"\r1/4 {bar_of(5)} 3s 1s/step - loss: 1.0000"
        f"\r2/4 {bar_of(10)} 1s 500ms/step - loss: 0.5000"
        f"\r3/4 {bar_of(15)} 0s 500ms/step - loss: 0.3333"
        f"\r4/4 {bar_of(20)} 0s 500ms/step - loss: 0.2500"
        f"\r4/4 {bar_of(20)} 4s 500ms/step - loss: 0.2500 - val_loss: 0.5000\n"
    )


def test_a_shorter_redraw_blanks_out_the_longer_line_before_it():
    bar, out, clock = make_bar(interactive=True, steps=2)
    bar.on_epoch_begin(0)
    clock.now = 1.0
    bar.on_train_batch_end(0, {"loss": 1e-5})
    clock.now = 2.0
    bar.on_train_batch_end(1, {"loss": 0.5})
    first, second = out.getvalue().split("\r")[1:]
    assert first == f"1/2 {bar_of(10)} 1s 1s/step - loss: 1.0000e-05"
    assert second == f"2/2 {bar_of(20)} 0s 1s/step - loss: 0.5000" + " " * 4


def test_interactive_redraws_are_throttled_but_the_final_state_is_drawn():
    bar, out, clock = make_bar(interactive=True, steps=10)
    bar.on_epoch_begin(0)
    for batch in range(10):
        clock.now = 0.03 * (batch + 1)  # 30 ms apart: every other one is within 50 ms
        bar.on_train_batch_end(batch, {"loss": 1.0})
    bar.on_epoch_end(0, {"loss": 1.0})
    drawn = [segment.split(" ")[0] for segment in out.getvalue().split("\r")[1:]]
    assert drawn == ["1/10", "3/10", "5/10", "7/10", "9/10", "10/10"]
    assert out.getvalue().endswith("10/10 " + bar_of(20) + " 0s 30ms/step - loss: 1.0000\n")


def test_unknown_total_shows_a_count_without_bar_or_eta_then_learns_the_total():
    bar, out, clock = make_bar(interactive=True, steps=None)
    bar.on_train_begin()
    clock.now = 0.0
    bar.on_epoch_begin(0)
    for batch, now in enumerate([1.0, 1.4, 1.8]):
        clock.now = now
        bar.on_train_batch_end(batch, {"loss": 1.0 / (batch + 1)})
    running = out.getvalue()
    assert running == (
        "Epoch 1/2\n"
        "\r1/Unknown 1s 1s/step - loss: 1.0000"
        "\r2/Unknown 1s 400ms/step - loss: 0.5000"
        "\r3/Unknown 2s 400ms/step - loss: 0.3333"
    )
    clock.now = 2.2
    bar.on_epoch_end(0, {"loss": 0.5, "val_loss": 1.0})
    assert out.getvalue()[len(running):] == (
        f"\r3/3 {bar_of(20)} 2s 400ms/step - loss: 0.5000 - val_loss: 1.0000\n"
    )
    clock.now = 0.0
    bar.on_epoch_begin(1)
    clock.now = 1.0
    bar.on_train_batch_end(0, {"loss": 0.25})
    assert out.getvalue().endswith(f"Epoch 2/2\n\r1/3 {bar_of(6)} 2s 1s/step - loss: 0.2500")


def test_verbose_2_prints_one_line_per_epoch():
    bar, out, clock = make_bar(verbose=2, epochs=5)
    bar.on_train_begin()
    run_epoch(bar, clock, 2, logs={"loss": 0.25, "val_loss": 0.0005})
    bar.on_train_end()
    assert out.getvalue() == "Epoch 3/5 - 4s - loss: 0.2500 - val_loss: 5.0000e-04\n"


def test_test_stage_after_training_prints_one_test_line():
    bar, out, clock = make_bar(epochs=1)
    bar.on_train_begin()
    run_epoch(bar, clock, 0)
    bar.on_test_begin(stage="test")
    bar.on_test_batch_end(0, {"loss": 0.75}, stage="test")
    bar.on_test_end({"loss": 0.75, "accuracy": 0.5}, stage="test")
    bar.on_train_end()
    assert out.getvalue() == (
        "Epoch 1/1\n"
        f"4/4 {bar_of(20)} 4s 500ms/step - loss: 0.2500 - val_loss: 0.5000\n"
        "Test: loss: 0.7500 - accuracy: 0.5000\n"
    )


@pytest.mark.parametrize("verbose", [1, 2])
def test_test_stage_inside_an_epoch_prints_after_the_epoch_line(verbose):
    bar, out, clock = make_bar(verbose=verbose, interactive=True, epochs=1)
    bar.on_train_begin()
    logs = {"loss": 0.25, "val_loss": 0.5, "test_loss": 0.75}
    run_epoch(bar, clock, 0, logs=logs, test_logs={"loss": 0.75})
    bar.on_train_end()
    epoch_line = "loss: 0.2500 - val_loss: 0.5000\n"
    assert out.getvalue().endswith(epoch_line + "Test: loss: 0.7500\n")
    assert out.getvalue().count("test_loss") == 0


def test_validation_inside_fit_draws_nothing():
    bar, out, clock = make_bar(interactive=True)
    bar.on_train_begin()
    bar.on_epoch_begin(0)
    before = out.getvalue()
    bar.on_test_begin(stage="val")
    bar.on_test_batch_end(0, {"loss": 0.5}, stage="val")
    bar.on_test_end({"loss": 0.5}, stage="val")
    assert out.getvalue() == before == "Epoch 1/2\n"


@pytest.mark.parametrize("call_batches", [True, False])
def test_standalone_evaluate_draws_a_bar_over_its_steps(call_batches):
    bar, out, clock = make_bar(steps=5)
    callbacks = CallbackList([bar])
    callbacks.on_test_begin()
    if call_batches:
        for batch in range(5):
            clock.now = 0.2 * (batch + 1)
            callbacks.on_test_batch_end(batch, {"loss": 0.5})
    clock.now = 1.0
    callbacks.on_test_end({"loss": 0.25, "accuracy": 0.75})
    assert out.getvalue() == f"5/5 {bar_of(20)} 1s 200ms/step - loss: 0.2500 - accuracy: 0.7500\n"


def test_evaluate_after_fit_draws_again_and_verbose_2_is_one_line():
    bar, out, clock = make_bar(verbose=2, steps=5)
    bar.on_train_begin()
    bar.on_train_end()
    clock.now = 0.0
    bar.on_test_begin()
    clock.now = 1.0
    bar.on_test_end({"loss": 0.25})
    assert out.getvalue() == "5/5 - 1s - loss: 0.2500\n"


def test_predict_draws_a_bar_without_metrics():
    bar, out, clock = make_bar(interactive=True, steps=2)
    bar.on_predict_begin()
    for batch in range(2):
        clock.now = 0.5 * (batch + 1)
        bar.on_predict_batch_end(batch, {"outputs": [1.0, 2.0]})
    bar.on_predict_end()
    assert out.getvalue() == (
        f"\r1/2 {bar_of(10)} 0s 500ms/step\r2/2 {bar_of(20)} 0s 500ms/step"
        f"\r2/2 {bar_of(20)} 1s 500ms/step\n"
    )


def test_verbose_0_prints_nothing():
    bar, out, clock = make_bar(verbose=0, interactive=True)
    bar.on_train_begin()
    run_epoch(bar, clock, 0, test_logs={"loss": 1.0})
    bar.on_train_end()
    bar.on_test_begin()
    bar.on_test_end({"loss": 1.0})
    bar.on_predict_begin()
    bar.on_predict_end()
    assert out.getvalue() == ""


def test_unknown_epoch_count_and_default_stream(capsys):
    bar = ProgressBar(verbose=2)
    bar.set_params({"steps": 3})
    bar.on_epoch_begin(0)
    bar.on_epoch_end(0, {"loss": 2.0})
    assert capsys.readouterr().out == "Epoch 1 - 0s - loss: 2.0000\n"


def test_interactive_is_detected_from_the_stream():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    assert ProgressBar(stream=io.StringIO()).interactive is False
    assert ProgressBar(stream=Terminal()).interactive is True
    assert ProgressBar(stream=Terminal(), interactive=False).interactive is False


def test_time_formats():
    assert progress._format_eta(3725) == "1:02:05"
    assert progress._format_eta(75) == "1:15"
    assert progress._format_eta(5.9) == "5s"
    assert progress._format_step_time(2.0) == "2s/step"
    assert progress._format_step_time(0.0125) == "12ms/step"
    assert progress._format_step_time(0.0005) == "500us/step"


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="Received: verbose=5"):
        ProgressBar(verbose=5)
    with pytest.raises(ValueError, match="Received: interactive='yes'"):
        ProgressBar(interactive="yes")
