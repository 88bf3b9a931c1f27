"""`UnsuccessfulStop`: a `model.stop_reason` that says the run stopped without succeeding.

`model.stop_reason` is text (`EarlyStopping`'s "no improvement ..."), and a run stopped that
way still ended well. A callback that stops training because the run is not worth finishing
(a study's pruner; `TerminateOnNaN`) sets an `UnsuccessfulStop` instead: it is still the text
every report prints, and `TensorBoard` ends the run's HParams session with the status FAILURE
rather than SUCCESS (the HParams plugin has no status for "stopped early on purpose").

Example:

    >>> reason = UnsuccessfulStop("pruned by the study's pruner after epoch 1")
    >>> str(reason), isinstance(reason, UnsuccessfulStop)
    ("pruned by the study's pruner after epoch 1", True)
"""

from __future__ import annotations

__all__ = ["UnsuccessfulStop"]


class UnsuccessfulStop(str):
    """Why training stopped, for a stop that is not a success (see the module's text)."""
