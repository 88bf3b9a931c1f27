"""Preparing a compiled model for its data: the one path `fit`, `evaluate`, recipes and
`inspect` share.

Before any step runs, the model is built for the inputs, the labels are arranged by output
(one array, or a dict by output name), and the compile state builds what the data needs:
losses, per-stage metrics, optimizer slots and the compiled steps. `inspect` has no data,
only specs, so it passes a `SpecFeed`.
"""

from __future__ import annotations

from typing import Callable

from graphfit.training import distribution
from graphfit.training.feeds import arrange_targets

__all__ = ["prepare_for_feed", "SpecFeed"]


def prepare_for_feed(model, state, feed) -> None:
    """Builds `model` for `feed`'s inputs, arranges its labels and prepares `state`.

    Args:
        model: the model.
        state: its `CompileState` (`model.compile_state`, or the predict-only state).
        feed: an `ArrayFeed`, `DatasetFeed` or `SpecFeed`: what is read is its
            `element_spec`, `names` and `arrange_targets(output_names, needed)`.

    Raises:
        ValueError: when the inputs do not fit the built model, or the labels do not fit
            its outputs.
    """
    # Under a tf.distribute strategy the weights are created mirrored, one copy per replica.
    with distribution.strategy_scope(getattr(state, "strategy", None)):
        model.build_for(feed.element_spec[0], feed.names[0])
    names = model.output_names
    feed.arrange_targets(names, state.outputs_needing_labels(names))
    state.prepare(model, feed)


class SpecFeed:
    """A feed of specs only, for tracing the steps without data.

    Args:
        x_spec: the inputs' `TensorSpec`s.
        y_spec: the labels' specs, or None to ask `default_labels`.
        default_labels: `(output_names, needed) -> y_spec`, called once the model is built
            (the labels' shape follows the outputs); None leaves the labels out.
    """

    names = ("x", "y")
    is_dataset = False

    def __init__(self, x_spec, y_spec=None,
                 default_labels: Callable[[list | None, list], object] | None = None):
        self.x_spec, self.y_spec, self.default_labels = x_spec, y_spec, default_labels

    @property
    def element_spec(self):
        return self.x_spec, self.y_spec, None

    def arrange_targets(self, output_names, needed) -> None:
        if self.y_spec is not None:
            self.y_spec = arrange_targets(self.y_spec, output_names, needed, self.names[1])
        elif self.default_labels is not None:
            self.y_spec = self.default_labels(output_names, needed)
