"""Loads SavedModels with plain TensorFlow (graphfit never imported) and runs every signature.

Run by test_export.py in a fresh process: `python load_exports_script.py CASES.json OUT.npz`.
CASES.json maps a case name to {"path": SavedModel folder, "inputs": .npz of the raw inputs
by input name}. Writes OUT.npz with one array per "case/signature/output" and prints one JSON
line: the signatures and feature names of each export, and whether graphfit got imported.
"""

from __future__ import annotations

import json
import sys

import numpy as np
import tensorflow as tf


def main(cases_file: str, out_file: str) -> None:
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
    report["graphfit_imported"] = any(m.split(".")[0] == "graphfit" for m in sys.modules)
    print("RESULT " + json.dumps(report))


if __name__ == "__main__":
    main(*sys.argv[1:])
