"""`source: stream` under two workers: each worker reads its own part of every split.

In this process (no cluster): the parts of two input pipelines (`tf.distribute.InputContext`)
are disjoint and together hold every training record exactly once, in every pass, dealt by
file or by record; a split that cannot be shared is refused. On two `graphfit train` worker
processes (127.0.0.1, free ports): a run that a worker's death stops mid-epoch resumes, on
two workers again, to the weights and numbers of the uninterrupted one-process run (without
shuffling, global batch k of two workers holds the same records as batch k of one process).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf

from graphfit import datasets
from graphfit.datasets.stream_shards import NotShardable, worker_shards

from .test_multi_worker import _workers

RECIPE = """\
seed: 0
data:
  source: stream
  files: shards/*.tfrecord
  columns: {x: {dtype: float32, shape: [4]}, y: int64}
  target: y
  shuffle: false
  standardize: true
model: [{type: Dense, units: 8, activation: tanh}, {type: Dense, units: 3}]
loss: {type: SparseCategoricalCrossentropy, from_logits: true}
metrics: [accuracy]
callbacks: [{type: ModelCheckpoint, filepath: checkpoints, save_freq: 2}, {type: DieAt}]
imports: [die_hook]
training: {epochs: 3, batch_size: 8, validation_split: 0.25, test_split: 0.25, dtype: float64,
           steps_per_execution: 1, jit_compile: false}
"""
DIE_HOOK = '''
import json, os
import graphfit as gf
from graphfit.core.registry import CALLBACKS


@CALLBACKS.register
class DieAt(gf.callbacks.Callback):
    """Ends this process abruptly after batch B of epoch E on worker W (GRAPHFIT_TEST_DIE
    "W:E:B")."""

    epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        spec = os.environ.get("GRAPHFIT_TEST_DIE")
        if not spec:
            return
        worker, epoch, at = (int(v) for v in spec.split(":"))
        task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
        if task.get("index") == worker and (self.epoch, batch) == (epoch, at):
            os._exit(17)
'''
TOLERANCE = 1e-9  # float64; sums over the rows in another order


def _shards(folder, files: int = 8, records: int = 64):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(records, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0.5)
    return datasets.write_tfrecord_shards(x, y, folder, files)


def _ids(folder, files: int, records: int):
    """A stream whose label is the record's index, so a batch says which records it holds."""
    paths = datasets.write_tfrecord_shards(np.zeros((records, 1), np.float32),
                                           np.arange(records), folder, files)
    return datasets.Stream(paths, {"x": {"dtype": "float32", "shape": [1]}, "y": "int64"},
                           target="y")


@pytest.mark.parametrize("files", [5, 1], ids=["by_file", "by_record"])
def test_two_pipelines_read_disjoint_parts_that_cover_every_record_each_pass(tmp_path, files):
    stream = _ids(tmp_path, files, 23)
    passes = [[], []]  # per worker: its records of pass 0 and pass 1
    steps = set()
    for worker in range(2):
        context = tf.distribute.InputContext(2, worker, 2)
        shards = worker_shards(stream, stream.files, 4, context, seed=3)
        steps.add(shards.steps)
        batches = stream.dataset(stream.files, 4, shuffle_buffer=5, seed=3, repeat=True,
                                 shards=shards)
        labels = [y.numpy().tolist() for _, y in batches.take(2 * shards.steps)]
        assert all(len(batch) <= 2 for batch in labels)  # the per-worker batch: 4 / 2
        passes[worker] = [sum(labels[:shards.steps], []), sum(labels[shards.steps:], [])]
    assert len(steps) == 1  # every worker's pass has the same number of batches
    for number in range(2):
        first, second = passes[0][number], passes[1][number]
        assert not set(first) & set(second)
        assert sorted(first + second) == list(range(23))
    assert passes[0][0] != passes[0][1]  # each pass reshuffled


@pytest.mark.parametrize("files", [5, 1], ids=["by_file", "by_record"])
def test_each_worker_resumes_its_own_part_mid_pass(tmp_path, files):
    """A worker's stream started at (pass 1, 2 batches done) yields what its unbroken stream
    yields from there, shuffled (the per-worker position a checkpoint restores)."""
    stream = _ids(tmp_path, files, 23)
    for worker in range(2):
        shards = worker_shards(stream, stream.files, 4, tf.distribute.InputContext(2, worker, 2),
                               seed=3)
        options = {"shuffle_buffer": 5, "seed": 3, "repeat": True, "shards": shards}
        unbroken = [y.numpy().tolist() for _, y in stream.dataset(stream.files, 4, **options)
                    .take(2 * shards.steps)]
        start = tf.Variable([1, 2 * shards.batch_size], dtype=tf.int64)
        resumed = [y.numpy().tolist() for _, y in stream.dataset(
            stream.files, 4, start=start, **options).take(shards.steps - 2)]
        assert resumed == unbroken[shards.steps + 2:]


@pytest.mark.parametrize("files", [4, 1], ids=["by_file", "by_record"])
def test_a_split_by_key_is_shared_within_its_buckets(tmp_path, files):
    paths = datasets.write_tfrecord_shards(np.arange(40.0)[:, None], np.arange(40), tmp_path,
                                           files)
    stream = datasets.Stream(paths, {"x": {"dtype": "float32", "shape": [1]}, "y": "int64"},
                             key="y")  # x is the record's index
    part = stream.split(0.3, 0.0, seed=0, by_key=True)["train"]
    expected = sorted(v for x in stream.dataset(part, 64) for v in x.numpy().ravel())
    seen = []
    for worker in range(2):
        shards = worker_shards(stream, part, 4, tf.distribute.InputContext(2, worker, 2), 0)
        seen.append([v for x in stream.dataset(part, 4, shards=shards)
                     for v in x.numpy().ravel()])
    assert 20 < len(expected) < 40 and not set(seen[0]) & set(seen[1])
    assert sorted(seen[0] + seen[1]) == expected


def test_a_split_that_cannot_be_shared_is_refused(tmp_path):
    stream = _ids(tmp_path, 1, 1)
    with pytest.raises(NotShardable, match="split of 1 file.s. holds 1 record.s. for 2 work"):
        worker_shards(stream, stream.files, 4, tf.distribute.InputContext(2, 0, 2), seed=0)
    with pytest.raises(NotShardable, match="batch_size=5 cannot be divided among the 2"):
        worker_shards(stream, stream.files, 5, tf.distribute.InputContext(2, 0, 2), seed=0)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run in this process, without a strategy."""
    from graphfit.recipes import load_recipe
    from graphfit.recipes.running import training_run

    folder = tmp_path_factory.mktemp("one")
    _shards(folder / "shards")  # 4 training, 2 validation, 2 test files, 8 records each
    (folder / "die_hook.py").write_text(DIE_HOOK)
    (folder / "stream.yaml").write_text(RECIPE)
    import sys

    sys.path.insert(0, str(folder))
    try:
        result = training_run.train(load_recipe(str(folder / "stream.yaml")),
                                    run_dir=str(folder / "run"), verbose=0)
    finally:
        sys.path.remove(str(folder))
    return folder, result


def test_two_workers_stopped_mid_epoch_resume_to_the_one_process_run(reference, tmp_path):
    folder, single = reference
    _shards(tmp_path / "shards")
    (tmp_path / "die_hook.py").write_text(DIE_HOOK)
    (tmp_path / "stream.yaml").write_text(RECIPE)
    sets = ["--set", "distribute={strategy: multi_worker, timeout: 60}"]
    # Worker 1 dies after its 3rd batch of epoch 2 (4 an epoch); the chief saved after the 2nd.
    chief, other = _workers(tmp_path, lambda i: ["train", "stream.yaml", *sets, "--run-dir",
                                                 "run", "--verbose", "0"],
                            {"GRAPHFIT_TEST_DIE": "1:1:2"})
    assert other.returncode == 17, other.stderr[-3000:]
    for index, done in enumerate((chief, other)):  # each its own 2 files: 16 of 32 records
        assert (f"graphfit: worker {index} of 2 reads its own part of the stream: 2 of the 4 "
                f"training files (16 records, 4 batches of 4 a pass)") in done.stderr
    assert chief.returncode == 1 and "WorkerLost" in chief.stderr, chief.stderr[-3000:]
    # With the plots on: the test split is divided among the workers.
    chief, other = _workers(tmp_path, lambda i: ["train", "--resume", str(tmp_path / "run"),
                                                 "--verbose", "0"], {"GRAPHFIT_PLOTS": "1"})
    assert chief.returncode == 0 and other.returncode == 0, chief.stderr[-3000:] + other.stderr
    history = json.loads((tmp_path / "run" / "history.json").read_text())
    expected = json.loads((folder / "run" / "history.json").read_text())
    assert set(history) == set(expected) and len(history["loss"]) == 3
    for key, values in expected.items():
        # The resumed epoch's training loss and accuracy are means over its batches after
        # the restart only (as on one device); its validation and the other epochs match.
        epochs = list(range(len(values))) if key.startswith(("val_", "test_")) else [0, 2]
        assert np.allclose(np.take(history[key], epochs), np.take(values, epochs), rtol=0,
                           atol=TOLERANCE), key
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    for stage in ("val", "test"):
        for key, value in single.metrics[stage].items():
            assert abs(metrics[stage][key] - value) < TOLERANCE, (stage, key)
    assert (tmp_path / "run" / "learning_curves.png").exists()
    from graphfit.recipes.running import runner

    resumed = runner.load_run(str(tmp_path / "run"))[0].model
    for a, b in zip(single.model.get_weights(), resumed.get_weights()):
        np.testing.assert_allclose(a, b, rtol=0, atol=TOLERANCE)
