"""`source: stream` in a recipe: statistics from the training files only, saved in the run; a
shard that goes bad mid-epoch stops the run naming the file and the record, with its last
checkpoint intact; once the file is repaired, `--resume` carries on from that mid-epoch
checkpoint to the weights of an unbroken run."""

import json
import os

import numpy as np
import pytest

import graphfit as gf
from graphfit import cli, datasets
from graphfit.recipes import load_recipe
from graphfit.recipes.running import runner, training_run
from graphfit.recipes.running.data_loading import Standardizer
from graphfit.saving import checkpoints
from graphfit.saving.input_position import input_position

RECIPE = """\
seed: 0
data:
  source: stream
  files: shards/*.tfrecord
  columns: {pixels: {dtype: float32, shape: [64]}, label: int64}
  target: label
  shuffle_buffer: 64
  standardize: true
model: [{type: Dense, units: 16, activation: relu}, {type: Dense, units: 10}]
loss: {type: SparseCategoricalCrossentropy, from_logits: true}
metrics: [accuracy]
callbacks: [{type: ModelCheckpoint, filepath: checkpoints, monitor: val_loss, save_freq: 3}]
training: {epochs: 2, batch_size: 32, validation_split: 0.17, test_split: 0.17,
           steps_per_execution: 1, jit_compile: false}
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """300 digits in 6 shards (4 train, 1 validation, 1 test), the recipe, a full run."""
    x, y = datasets.load_digits()
    base = tmp_path_factory.mktemp("stream")
    datasets.write_tfrecord_shards(x[:300], y[:300], base / "shards", 6, x_name="pixels",
                                   y_name="label")
    (base / "digits.yaml").write_text(RECIPE)
    full = training_run.train(load_recipe(str(base / "digits.yaml")), run_dir=str(base / "full"),
                              verbose=0)
    return base, x[:300], full


def test_statistics_come_from_the_training_files_and_are_saved_in_the_run(folder):
    base, x, full = folder
    splits = runner.load_run(str(base / "full"))[0].splits
    preprocessing = json.loads((base / "full" / "preprocessing.json").read_text())
    parts = datasets.Stream(str(base / "shards" / "*.tfrecord"), {"pixels": {
        "shape": [64]}, "label": "int64"}, target="label").split(0.17, 0.17, seed=0)
    train_rows = [int(os.path.basename(f)[6:11]) for f in parts["train"].files]
    assert len(train_rows) == 4 and splits.steps_per_epoch == 7  # 200 rows, batches of 32
    rows = np.concatenate([x[50 * shard:50 * shard + 50] for shard in train_rows])
    expected = Standardizer.fit(rows)
    np.testing.assert_allclose(preprocessing["standardize"]["mean"], expected.mean, rtol=1e-12,
                               atol=1e-15)
    np.testing.assert_allclose(preprocessing["standardize"]["std"], expected.std, rtol=1e-12)
    assert set(full.metrics) == {"train", "val", "test"}


def test_validate_says_the_splits_are_streamed(folder, capsys, monkeypatch):
    """Not "train a dataset of ... samples" (a reviewer's defect): a stream has no size until
    it is read."""
    base = folder[0]
    monkeypatch.chdir(base)
    assert cli.main(["validate", "digits.yaml"]) == 0
    out = capsys.readouterr().out
    assert ("OK. data: train streamed, val streamed, test streamed (a stream's size is known "
            "once it is read); model: 2 layers") in out
    assert "a dataset of" not in out


class _Garble(gf.callbacks.Callback):
    """Damages the last record of `path` during the first epoch (read again in the next)."""

    def __init__(self, path):
        super().__init__()
        self.path, self.done = path, False

    def on_train_batch_end(self, batch, logs=None):
        if not self.done:
            self.done = True
            data = bytearray(open(self.path, "rb").read())
            data[-20:-10] = b"\xff" * 10
            open(self.path, "wb").write(bytes(data))


def test_a_bad_shard_mid_epoch_names_its_record_keeps_the_checkpoint_and_resumes(
        folder, tmp_path, monkeypatch):
    base, _, full = folder
    parts = datasets.Stream(str(base / "shards" / "*.tfrecord"), {"pixels": {
        "shape": [64]}, "label": "int64"}, target="label").split(0.17, 0.17, seed=0)
    victim = parts["train"].files[0]
    original = open(victim, "rb").read()
    own = training_run.run_callbacks
    monkeypatch.setattr(training_run, "run_callbacks",
                        lambda *a, **k: own(*a, **k) + [_Garble(victim)])
    run = tmp_path / "cut"
    try:
        with pytest.raises(training_run.DataFailed) as caught:
            training_run.train(load_recipe(str(base / "digits.yaml")), run_dir=str(run),
                               verbose=0)
    finally:
        open(victim, "wb").write(original)
    message = str(caught.value)
    assert f"{victim}, record 49 (counting from 0)" in message and "corrupted" in message
    assert f"graphfit train --resume {run}" in message
    model = runner.prepare(load_recipe(str(run / "recipe.yaml"))).model
    state = checkpoints.restore_latest(model, str(run / "checkpoints"))  # loads, intact
    # Saved within the second epoch, which the bad record stopped (7 batches an epoch).
    assert state["epoch"] == 1 and input_position(model).batch.numpy() in (3, 6)
    monkeypatch.setattr(training_run, "run_callbacks", own)
    assert cli.main(["train", "--resume", str(run), "--verbose", "0"]) == 0
    resumed = runner.load_run(str(run))[0].model
    for a, b in zip(full.model.get_weights(), resumed.get_weights()):
        np.testing.assert_array_equal(a, b)


def _copy_of_full_run(base, tmp_path):
    import shutil

    run = tmp_path / "copy"
    shutil.copytree(base / "full", run)
    return run


def test_the_run_records_how_its_stream_was_dealt_and_a_two_worker_deal_is_by_file(folder):
    import tensorflow as tf

    from graphfit.datasets.stream_shards import worker_shards
    from graphfit.recipes.running.stream_loading import deal_record

    base = folder[0]
    preprocessing = json.loads((base / "full" / "preprocessing.json").read_text())
    assert preprocessing["stream_deal"] == {"workers": 1}
    stream = datasets.Stream(str(base / "shards" / "*.tfrecord"), {"pixels": {
        "shape": [64]}, "label": "int64"}, target="label")
    part = stream.split(0.17, 0.17, seed=0)["train"]
    deals = [deal_record(worker_shards(stream, part, 32, tf.distribute.InputContext(2, i, 2),
                                       seed=0)) for i in range(2)]
    assert deals[0] == deals[1] and deals[0]["workers"] == 2 and deals[0]["by"] == "file"
    dealt = sorted(f for files in deals[0]["files"] for f in files)
    assert dealt == sorted(os.path.basename(f) for f in part.files)  # each file once


def test_resume_on_one_process_of_a_run_dealt_among_two_workers_is_refused(folder, tmp_path):
    """A run written by 2 workers (its record says so), resumed by one process: the
    position counts batches of each worker's half, so it is refused, saying what to do."""
    base = folder[0]
    run = _copy_of_full_run(base, tmp_path)
    path = run / "preprocessing.json"
    record = json.loads(path.read_text())
    record["stream_deal"] = {"workers": 2, "by": "file", "files": [["a.tfrecord"],
                                                                     ["b.tfrecord"]]}
    path.write_text(json.dumps(record))
    before = (run / "checkpoints").stat().st_mtime
    with pytest.raises(ValueError) as caught:
        training_run.resume(str(run), epochs=3, verbose=0)
    message = str(caught.value)
    assert "read by 2 workers (by file: worker 0 reads a.tfrecord; worker 1 reads " \
           "b.tfrecord)" in message
    assert "this resume runs 1 process" in message and "repeat some records" in message
    assert "Resume it on 2 workers" in message and f"graphfit train --resume {run}" in message
    assert json.loads((run / "history.json").read_text())["loss"].__len__() == 2
    assert (run / "checkpoints").stat().st_mtime == before


def test_resume_on_two_workers_of_a_run_trained_on_one_process_is_refused(
        folder, tmp_path, monkeypatch):
    """The cluster simulated in one process: the resume's input context says 2 workers."""
    import tensorflow as tf

    from graphfit.recipes.running import workers

    run = _copy_of_full_run(folder[0], tmp_path)
    monkeypatch.setattr(workers, "input_context",
                        lambda strategy: tf.distribute.InputContext(2, 0, 2))
    with pytest.raises(ValueError) as caught:
        training_run.resume(str(run), epochs=3, verbose=0)
    message = str(caught.value)
    assert "read by 1 process (every training file)" in message
    assert "this resume runs 2 workers (by file: worker 0 reads shard-" in message
    assert f"on one process: graphfit train --resume {run} --set distribute=null" in message


def test_a_separate_validation_stream_is_standardized_with_the_training_statistics(folder):
    from graphfit.recipes.running.data_loading import load_splits

    base, x, _ = folder
    text = RECIPE.replace("shards/*.tfrecord", "shards/shard-0000[0-4]-of-00006.tfrecord")
    text = text.replace("validation_split: 0.17, test_split: 0.17,", (
        "validation_split: 0, test_split: 0, validation_data: {source: stream, files: "
        "shards/shard-00005-of-00006.tfrecord, columns: {pixels: {dtype: float32, shape: "
        "[64]}, label: int64}, target: label},"))
    (base / "separate.yaml").write_text(text)
    splits = load_splits(load_recipe(str(base / "separate.yaml")).config)
    first, labels = next(iter(splits.val))
    np.testing.assert_allclose(first.numpy(), splits.standardizer(x[250:282]), rtol=1e-5,
                               atol=1e-5)
    assert abs(float(np.mean(first.numpy()))) < 1.0


def test_a_separate_validation_array_source_is_standardized_with_the_training_statistics(folder):
    # A stream trains, an npz file validates: its features go through the same statistics
    # (they went in raw, so validation scored the model on inputs it never saw the like of).
    from graphfit.recipes.running.data_loading import load_splits

    base, x, _ = folder
    _, y = datasets.load_digits()
    np.savez(base / "validation.npz", x=x[250:300], y=y[250:300])
    text = RECIPE.replace("shards/*.tfrecord", "shards/shard-0000[0-4]-of-00006.tfrecord")
    text = text.replace("validation_split: 0.17, test_split: 0.17,", (
        "validation_split: 0, test_split: 0, validation_data: {source: npz, path: "
        f"{base / 'validation.npz'}}},"))
    (base / "separate_npz.yaml").write_text(text)
    splits = load_splits(load_recipe(str(base / "separate_npz.yaml")).config)
    features, labels = splits.val
    np.testing.assert_allclose(features, splits.standardizer(x[250:300]), rtol=1e-6)
    np.testing.assert_array_equal(labels, y[250:300])
