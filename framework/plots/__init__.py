"""Plots of runs: learning curves, a classifier's confusion matrix, runs compared.

matplotlib is an optional extra (`pip install graphfit[plots]`); without it these functions
raise `PlotsUnavailable`, whose message gives the install command. Figures are drawn off
screen (Agg) without pyplot, so no window opens and the user's matplotlib state is untouched.
Every function returns the data it drew with the paths it wrote (`PlotResult`), so the data
can be checked against `history.json`.

Example:
    >>> from graphfit import plots
    >>> plots.stage_colors()
    {'train': '#12b5cb', 'val': '#e52592', 'test': '#f9ab00'}
"""

from graphfit.plots.backend import PlotsUnavailable
from graphfit.plots.colors import TENSORBOARD_PALETTE, stage_colors, tensorboard_run_order
from graphfit.plots.comparison import compare_runs, comparison_file
from graphfit.plots.confusion import CONFUSION_MATRIX, confusion_counts, confusion_matrix
from graphfit.plots.curves import LEARNING_CURVES, PlotResult, learning_curves
from graphfit.plots.fitted_curve import FIT_PLOT, fitted_curve, has_fitted_curve
from graphfit.plots.history import HistoryError, history_panels, read_history
from graphfit.plots.run_plots import (
    classifier_labels,
    labels_of_split,
    plot_command,
    plot_finished_run,
    plot_run,
    plots_enabled,
)

__all__ = ["CONFUSION_MATRIX", "FIT_PLOT", "HistoryError", "LEARNING_CURVES", "PlotResult",
           "PlotsUnavailable", "TENSORBOARD_PALETTE", "classifier_labels", "compare_runs",
           "comparison_file", "confusion_counts", "confusion_matrix", "fitted_curve",
           "has_fitted_curve", "history_panels",
           "labels_of_split", "learning_curves", "plot_command", "plot_finished_run",
           "plot_run", "plots_enabled", "read_history", "stage_colors", "tensorboard_run_order"]
