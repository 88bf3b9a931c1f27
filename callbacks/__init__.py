"""graphfit.callbacks: hooks into `fit`, `evaluate` and `predict` (Keras-style, stage-aware)."""

from graphfit.callbacks.backup_and_restore import BackupAndRestore
from graphfit.callbacks.callback import Callback
from graphfit.callbacks.callback_list import CallbackList
from graphfit.callbacks.csv_logger import CSVLogger
from graphfit.callbacks.early_stopping import EarlyStopping
from graphfit.callbacks.finalize_variable_values import FinalizeVariableValues
from graphfit.callbacks.history import History
from graphfit.callbacks.lambda_callback import LambdaCallback
from graphfit.callbacks.learning_rate import LearningRateScheduler, ReduceLROnPlateau
from graphfit.callbacks.mlflow_logger import MLflowLogger
from graphfit.callbacks.model_checkpoint import ModelCheckpoint
from graphfit.callbacks.progress import ProgressBar
from graphfit.callbacks.swap_ema_weights import SwapEMAWeights
from graphfit.callbacks.tensorboard import TensorBoard
from graphfit.callbacks.terminate_on_nan import TerminateOnNaN

__all__ = [
    "BackupAndRestore",
    "Callback",
    "CallbackList",
    "CSVLogger",
    "EarlyStopping",
    "FinalizeVariableValues",
    "History",
    "LambdaCallback",
    "LearningRateScheduler",
    "MLflowLogger",
    "ModelCheckpoint",
    "ProgressBar",
    "ReduceLROnPlateau",
    "SwapEMAWeights",
    "TensorBoard",
    "TerminateOnNaN",
]
