"""Saving: whole models in one `.graphfit` file (`save_model`, `load_model`), training
checkpoints (`tf.train.CheckpointManager`, latest and best, fit state) and model weights
files."""

from graphfit.saving.checkpoints import (
    Checkpointer,
    FitState,
    fit_state,
    restore_latest,
    resume_point,
)
from graphfit.saving.model_file import load_model, model_from_json, model_to_json, save_model

__all__ = ["Checkpointer", "FitState", "fit_state", "load_model", "model_from_json",
           "model_to_json", "restore_latest", "resume_point", "save_model"]
