"""The TensorBoard callback: train / val / test runs, histograms, gradient taps, graph,
HParams and profiles."""

from graphfit.callbacks.tensorboard.callback import TensorBoard

__all__ = ["TensorBoard"]
