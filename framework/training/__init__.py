"""Training machinery: compile, the train / test / predict steps and the loops that run them,
data feeds, per-stage metrics, input checks, losses and gradient taps of named nodes."""

__all__: list[str] = []  # a namespace: import its modules (nothing is re-exported here)
