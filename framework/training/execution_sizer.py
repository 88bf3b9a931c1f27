"""How many training steps one call of the compiled loop runs (`steps_per_execution`).

Each call of a compiled loop costs Python and TensorFlow dispatch time; running several steps per
call hides it. A fixed integer is used as given. "auto" measures the time per step and groups as
many steps as fit in about `target_seconds`, so small models run hundreds of steps per call while
the progress bar and batch callbacks still hear from the loop several times a second. Grouping
never changes the numbers: the same steps run in the same order.
"""

from __future__ import annotations

from typing import Iterator

__all__ = ["ExecutionSizer"]


class ExecutionSizer:
    """Chooses chunk sizes for the compiled loops.

    Args:
        setting: a positive integer, or "auto".
        target_seconds: with "auto", the wall time one call should take.
        max_steps: with "auto", the largest chunk.
    """

    def __init__(self, setting, target_seconds: float = 0.1, max_steps: int = 1000):
        self.setting = setting
        self.target_seconds = target_seconds
        self.max_steps = max_steps
        self._seconds_per_step: float | None = None
        self._calls = 0

    def sizes(self, one_at_a_time: bool = False) -> Iterator[int]:
        """An endless stream of chunk sizes; it adapts as `record` reports timings.

        Args:
            one_at_a_time: with "auto", run single steps (a callback wants every batch).
        """
        while True:
            yield 1 if one_at_a_time and self.setting == "auto" else self.next_size()

    def next_size(self) -> int:
        if self.setting != "auto":
            return int(self.setting)
        if self._seconds_per_step is None:
            return 1  # the first calls trace and compile: measure on small chunks
        wanted = self.target_seconds / max(self._seconds_per_step, 1e-7)
        return int(max(1, min(self.max_steps, wanted)))

    def capacity(self, steps_per_epoch: int | None, one_at_a_time: bool = False) -> int:
        """The most steps one call can run in an epoch of `steps_per_epoch` steps: the rows a
        loop compiled whole by XLA is given, whatever the chunk (`CompiledSteps.run_arrays`).

        Args:
            steps_per_epoch: the epoch's steps (None: unknown).
            one_at_a_time: as in `sizes`.

        Example:

            >>> ExecutionSizer("auto").capacity(469)
            469
            >>> ExecutionSizer(32).capacity(469)
            32
        """
        if one_at_a_time and self.setting == "auto":
            return 1
        largest = self.max_steps if self.setting == "auto" else int(self.setting)
        return max(1, min(largest, steps_per_epoch or largest))

    def record(self, steps: int, seconds: float) -> None:
        """Reports that a call ran `steps` steps in `seconds`."""
        self._calls += 1
        if self._calls == 1 or steps <= 0:
            return  # the first call of a loop includes its tracing (and XLA compilation)
        per_step = seconds / steps
        if self._seconds_per_step is None:
            self._seconds_per_step = per_step
        else:
            self._seconds_per_step = 0.5 * self._seconds_per_step + 0.5 * per_step
