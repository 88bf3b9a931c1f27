"""Running recipes: building the model, loading the data, training into a run directory,
evaluating and predicting from one."""

__all__: list[str] = []  # a namespace: import its modules (nothing is re-exported here)
