"""`read_image_folder` lists and decodes a folder as `keras.utils.image_dataset_from_directory`
does (class order, labels, pixels, label modes), runs a parallel, prefetched tf.data pipeline,
and refuses or skips what it cannot use: corrupt images, one class, an empty folder."""

from __future__ import annotations

import importlib.util
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from graphfit.datasets import read_image_folder
from graphfit.datasets.image_folder import load_images

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))


def _shapes_module():
    spec = importlib.util.spec_from_file_location(
        "make_shapes", os.path.join(REPO, "recipes", "data", "make_shapes.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_folder(root, count=5, size=10, classes=("circle", "square", "triangle"), seed=0):
    """`count` PNGs of each shape class (a few in a nested folder), plus files Keras skips."""
    shapes = _shapes_module()
    rng = np.random.default_rng(seed)
    for kind in classes:
        for index in range(count):
            folder = os.path.join(root, kind, "more" if index % 3 == 2 else "")
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, f"{kind}_{index}.png"), "wb") as handle:
                handle.write(shapes.png_bytes(shapes.shape_image(kind, size, rng)))
        with open(os.path.join(root, kind, "notes.txt"), "w") as handle:
            handle.write("not an image")
    return str(root)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_folder(tmp_path_factory.mktemp("shapes"))


def _keras_batches(root, **options):
    dataset = keras.utils.image_dataset_from_directory(root, shuffle=False, batch_size=100,
                                                       verbose=False, **options)
    x, y = next(iter(dataset))
    return dataset, x.numpy(), y.numpy()


@pytest.mark.parametrize("color_mode, size, interpolation", [("rgb", (7, 9), "bilinear"),
                                                             ("grayscale", (10, 10), "nearest"),
                                                             ("rgba", (5, 5), "area")])
def test_files_labels_and_pixels_equal_keras(folder, color_mode, size, interpolation):
    ours = read_image_folder(folder, image_size=size, color_mode=color_mode,
                             interpolation=interpolation)
    dataset, x, y = _keras_batches(folder, image_size=size, color_mode=color_mode,
                                   interpolation=interpolation)
    assert ours.class_names == dataset.class_names == ["circle", "square", "triangle"]
    assert ours.paths == list(dataset.file_paths)  # the nested files too, in Keras's order
    np.testing.assert_array_equal(ours.labels, y)
    batches = list(ours.dataset(batch_size=4).as_numpy_iterator())
    assert [len(b[0]) for b in batches] == [4, 4, 4, 3]
    got_x = np.concatenate([b[0] for b in batches])
    assert got_x.dtype == np.float32 and got_x.shape == x.shape
    np.testing.assert_array_equal(got_x, x)
    np.testing.assert_array_equal(np.concatenate([b[1] for b in batches]), y)


@pytest.mark.parametrize("label_mode", ["categorical", "binary"])
def test_label_modes_equal_keras(tmp_path, label_mode, folder):
    root = folder if label_mode == "categorical" else write_folder(
        tmp_path, count=3, classes=("circle", "square"))
    ours = read_image_folder(root, image_size=(4, 4), label_mode=label_mode)
    _, _, y = _keras_batches(root, image_size=(4, 4), label_mode=label_mode)
    labels = np.concatenate([b[1] for b in ours.dataset(batch_size=8).as_numpy_iterator()])
    np.testing.assert_array_equal(labels, y)
    assert labels.dtype == y.dtype


def test_pipeline_decodes_in_parallel_and_prefetches(folder):
    dataset = read_image_folder(folder, image_size=(4, 4)).dataset(batch_size=4, shuffle=True,
                                                                   seed=3)
    assert dataset.element_spec[0].shape.as_list() == [None, 4, 4, 3]
    ops = [node.op for node in tf.compat.v1.GraphDef.FromString(
        dataset._as_serialized_graph().numpy()).node]
    assert "ParallelMapDatasetV2" in ops and "PrefetchDataset" in ops
    assert "ShuffleDatasetV3" in ops or "ShuffleDatasetV2" in ops
    # shuffled per epoch, from the seed: two epochs differ, the same seed repeats them
    first, second = ([b[1].tolist() for b in dataset.as_numpy_iterator()] for _ in range(2))
    again = read_image_folder(folder, image_size=(4, 4)).dataset(batch_size=4, shuffle=True,
                                                                 seed=3)
    assert first != second and [b[1].tolist() for b in again.as_numpy_iterator()] == first


def test_corrupt_image_fails_naming_it_or_is_skipped_and_counted(tmp_path):
    root = write_folder(tmp_path, count=3, classes=("a", "b"))
    broken = os.path.join(root, "b", "broken.png")
    with open(broken, "wb") as handle:
        handle.write(b"\x89PNG\r\n\x1a\n not really a png")
    with pytest.raises(ValueError, match=r"the image .*broken\.png cannot be decoded.*1 of 7 "
                                         r"images are corrupt.*on_corrupt: skip"):
        read_image_folder(root, image_size=(4, 4))
    skipped = read_image_folder(root, image_size=(4, 4), on_corrupt="skip")
    assert skipped.skipped == [broken] and len(skipped) == 6
    assert broken not in skipped.paths
    with pytest.raises(ValueError, match=r"broken\.png cannot be decoded"):
        load_images([broken], (4, 4))


def test_rgba_on_jpegs_names_the_color_mode_not_corrupt_files(tmp_path):
    root = write_folder(tmp_path, count=3, classes=("a", "b"))
    pixels = tf.cast(tf.fill([4, 4, 3], 200), tf.uint8)
    with open(os.path.join(root, "a", "photo.jpg"), "wb") as handle:
        handle.write(tf.io.encode_jpeg(pixels).numpy())
    with pytest.raises(ValueError, match=r"color_mode 'rgba' cannot read JPEG files.*1 of the "
                                         r"7 images are JPEGs.*Use color_mode: rgb"):
        read_image_folder(root, image_size=(4, 4), color_mode="rgba")
    assert len(read_image_folder(root, image_size=(4, 4), color_mode="rgb")) == 7


def test_one_class_empty_and_flat_folders_are_refused(tmp_path):
    one = write_folder(tmp_path / "one", count=2, classes=("only",))
    with pytest.raises(ValueError, match=r"has one class subfolder \('only'\); a classifier "
                                         r"needs at least two"):
        read_image_folder(one)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="has no class subfolders .it holds no images"):
        read_image_folder(empty)
    flat = write_folder(tmp_path / "flat", count=2, classes=("x", "y"))
    (tmp_path / "flat" / "z").mkdir()
    with pytest.raises(ValueError, match=r"class folder .*z holds no image files"):
        read_image_folder(flat)
    with pytest.raises(ValueError, match="image folder not found"):
        read_image_folder(tmp_path / "nowhere")
    with pytest.raises(ValueError, match=r"image_size must be \[height, width\].*Received: "
                                         r"image_size=\(0, 3\)"):
        read_image_folder(flat, image_size=(0, 3))
    with pytest.raises(ValueError, match="color_mode must be one of grayscale, rgb, rgba. "
                                         "Received: color_mode='cmyk'"):
        read_image_folder(flat, color_mode="cmyk")
