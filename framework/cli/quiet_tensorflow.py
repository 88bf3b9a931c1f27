"""Importing TensorFlow without its start-up chatter on the terminal.

TensorFlow 2.21 writes 7-13 lines to stderr from C++ when it is imported and when it first
looks for devices (absl's "All log messages before absl::InitializeLog()", oneDNN and CPU
feature notes, and `E0000 ... failed call to cuInit` on a machine without a GPU).
`TF_CPP_MIN_LOG_LEVEL` does not reach absl's early lines, so the command line captures file
descriptor 2 while TensorFlow starts and replays every line that is not known start-up noise:
real errors stay visible.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile

__all__ = ["is_startup_noise", "quiet_stderr", "import_tensorflow"]

_NOISE = re.compile(
    r"WARNING: All log messages before absl::InitializeLog\(\) is called"
    r"|[IW]\d{4} \d\d:\d\d:\d"  # absl INFO / WARNING lines: "I0000 00:00:17954..."
    r"|E\d{4} .*(cuInit|cuda|CUDA|cudart|GPU)"  # no GPU here is not an error
    r"|To enable the following instructions:"
    r"|This TensorFlow binary is optimized"
)


def is_startup_noise(line: str) -> bool:
    """Whether a stderr line is one of TensorFlow's start-up notes (kept out of sight)."""
    return bool(_NOISE.match(line))


@contextlib.contextmanager
def quiet_stderr():
    """Captures what anything (C++ included) writes to stderr inside the block, then writes
    back every line that is not start-up noise."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            kept = [line for line in capture.read().decode("utf-8", "replace").splitlines()
                    if line.strip() and not is_startup_noise(line)]
            if kept:
                print("\n".join(kept), file=sys.stderr)


def import_tensorflow() -> None:
    """Imports TensorFlow and graphfit, and lets TensorFlow find its devices, quietly."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    with quiet_stderr():
        import tensorflow as tf

        import graphfit.layers  # noqa: F401  (Keras's own start-up lines come with it)

        tf.config.list_physical_devices()  # the cuInit complaint comes at the first query
