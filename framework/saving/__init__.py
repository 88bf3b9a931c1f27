"""Saving: training checkpoints (`tf.train.CheckpointManager`, latest and best, fit state) and
model weights files."""

from graphfit.saving.checkpoints import (
    Checkpointer,
    FitState,
    fit_state,
    restore_latest,
    resume_point,
)

__all__ = ["Checkpointer", "FitState", "fit_state", "restore_latest", "resume_point"]
