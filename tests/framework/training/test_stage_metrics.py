"""Train, validation and test keep separate metric state: shown, not assumed."""

import keras
import numpy as np
import pytest

import graphfit as gf
from graphfit import callbacks, layers, optimizers


@pytest.fixture(scope="module")
def splits():
    x, y = gf.datasets.load_digits()
    order = np.random.default_rng(1).permutation(len(x))
    x, y = x[order], y[order]
    return (x[:600], y[:600]), (x[600:900], y[600:900]), (x[900:1200], y[900:1200])


def _model(learning_rate):
    model = gf.Sequential([layers.Dense(16, activation="relu"), layers.Dense(10)],
                          input_shape=(64,))
    model.compile(optimizer=optimizers.SGD(learning_rate),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"], steps_per_execution=1)
    return model


class EvaluateEveryBatch(callbacks.Callback):
    """Runs a validation and a test evaluation in the middle of every training epoch."""

    def __init__(self, val, test):
        super().__init__()
        self.val, self.test = val, test

    def on_train_batch_end(self, batch, logs=None):
        self.model.evaluate(*self.val, stage="val", verbose=0)
        self.model.evaluate(*self.test, stage="test", verbose=0)


class NumpyTruth(callbacks.Callback):
    """At each epoch end, the accuracy of every stage's data computed outside the metrics."""

    def __init__(self, stages):
        super().__init__()
        self.stages, self.truth = stages, []

    def on_epoch_end(self, epoch, logs=None):
        self.truth.append({
            stage: float(np.mean(self.model.predict(x, verbose=0).argmax(1) == y))
            for stage, (x, y) in self.stages.items()
        })


def test_mid_epoch_evaluations_do_not_change_the_training_numbers(splits):
    train, val, test = splits
    plain = _model(0.05)
    initial = plain.get_weights()
    plain_history = plain.fit(*train, batch_size=50, epochs=2, shuffle=False, verbose=0)

    busy = _model(0.05)
    busy.set_weights(initial)
    busy_history = busy.fit(*train, batch_size=50, epochs=2, shuffle=False, verbose=0,
                            validation_data=val, test_data=test, test_freq=1,
                            callbacks=[EvaluateEveryBatch(val, test)])
    assert busy_history.history["loss"] == plain_history.history["loss"]
    assert busy_history.history["accuracy"] == plain_history.history["accuracy"]


def test_each_stage_logs_the_numbers_of_its_own_data(splits):
    train, val, test = splits
    # Learning rate 0: the weights stay put, so the epoch's training accuracy has a ground truth.
    model = _model(0.0)
    truth = NumpyTruth({"": train, "val_": val, "test_": test})
    history = model.fit(*train, batch_size=64, epochs=2, verbose=0, validation_data=val,
                        test_data=test, test_freq=1,
                        callbacks=[EvaluateEveryBatch(val, test), truth])
    for epoch, expected in enumerate(truth.truth):
        for prefix, accuracy in expected.items():
            assert history.history[f"{prefix}accuracy"][epoch] == pytest.approx(accuracy, abs=1e-6)
    accuracies = {round(a, 6) for a in truth.truth[0].values()}
    assert len(accuracies) == 3  # three different numbers, so a leak could not go unnoticed


def test_stages_own_distinct_metric_variables(splits):
    train, val, _ = splits
    model = _model(0.01)
    model.fit(*train, epochs=1, verbose=0, validation_data=val)
    stage_metrics = model.compile_state.stage_metrics
    variables = [{id(v) for v in stage_metrics[s].variables} for s in ("train", "val", "test")]
    assert all(variables) and not (variables[0] & variables[1] or variables[0] & variables[2]
                                   or variables[1] & variables[2])


def _two_outputs():
    inputs = gf.Input((3,), name="x")
    return gf.Model(inputs, [layers.Dense(1, name="a")(inputs), layers.Dense(2, name="b")(inputs)])


def test_a_list_of_metric_lists_gives_each_output_its_own():
    # Keras's `metrics=[[metrics of output 1], [metrics of output 2]]`.
    model = _two_outputs()
    model.compile(optimizer="sgd", loss=["mse", "mse"], metrics=[["mae", "mse"], None],
                  jit_compile=False)
    x, y = np.ones((4, 3), "float32"), [np.zeros((4, 1), "float32"), np.zeros((4, 2), "float32")]
    logs = model.evaluate(x, y, verbose=0, return_dict=True)
    assert {k for k in logs if k.startswith(("a_m", "b_m"))} == {"a_mae", "a_mse"}
    model.compile(optimizer="sgd", loss=["mse", "mse"], metrics=[["mae"]], jit_compile=False)
    with pytest.raises(ValueError, match="one per output"):
        model.evaluate(x, y, verbose=0)
