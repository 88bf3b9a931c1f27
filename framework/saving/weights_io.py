"""Saving and loading a model's weights as TensorFlow checkpoints."""

from __future__ import annotations

import os
import tempfile

import tensorflow as tf

from graphfit.core.variables import assign_in_order

__all__ = ["save", "load", "assign_in_order", "mismatch_reason"]


def _check_prefix(filepath: str) -> str:
    filepath = os.fspath(filepath)
    if filepath.endswith((".h5", ".keras")):
        raise ValueError(
            f"graphfit writes TensorFlow checkpoints, not Keras {os.path.splitext(filepath)[1]} "
            f"files. Give a path prefix such as 'weights/model' (files model.index and "
            f"model.data-* are written). Received: {filepath!r}"
        )
    return filepath


def save(model, filepath: str) -> str:
    """Writes `tf.train.Checkpoint(model=model)` at the prefix `filepath`.

    The files are written under a temporary prefix in the same folder and then renamed over the
    old ones, data first and index last, so an interrupted save never leaves a truncated file
    at `filepath`.
    """
    filepath = _check_prefix(filepath)
    folder = os.path.dirname(os.path.abspath(filepath))
    os.makedirs(folder, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".graphfit-save-", dir=folder)
    try:
        tf.train.Checkpoint(model=model).write(os.path.join(staging, "ckpt"))
        files = sorted(os.listdir(staging), key=lambda name: name.endswith(".index"))
        for name in files:
            suffix = name[len("ckpt"):]
            os.replace(os.path.join(staging, name), filepath + suffix)
    finally:
        for name in os.listdir(staging):
            os.remove(os.path.join(staging, name))
        os.rmdir(staging)
    return filepath


def load(model, filepath: str) -> None:
    """Reads the model's variables from a checkpoint written by `save` (or a training
    checkpoint that holds the model under the name `model`).

    Raises:
        FileNotFoundError: when no checkpoint is at `filepath`.
        ValueError: when the checkpoint does not match the model's variables.
    """
    filepath = _check_prefix(filepath)
    if os.path.isdir(filepath):
        latest = tf.train.latest_checkpoint(filepath)
        if latest is None:
            inside = [name for name in ("latest", "best")
                      if tf.train.latest_checkpoint(os.path.join(filepath, name))]
            hint = (f" It holds a ModelCheckpoint's {' and '.join(f'{n}/' for n in inside)}: "
                    f"load {os.path.join(filepath, inside[0])!r}." if inside else "")
            raise FileNotFoundError(f"No checkpoint found in the folder {filepath!r}.{hint}")
        filepath = latest
    if not os.path.exists(filepath + ".index"):
        raise FileNotFoundError(
            f"No checkpoint at {filepath!r} (expected {filepath}.index). Give the prefix that "
            f"save_weights() was called with."
        )
    before = [v.numpy() for v in model.variables]
    try:
        status = tf.train.Checkpoint(model=model).read(filepath)
        status.assert_existing_objects_matched()
        # Only the model is wanted: a training checkpoint's optimizer slots, fit state and
        # save counter are left out on purpose (TensorFlow would log each one at exit).
        status.expect_partial()
    except (AssertionError, ValueError, tf.errors.InvalidArgumentError) as error:
        # A failed load must not leave the model half overwritten.
        for variable, value in zip(model.variables, before):
            variable.assign(value)
        raise ValueError(
            f"The checkpoint {filepath!r} does not match model {model.name!r}: "
            f"{mismatch_reason(error, model)} Load weights into a model built exactly like "
            f"the one that saved them."
        ) from None


def mismatch_reason(error: Exception, model) -> str:
    """What a failed restore says, shortened to one sentence when the checkpoint's variables
    have another dtype than the model's (TensorFlow repeats that for every tensor)."""
    text = str(error)
    if "expected dtype" not in text or "original dtype" not in text:
        return text
    saved_name = text.split("original dtype ", 1)[1].split()[0]
    if saved_name == "int32" and text.split("expected dtype ", 1)[1].split()[0] == "int64":
        return ("it holds an int32 state variable where this graphfit keeps int64 "
                "(Levenberg–Marquardt's convergence code: TensorFlow keeps int32 variables "
                "off the GPU, out of an XLA step's reach), so an earlier graphfit wrote it: "
                "resume it with that version, or start the fit afresh.")
    saved = {"float": "float32", "double": "float64", "half": "float16"}.get(
        saved_name, "another dtype")
    return (f"it holds {saved} variables, and the model's are {model.variable_dtype.name} "
            f"(dtype policy {model.dtype_policy.name!r}). float32 variables load under "
            f"'float32', 'mixed_bfloat16' and 'mixed_float16'; build the model with the dtype "
            f"the checkpoint was saved with.")
