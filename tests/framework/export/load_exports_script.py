"""Loads SavedModels with plain TensorFlow (graphfit never imported) and runs every signature.

Run by test_export.py in a fresh process:
`python load_exports_script.py CASES.json OUT.npz [SHOW_DIR]`. CASES.json maps a case name to
{"path": SavedModel folder, "inputs": .npz of the raw inputs by input name}. Writes OUT.npz
with one array per "case/signature/output" and prints one JSON line: the signatures and
feature names of each export, whether graphfit got imported, and, given SHOW_DIR, what
TensorFlow's `saved_model_cli show --dir SHOW_DIR --all` printed and its exit status (run
here, as `python -m tensorflow.python.tools.saved_model_cli` runs it, rather than in a process
of its own that would pay TensorFlow's start-up again).
"""

from __future__ import annotations

import contextlib
import io
import json
import runpy
import sys

import numpy as np
import tensorflow as tf


def saved_model_cli_show(folder: str) -> dict:
    """`saved_model_cli show --dir folder --all`: its exit status and what it printed."""
    printed = io.StringIO()
    sys.argv = ["saved_model_cli", "show", "--dir", folder, "--all"]
    status = 0
    with contextlib.redirect_stdout(printed):
        try:
            runpy.run_module("tensorflow.python.tools.saved_model_cli", run_name="__main__")
        except SystemExit as done:  # absl's app.run ends with sys.exit
            status = done.code or 0
    return {"status": status, "stdout": printed.getvalue()}


def main(cases_file: str, out_file: str, show_dir: str | None = None) -> None:
    # As in the tests' process (conftest.py): on an Ampere or later GPU TensorFlow would run
    # the float32 products in TF32 here, and miss the model's own predictions by 1e-3.
    tf.config.experimental.enable_tensor_float_32_execution(False)
    with open(cases_file) as handle:
        cases = json.load(handle)
    arrays, report = {}, {}
    for name, case in cases.items():
        loaded = tf.saved_model.load(case["path"])
        inputs = dict(np.load(case["inputs"]))
        report[name] = {"signatures": sorted(loaded.signatures),
                        "feature_names": [n.decode() for n in loaded.feature_names.numpy()]}
        for signature, function in loaded.signatures.items():
            wanted = function.structured_input_signature[1]
            outputs = function(**{key: tf.constant(inputs[key]) for key in wanted})
            for key, value in outputs.items():
                arrays[f"{name}/{signature}/{key}"] = value.numpy()
    np.savez(out_file, **arrays)
    if show_dir is not None:
        report["saved_model_cli"] = saved_model_cli_show(show_dir)
    report["graphfit_imported"] = any(m.split(".")[0] == "graphfit" for m in sys.modules)
    print("RESULT " + json.dumps(report))


if __name__ == "__main__":
    main(*sys.argv[1:])
