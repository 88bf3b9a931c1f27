"""Recipes with files and user code: CSV by column names, .npz, standardization on the
training split only, `imports:` with registered layers, `class_path:`, data functions."""

import csv
import json
import textwrap

import numpy as np
import pytest

from graphfit import cli
from graphfit.recipes import RecipeError, load_recipe
from graphfit.recipes.running import training_run
from graphfit.recipes.running.data_loading import load_splits

BINARY = textwrap.dedent("""\
    loss: {type: BinaryCrossentropy, from_logits: true}
    metrics: [accuracy]
    training: {epochs: 2, batch_size: 16}
""")


def _table(path, header, rows):
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


@pytest.fixture(scope="module")
def csv_run(tmp_path_factory):
    """One run of a CSV recipe for the module's tests (they only read it): (recipe, result,
    features, the folder of the recipe, its table and its run)."""
    tmp_path = tmp_path_factory.mktemp("csv")
    rng = np.random.default_rng(0)
    features = rng.normal(size=(120, 3)) * [1.0, 10.0, 100.0] + [0.0, 5.0, -50.0]
    labels = (features[:, 0] + features[:, 1] / 10 > 0.5).astype(int)
    _table(tmp_path / "table.csv", ["id", "a", "b", "c", "label"],
           [[f"row{i}", *f, int(l)] for i, (f, l) in enumerate(zip(features, labels))])
    (tmp_path / "csv.yaml").write_text(textwrap.dedent("""\
        data: {source: csv, path: table.csv, features: [a, b, c], target: label,
               standardize: true}
        model: [{type: Dense, units: 4, activation: relu}, {type: Dense, units: 1}]
    """) + BINARY)
    recipe = load_recipe(str(tmp_path / "csv.yaml"))
    return (recipe, training_run.train(recipe, run_dir=str(tmp_path / "run"), verbose=0),
            features, tmp_path)


def test_csv_paths_are_read_from_the_recipe_folder_and_stored_absolute(csv_run):
    recipe, _, _, folder = csv_run
    assert recipe.data["path"] == str(folder / "table.csv")


def test_standardization_uses_the_training_split_only(csv_run):
    recipe, result, features, folder = csv_run
    record = json.loads((folder / "run" / "preprocessing.json").read_text())
    assert record["feature_names"] == ["a", "b", "c"]
    order = np.random.default_rng(recipe.seed).permutation(120)
    n_test, n_val = round(120 * 0.15), round(120 * 0.15)
    train_rows = features[order[: 120 - n_test - n_val]].astype(np.float32)
    np.testing.assert_allclose(record["standardize"]["mean"], train_rows.mean(axis=0), rtol=1e-5)
    np.testing.assert_allclose(record["standardize"]["std"], train_rows.std(axis=0), rtol=1e-5)
    assert not np.allclose(record["standardize"]["mean"], features.mean(axis=0), rtol=1e-3)
    splits = load_splits(recipe.config)
    np.testing.assert_allclose(splits.train[0].mean(axis=0), 0.0, atol=1e-5)
    assert abs(splits.test[0].mean(axis=0)).max() > 1e-3  # other splits: train's statistics


def test_predict_takes_columns_by_name_in_any_order(csv_run, tmp_path):
    _, result, features, folder = csv_run
    rows = features[:7]
    _table(tmp_path / "new.csv", ["c", "note", "a", "b"],
           [[r[2], "x", r[0], r[1]] for r in rows])
    assert cli.main(["predict", result.run_dir, "--input", str(tmp_path / "new.csv"),
                     "--output", str(tmp_path / "p.csv")]) == 0
    with open(tmp_path / "p.csv") as handle:
        table = list(csv.reader(handle))
    assert table[0] == ["class", "probability"]
    record = json.loads((folder / "run" / "preprocessing.json").read_text())
    scaled = (rows - record["standardize"]["mean"]) / record["standardize"]["std"]
    logits = result.model.predict(scaled.astype(np.float32), verbose=0)[:, 0]
    np.testing.assert_allclose([float(r[1]) for r in table[1:]], 1 / (1 + np.exp(-logits)),
                               rtol=1e-5)


def test_npz_source(tmp_path):
    x, y = np.random.default_rng(1).normal(size=(60, 5)), np.arange(60) % 2
    np.savez(tmp_path / "data.npz", inputs=x, labels=y)
    (tmp_path / "n.yaml").write_text(
        "data: {source: npz, path: data.npz, x_key: inputs, y_key: labels}\n"
        "model: [{type: Dense, units: 1}]\n" + BINARY)
    recipe = load_recipe(str(tmp_path / "n.yaml"))
    splits = load_splits(recipe.config)
    assert len(splits.train[0]) + len(splits.val[0]) + len(splits.test[0]) == 60
    assert cli.main(["validate", str(tmp_path / "n.yaml")]) == 0


USER_MODULE = textwrap.dedent("""\
    import numpy as np
    import tensorflow as tf
    import graphfit as gf

    @gf.register_layer
    class RecipeTestScale(gf.Layer):
        '''Multiplies by a learned scalar.'''
        def __init__(self, initial=1.0, **kwargs):
            super().__init__(**kwargs)
            if initial <= 0:
                raise ValueError(f"initial must be positive. Received: initial={initial}")
            self.initial = initial
        def build(self, input_shape):
            self.scale = self.add_weight("scale", shape=(), initializer=gf.layers.Dense(1)
                                         and tf.keras.initializers.Constant(self.initial))
        def call(self, x, training=False):
            return x * self.scale

    class Unregistered(RecipeTestScale):
        pass

    def line(n=50, slope=2.0):
        x = np.linspace(-1, 1, n, dtype=np.float32)[:, None]
        return x, slope * x

    def as_dataset(n=64):
        x = np.linspace(-1, 1, n, dtype=np.float32)[:, None]
        return tf.data.Dataset.from_tensor_slices((x, 3 * x)).batch(16)
""")


@pytest.fixture
def user_folder(tmp_path):
    (tmp_path / "recipe_test_user.py").write_text(USER_MODULE)
    return tmp_path


def test_imports_registered_layers_and_data_functions(user_folder):
    (user_folder / "u.yaml").write_text(textwrap.dedent("""\
        imports: [recipe_test_user]
        data: {source: function, function: "recipe_test_user:line", arguments: {n: 40}}
        model:
          - {type: RecipeTestScale, initial: 0.5}
          - {class_path: recipe_test_user.Unregistered, initial: 2.0}
        loss: mse
        training: {epochs: 2, batch_size: 8}
    """))
    recipe = load_recipe(str(user_folder / "u.yaml"))
    result = training_run.train(recipe, run_dir=str(user_folder / "run"), verbose=0)
    assert [type(layer).__name__ for layer in result.model.layers] == \
        ["RecipeTestScale", "Unregistered"]
    assert sum(len(s[0]) for s in (load_splits(recipe.config).train,)) == 40 - 6 - 6


def test_user_constructor_errors_point_at_the_argument(user_folder, capsys):
    (user_folder / "bad.yaml").write_text(textwrap.dedent("""\
        imports: [recipe_test_user]
        data: {source: function, function: "recipe_test_user:line"}
        model:
          - {type: RecipeTestScale, initial: -1.0}
        loss: mse
    """))
    assert cli.main(["validate", str(user_folder / "bad.yaml")]) == 2
    err = capsys.readouterr().err
    assert (f"{user_folder / 'bad.yaml'}:4:29: model.layers[0].initial: RecipeTestScale: "
            f"initial must be positive. Received: initial=-1.0") in err


def test_a_function_returning_a_dataset_needs_separate_validation_data(user_folder, capsys):
    (user_folder / "ds.yaml").write_text(textwrap.dedent("""\
        imports: [recipe_test_user]
        data: {source: function, function: "recipe_test_user:as_dataset"}
        model: [{type: Dense, units: 1}]
        loss: mse
    """))
    assert cli.main(["validate", str(user_folder / "ds.yaml")]) == 2
    assert "data.function returned a tf.data.Dataset, which cannot be split by a fraction" in \
        capsys.readouterr().err
    overrides = ["--set", "training.validation_split=0", "--set", "training.test_split=0",
                 "--set", "training.epochs=1"]
    assert cli.main(["train", str(user_folder / "ds.yaml"), "--run-dir",
                     str(user_folder / "r"), "--verbose", "0", *overrides]) == 0


def test_a_data_function_that_raises_is_reported_at_data_function(user_folder, capsys):
    # The user's own error and the user's own file:line, at the recipe entry; exit 2.
    (user_folder / "recipe_test_failing.py").write_text(
        "def load():\n    raise RuntimeError('the database is down')\n")
    (user_folder / "f.yaml").write_text(
        "data: {source: function, function: 'recipe_test_failing:load'}\n"
        "model: [{type: Dense, units: 1}]\nloss: mse\n")
    assert cli.main(["train", str(user_folder / "f.yaml"), "--verbose", "0"]) == 2
    err = capsys.readouterr().err
    assert (f"{user_folder / 'f.yaml'}:1:26: data.function: recipe_test_failing:load failed: "
            f"RuntimeError: the database is down (at "
            f"{user_folder / 'recipe_test_failing.py'}:2)") in err, err
    assert "Traceback" not in err and "graphfit/" not in err
    with pytest.raises(RecipeError):
        cli.main(["train", str(user_folder / "f.yaml"), "--debug"])
