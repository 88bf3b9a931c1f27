"""`Model.summary()`: layers, output shapes, and where the parameters live."""

from __future__ import annotations

from typing import Callable

from graphfit.core.shapes import nested_shape_text
from graphfit.core.variables import count_parameters as _count

__all__ = ["print_summary"]


def print_summary(model, print_fn: Callable[[str], object], line_length: int) -> None:
    """Prints one row per layer: name (type), output shape, trainable and non-trainable
    parameter counts; then totals, the optimizer's variables and the update hooks."""
    rows = [["Layer (type)", "Output shape", "Trainable", "Non-trainable"]]
    for layer in model.layers:
        frozen = "" if layer.trainable else " [frozen]"
        rows.append([
            f"{layer.name} ({type(layer).__name__}){frozen}",
            nested_shape_text(layer.output_shape) if layer.output_shape is not None else "?",
            f"{_count(layer.trainable_variables):,}",
            f"{_count(layer.non_trainable_weights):,}",
        ])
    # Columns as wide as their longest cell, so no name is cut short.
    widths = [max(len(row[i]) for row in rows) + 3 for i in range(4)]
    line_length = max(line_length, sum(widths))

    def line(cells) -> str:
        return "".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip()

    print_fn(f'Model: "{model.name}" ({type(model).__name__}, {model.dtype_policy.name})')
    print_fn("=" * line_length)
    print_fn(line(rows[0]))
    print_fn("-" * line_length)
    for row in rows[1:]:
        print_fn(line(row))
    print_fn("=" * line_length)
    trainable = _count(model.trainable_variables)
    non_trainable = _count(model.non_trainable_weights)
    print_fn(f"Total params: {trainable + non_trainable:,}")
    print_fn(f"Trainable params: {trainable:,}")
    print_fn(f"Non-trainable params: {non_trainable:,}")
    optimizer = model.optimizer
    if optimizer is not None and optimizer.variables:
        # Variables and the numbers they hold: "292" alone read as 292 variables.
        print_fn(f"Optimizer variables: {len(optimizer.variables):,} holding "
                 f"{_count(optimizer.variables):,} values ({type(optimizer).__name__} slots "
                 f"and counters)")
    hooks = model.update_ops
    if hooks:
        listed = ", ".join(f"{h.layer.name}.{h.variable.name.split('/')[-1].split(':')[0]}"
                           for h in hooks)
        print_fn(f"Update hooks (run once per training step, after the optimizer): {len(hooks)} "
                 f"[{listed}]")
    else:
        print_fn("Update hooks: none")
