"""`predict_images`: the export signature of an image-folder run that takes encoded files.

The export's `serving_default` / `predict` / `classify` take decoded, resized images (float32
`[batch, height, width, channels]`, 0-255), the model's own input. An image-folder run's export
also has `predict_images`, which takes the files' bytes (`images`: a string tensor of PNG,
JPEG, GIF or BMP files, one per row; in a TensorFlow Serving REST body
`{"instances": [{"b64": "..."}]}`), decodes and resizes each as the run's training images were
(`tf.io.decode_image`, first frame of a GIF, `tf.image.resize`), and returns `outputs` and,
for a classifier, `class` (int64) and `class_name` (the run's class names).
"""

from __future__ import annotations

import tensorflow as tf

from graphfit.datasets.image_folder import COLOR_MODES
from graphfit.export.signatures import classifier_kind

__all__ = ["image_functions", "IMAGE_SIGNATURE"]

IMAGE_SIGNATURE = "predict_images"


def image_functions(model, record: dict) -> dict:
    """{"predict_images": tf.function} for a model trained on an image folder whose
    preprocessing record (the run's preprocessing.json) is `record`."""
    folder = record["image_folder"]
    size = tuple(folder["image_size"])
    channels = COLOR_MODES[folder["color_mode"]]
    method = folder.get("interpolation", "bilinear")
    names = tf.constant(list(record.get("class_names") or ()), tf.string)
    kind = classifier_kind(model)

    def decode(data):
        image = tf.io.decode_image(data, channels=channels, expand_animations=False)
        image = tf.image.resize(image, size, method=method)
        image.set_shape((*size, channels))
        return tf.cast(image, tf.float32)

    def predict_images(images):
        pixels = tf.map_fn(decode, images,
                           fn_output_signature=tf.TensorSpec((*size, channels), tf.float32))
        outputs = model(pixels, training=False)
        result = {"outputs": tf.cast(outputs, model.variable_dtype)}
        if kind is None or isinstance(outputs, dict) or names.shape[0] == 0:
            return result
        if kind.labels == "binary":
            threshold = 0.0 if kind.from_logits else 0.5
            classes = tf.cast(outputs[:, 0] > threshold, tf.int64)
        else:
            classes = tf.argmax(outputs, axis=-1)
        return {**result, "class": classes, "class_name": tf.gather(names, classes)}

    return {IMAGE_SIGNATURE: tf.function(
        predict_images, input_signature=[tf.TensorSpec([None], tf.string, name="images")],
        autograph=False)}
