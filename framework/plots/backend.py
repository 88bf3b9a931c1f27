"""matplotlib, loaded on demand: an optional extra (`pip install graphfit[plots]`).

Figures are `matplotlib.figure.Figure` objects drawn by the Agg canvas directly, never through
pyplot: no window opens, no backend is switched and pyplot's global list of figures is left
alone, so plotting from a training script or a notebook changes nothing of the user's own
matplotlib state.
"""

from __future__ import annotations

import os

__all__ = ["PlotsUnavailable", "MIN_MATPLOTLIB", "new_figure", "save_png"]

MIN_MATPLOTLIB = (3, 7)


class PlotsUnavailable(ImportError):
    """matplotlib is missing (or too old): the message says how to install it."""


def _require() -> tuple:
    """(Figure, FigureCanvasAgg), or PlotsUnavailable with the install command."""
    try:
        import matplotlib
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as error:
        raise PlotsUnavailable(
            f"plots need matplotlib, which cannot be imported ({error}): install it with "
            f"pip install graphfit[plots]  (or pip install 'matplotlib>=3.7')") from None
    version = tuple(int(part) for part in matplotlib.__version__.split(".")[:2]
                    if part.isdigit())
    if version < MIN_MATPLOTLIB:
        raise PlotsUnavailable(
            f"plots need matplotlib >= 3.7, found {matplotlib.__version__}: upgrade it with "
            f"pip install --upgrade graphfit[plots]")
    return Figure, FigureCanvasAgg


def new_figure(width: float, height: float):
    """A Figure of `width` x `height` inches with its own Agg canvas (constrained layout keeps
    titles, tick labels and legends from overlapping).

    Raises:
        PlotsUnavailable: when matplotlib is missing.
    """
    figure_class, canvas_class = _require()
    figure = figure_class(figsize=(width, height), layout="constrained")
    canvas_class(figure)
    return figure


def save_png(figure, path: str, dpi: int = 110) -> str:
    """Writes the figure to `path` as a PNG (its folder is created) and returns the path.

    Raises:
        ValueError: when `path` cannot be written (a folder in the way, no permission).
    """
    path = os.path.abspath(path)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        figure.savefig(path, format="png", dpi=dpi)
    except OSError as error:
        raise ValueError(f"cannot write the plot {path}: {error.strerror or error}") from None
    return path
