"""What to tell a user about continuing a trial's run directory after its process stopped."""

from __future__ import annotations

import os

__all__ = ["resume_hint"]


def resume_hint(run: str) -> str:
    """`the run directory can be continued with graphfit train --resume RUN` when `run` holds
    an intact checkpoint (what `train --resume` needs), else a sentence saying it cannot be."""
    from graphfit.recipes.running import run_directory
    from graphfit.recipes.running.training_run import checkpoint_folder
    from graphfit.saving import checkpoints

    folder = os.path.join(run, "checkpoints")
    try:
        config = run_directory.read_yaml(run_directory.read_recipe(run))
        folder = checkpoint_folder(config, run)
    except Exception:  # no recipe written yet, or a damaged one: the default folder
        pass
    try:
        epochs = checkpoints.resume_point(folder) if os.path.isdir(folder) else None
    except Exception:  # an unreadable checkpoint: nothing to continue from
        epochs = None
    if epochs is None:
        return (f"its run directory {run} holds no intact checkpoint (it stopped before its "
                f"first epoch ended), so there is nothing to continue")
    return f"the run directory can be continued with graphfit train --resume {run}"
