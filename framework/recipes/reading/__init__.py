"""Reading and checking recipes: YAML with positions, the schema of every section, component
arguments, overrides, and the problems they report. Runs no TensorFlow."""

__all__: list[str] = []  # a namespace: import its modules (nothing is re-exported here)
