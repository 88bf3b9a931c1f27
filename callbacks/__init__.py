"""graphfit.callbacks: hooks into `fit`, `evaluate` and `predict` (Keras-style, stage-aware)."""

from graphfit.callbacks.callback import Callback, CallbackList
from graphfit.callbacks.history import History
from graphfit.callbacks.progress import ProgressBar
from graphfit.callbacks.tensorboard import TensorBoard

__all__ = ["Callback", "CallbackList", "History", "ProgressBar", "TensorBoard"]
