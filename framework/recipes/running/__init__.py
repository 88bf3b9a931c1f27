"""Running recipes: building the model, loading the data, training into a run directory,
evaluating and predicting from one."""
