"""The user layer with a batch check and the user gradient transform of user_extensions.py
under MirroredStrategy on 2 logical CPUs (run by test_extension_points.py in the two-CPU
process: logical devices must be configured before TensorFlow starts). Prints one `RESULT`
line of JSON."""

from __future__ import annotations

import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1]), str(HERE)]  # tests/ and this folder
import two_cpus  # noqa: E402  (sets up 2 logical CPUs before TensorFlow starts)
import user_extensions as user  # noqa: E402

import graphfit as gf  # noqa: E402


def _fit(model, x):
    return model.fit(x, user.Y, batch_size=16, epochs=2, shuffle=False, verbose=0)


def transform() -> dict:
    transforms = [user.HalveAndCount(), user.HalveAndCount()]
    single = user.compiled(transforms[0], steps_per_execution=3)
    with two_cpus.STRATEGY.scope():
        mirrored = user.compiled(transforms[1], steps_per_execution=3)
    initial = single.get_weights()
    for model in (single, mirrored):
        _fit(model, user.X)
    reference = user.compiled(None, steps_per_execution=3)
    _fit(reference, user.X)
    steps = [int(transform.steps.numpy()) for transform in transforms]
    return {"weights": user.max_difference(single.get_weights(), mirrored.get_weights()),
            "reference": user.max_difference(reference.get_weights(), mirrored.get_weights()),
            "trained": user.max_difference(initial, mirrored.get_weights()),
            "steps": steps}


def batch_check() -> dict:
    with two_cpus.STRATEGY.scope():
        mirrored = user.compiled(user.HalveAndCount(), steps_per_execution=3)
    initial = mirrored.get_weights()
    try:
        _fit(mirrored, user.with_negative_row(37))
        return {"error": None}
    except gf.DataCheckError as error:
        return {"error": str(error), "layer": getattr(error.layer, "name", None),
                "unchanged": user.max_difference(initial, mirrored.get_weights())}


if __name__ == "__main__":
    print("RESULT " + json.dumps({"transform": transform(), "batch_check": batch_check()}))
