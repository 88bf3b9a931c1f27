"""Images sorted into class subfolders, read as `keras.utils.image_dataset_from_directory` does.

    photos/
        cat/  a.jpg  b.png ...
        dog/  c.jpg ...

The class names are the sorted subfolder names and a class's id is its place in that list;
the files of each class are listed (recursively, in sorted order) with the extensions Keras
reads (`.bmp .gif .jpeg .jpg .png`). Other files and files directly in the top folder are
ignored, as Keras does.

`read_image_folder` lists the files and checks, in one parallel decoding pass, that every
image decodes: a corrupt one fails with its path, or (``on_corrupt="skip"``) is left out and
counted (`ImageFolder.skipped`). `ImageFolder.dataset` is the `tf.data` pipeline a model
trains on: the file paths (shuffled per epoch, from a seed, before any decoding), read and
decoded in parallel (`num_parallel_calls=AUTOTUNE`, in a deterministic order), resized with
`tf.image.resize` to `image_size`, batched and prefetched. Images come out as float32 in
[0, 255] (Keras's convention: a `Rescaling` layer in the model scales them).

Example:

    >>> import os, tempfile
    >>> import numpy as np, tensorflow as tf
    >>> root = tempfile.mkdtemp()
    >>> for name, value in (("dark", 0), ("light", 255)):
    ...     os.makedirs(os.path.join(root, name))
    ...     png = tf.io.encode_png(np.full((4, 4, 1), value, np.uint8))
    ...     tf.io.write_file(os.path.join(root, name, "a.png"), png)
    >>> folder = read_image_folder(root, image_size=(2, 2), color_mode="grayscale")
    >>> folder.class_names, folder.labels.tolist()
    (['dark', 'light'], [0, 1])
    >>> x, y = next(iter(folder.dataset(batch_size=2)))
    >>> x.shape.as_list(), y.numpy().tolist()
    ([2, 2, 2, 1], [0, 1])
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

__all__ = ["ImageFolder", "read_image_folder", "load_images", "IMAGE_EXTENSIONS",
           "COLOR_MODES", "LABEL_MODES", "INTERPOLATIONS"]

IMAGE_EXTENSIONS = (".bmp", ".gif", ".jpeg", ".jpg", ".png")  # Keras's ALLOWLIST_FORMATS
COLOR_MODES = {"grayscale": 1, "rgb": 3, "rgba": 4}
LABEL_MODES = ("int", "categorical", "binary")
INTERPOLATIONS = ("bilinear", "nearest", "bicubic", "area", "lanczos3", "lanczos5",
                  "gaussian", "mitchellcubic")


@dataclasses.dataclass
class ImageFolder:
    """The image files of a folder with their labels, and how to decode them.

    Attributes:
        root: the folder.
        paths: the image files, class by class, each class's files in sorted order.
        labels: int32 class id per file.
        class_names: the sorted subfolder names (id -> name).
        image_size: (height, width) every image is resized to.
        color_mode: "grayscale", "rgb" or "rgba".
        interpolation: the `tf.image.resize` method.
        label_mode: "int" (ids), "categorical" (one-hot) or "binary" (float 0/1, two classes).
        skipped: the corrupt files left out (``on_corrupt="skip"``).

    Example (`read_image_folder` makes one from a folder):

        >>> folder = ImageFolder("/photos", ["/photos/cat/a.png", "/photos/dog/b.png"],
        ...                      np.array([0, 1], np.int32), ["cat", "dog"], (8, 8))
        >>> folder.subset([1]).paths, folder.image_shape
        (['/photos/dog/b.png'], (8, 8, 3))
    """

    root: str
    paths: list[str]
    labels: np.ndarray
    class_names: list[str]
    image_size: tuple[int, int] = (256, 256)
    color_mode: str = "rgb"
    interpolation: str = "bilinear"
    label_mode: str = "int"
    skipped: list[str] = dataclasses.field(default_factory=list)

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """(height, width, channels) of a decoded image."""
        return (*self.image_size, COLOR_MODES[self.color_mode])

    def subset(self, indices) -> "ImageFolder":
        """The files at `indices` (a split), with the same classes and decoding."""
        indices = np.asarray(indices, dtype=np.int64)
        return dataclasses.replace(self, paths=[self.paths[i] for i in indices],
                                   labels=self.labels[indices], skipped=[])

    def dataset(self, batch_size: int = 32, shuffle: bool = False, seed: int | None = None):
        """A `tf.data.Dataset` of (images, labels) batches: decoded in parallel, prefetched.

        Args:
            batch_size: images per batch (the last batch may be smaller).
            shuffle: shuffle the files anew every epoch (from `seed`), before decoding.
            seed: the shuffle's seed.
        """
        import tensorflow as tf

        from graphfit.datasets.pipeline_functions import own_function

        files = tf.data.Dataset.from_tensor_slices((tf.constant(self.paths, tf.string),
                                                    tf.constant(self.labels, tf.int32)))
        if shuffle:
            files = files.shuffle(max(len(self.paths), 1), seed=seed,
                                  reshuffle_each_iteration=True)
        decode = self._decoder()
        encode = _label_encoder(self.label_mode, len(self.class_names))
        images = files.map(own_function(lambda path, label: (decode(path), encode(label))),
                           num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        return images.batch(batch_size).prefetch(tf.data.AUTOTUNE)

    def _decoder(self):
        size, channels, method = self.image_size, COLOR_MODES[self.color_mode], \
            self.interpolation
        return lambda path: decode_resized(path, size, channels, method)


def decode_resized(path, image_size, channels: int, interpolation: str = "bilinear"):
    """One image file, decoded (`tf.io.decode_image`, first frame of a GIF) and resized to
    `image_size` as float32: what Keras's `image_dataset_from_directory` does per file."""
    import tensorflow as tf

    image = tf.io.decode_image(tf.io.read_file(path), channels=channels,
                               expand_animations=False)
    image = tf.image.resize(image, image_size, method=interpolation)
    image.set_shape((*image_size, channels))
    return tf.cast(image, tf.float32)  # "nearest" keeps uint8; the model gets float32


def _label_encoder(label_mode: str, classes: int):
    import tensorflow as tf

    if label_mode == "categorical":
        return lambda label: tf.one_hot(label, classes)
    if label_mode == "binary":
        return lambda label: tf.expand_dims(tf.cast(label, tf.float32), -1)
    return lambda label: label


def _list_files(root: str) -> tuple[list[str], list[str], list[int]]:
    """(class names, files, label per file), as Keras's `index_directory` lists them."""
    class_names = sorted(entry for entry in os.listdir(root)
                         if os.path.isdir(os.path.join(root, entry)))
    paths, labels = [], []
    for label, name in enumerate(class_names):
        found = []  # Keras's order: folders sorted, then the files of each sorted
        for folder, _, files in sorted(os.walk(os.path.join(root, name), followlinks=True),
                                       key=lambda entry: entry[0]):
            found += [os.path.join(folder, file) for file in sorted(files)
                      if file.lower().endswith(IMAGE_EXTENSIONS)]
        if not found:
            raise ValueError(f"the class folder {os.path.join(root, name)} holds no image "
                             f"files ({' '.join(IMAGE_EXTENSIONS)}); add images or remove the "
                             f"folder")
        paths += found
        labels += [label] * len(found)
    return class_names, paths, labels


def _check_classes(root: str, class_names: list[str]) -> None:
    if not class_names:
        images = [f for f in os.listdir(root) if f.lower().endswith(IMAGE_EXTENSIONS)]
        where = (f"its {len(images)} image(s) lie directly in it" if images
                 else "it holds no images")
        raise ValueError(f"the image folder {root} has no class subfolders ({where}); put "
                         f"each class's images in a subfolder named after the class "
                         f"(e.g. {os.path.join(root, 'cat')}/, {os.path.join(root, 'dog')}/)")
    if len(class_names) == 1:
        raise ValueError(f"the image folder {root} has one class subfolder "
                         f"({class_names[0]!r}); a classifier needs at least two: add a "
                         f"subfolder of images for each other class")


def _corrupt_files(paths: list[str], channels: int) -> list[str]:
    """The files that do not decode, found in one parallel `tf.data` pass."""
    import tensorflow as tf

    from graphfit.datasets.pipeline_functions import own_function

    if not paths:
        return []
    indices = tf.data.Dataset.range(len(paths))
    files = tf.constant(paths, tf.string)

    @own_function
    def decodes(index):
        image = tf.io.decode_image(tf.io.read_file(tf.gather(files, index)),
                                   channels=channels, expand_animations=False)
        return index, tf.reduce_sum(tf.shape(image))

    readable = indices.map(decodes, num_parallel_calls=tf.data.AUTOTUNE).ignore_errors()
    good = {int(index) for index, _ in readable.as_numpy_iterator()}
    return [path for index, path in enumerate(paths) if index not in good]


def _refuse_jpegs_as_rgba(undecoded: list[str], count: int) -> None:
    """JPEG has no alpha channel, so rgba cannot decode any JPEG: that is the color mode's
    fault, not the files' (skipping them would drop every JPEG)."""
    jpegs = [path for path in undecoded if path.lower().endswith((".jpg", ".jpeg"))]
    if jpegs and not _corrupt_files(jpegs[:1], 3):
        raise ValueError(f"color_mode 'rgba' cannot read JPEG files, which have no alpha "
                         f"channel: {len(jpegs)} of the {count} images are JPEGs (such as "
                         f"{jpegs[0]}). Use color_mode: rgb, or convert them to PNG")


def _decode_error(path: str, channels: int) -> str:
    import tensorflow as tf

    try:
        tf.io.decode_image(tf.io.read_file(path), channels=channels, expand_animations=False)
    except (tf.errors.OpError, ValueError) as error:
        return getattr(error, "message", str(error)).strip().splitlines()[0]
    return "it could not be decoded"


def read_image_folder(path: str | os.PathLike, image_size=(256, 256), color_mode: str = "rgb",
                      interpolation: str = "bilinear", label_mode: str = "int",
                      on_corrupt: str = "fail") -> ImageFolder:
    """Lists an image folder's classes and files and checks that every image decodes.

    Args:
        path: the folder holding one subfolder per class.
        image_size: (height, width) to resize to.
        color_mode: "grayscale" (1 channel), "rgb" (3) or "rgba" (4).
        interpolation: a `tf.image.resize` method.
        label_mode: "int", "categorical" or "binary" (two classes only).
        on_corrupt: "fail" (a ValueError naming the first file that does not decode) or
            "skip" (left out, listed in `ImageFolder.skipped`).

    Raises:
        ValueError: no such folder, no or one class subfolder, a class folder without images,
            a corrupt image (with "fail"), or an argument out of range.
    """
    root = os.path.abspath(os.fspath(path))
    _check_arguments(image_size, color_mode, interpolation, label_mode, on_corrupt)
    if not os.path.isdir(root):
        raise ValueError(f"image folder not found: {root}" if not os.path.exists(root) else
                         f"{root} is a file; give the folder holding one subfolder per class")
    class_names, paths, labels = _list_files(root) if os.listdir(root) else ([], [], [])
    _check_classes(root, class_names)
    if label_mode == "binary" and len(class_names) != 2:
        raise ValueError(f"label_mode 'binary' needs two classes; {root} has "
                         f"{len(class_names)} ({', '.join(class_names)}): use 'int' or "
                         f"'categorical'")
    corrupt = _corrupt_files(paths, COLOR_MODES[color_mode])
    if color_mode == "rgba":
        _refuse_jpegs_as_rgba(corrupt, len(paths))
    if corrupt and on_corrupt == "fail":
        raise ValueError(f"the image {corrupt[0]} cannot be decoded "
                         f"({_decode_error(corrupt[0], COLOR_MODES[color_mode])}); "
                         f"{len(corrupt)} of {len(paths)} images are corrupt. Remove or "
                         f"replace them, or set on_corrupt: skip to train without them")
    left_out = set(corrupt)
    keep = [i for i, p in enumerate(paths) if p not in left_out]
    if not keep:
        raise ValueError(f"none of the {len(paths)} images in {root} can be decoded")
    return ImageFolder(root, [paths[i] for i in keep], np.asarray(labels, np.int32)[keep],
                       class_names, tuple(int(v) for v in image_size), color_mode,
                       interpolation, label_mode, corrupt)


def _check_arguments(image_size, color_mode, interpolation, label_mode, on_corrupt) -> None:
    if (not isinstance(image_size, (list, tuple)) or len(image_size) != 2
            or not all(isinstance(v, (int, np.integer)) and v > 0 for v in image_size)):
        raise ValueError(f"image_size must be [height, width], two positive integers. "
                         f"Received: image_size={image_size!r}")
    for name, value, allowed in (("color_mode", color_mode, tuple(COLOR_MODES)),
                                 ("interpolation", interpolation, INTERPOLATIONS),
                                 ("label_mode", label_mode, LABEL_MODES),
                                 ("on_corrupt", on_corrupt, ("fail", "skip"))):
        if value not in allowed:
            raise ValueError(f"{name} must be one of {', '.join(allowed)}. "
                             f"Received: {name}={value!r}")


def load_images(paths: list[str], image_size, color_mode: str = "rgb",
                interpolation: str = "bilinear", batch_size: int = 64) -> np.ndarray:
    """Image files decoded and resized as a run's training images were: float32 of shape
    (len(paths), height, width, channels), decoded in parallel.

    Raises:
        ValueError: naming the first file that cannot be decoded.
    """
    import tensorflow as tf

    from graphfit.datasets.pipeline_functions import own_function

    channels = COLOR_MODES[color_mode]
    bad = _corrupt_files(list(paths), channels)
    if bad:
        raise ValueError(f"the image {bad[0]} cannot be decoded "
                         f"({_decode_error(bad[0], channels)})")
    files = tf.data.Dataset.from_tensor_slices(tf.constant(list(paths), tf.string))
    images = files.map(own_function(
        lambda p: decode_resized(p, tuple(image_size), channels, interpolation)),
        num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    batches = [b for b in images.batch(batch_size).prefetch(tf.data.AUTOTUNE).as_numpy_iterator()]
    return np.concatenate(batches) if batches else np.zeros((0, *image_size, channels),
                                                           np.float32)


def corrupt_images(paths: list[str], color_mode: str = "rgb") -> list[str]:
    """The files of `paths` that do not decode as images of `color_mode` (one parallel pass);
    what `on_corrupt: skip` leaves out."""
    return _corrupt_files(list(paths), COLOR_MODES[color_mode])


def image_files(path: str) -> list[str]:
    """The image files of `path`: itself if it is one, else those under it (sorted,
    recursively); a ValueError when there are none."""
    path = os.path.abspath(path)
    if os.path.isfile(path):
        return [path]
    if not os.path.isdir(path):
        raise ValueError(f"not found: {path}")
    found = sorted(os.path.join(folder, file) for folder, _, files in os.walk(path)
                   for file in files if file.lower().endswith(IMAGE_EXTENSIONS))
    if not found:
        raise ValueError(f"{path} holds no image files ({' '.join(IMAGE_EXTENSIONS)})")
    return found


__all__ += ["image_files", "decode_resized", "corrupt_images"]
