"""Training machinery: compile, the train / test / predict steps and the loops that run them,
data feeds, per-stage metrics, input checks, losses and gradient taps of named nodes."""
