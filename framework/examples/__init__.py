"""Small runnable examples shipped with graphfit (`python -m graphfit.examples.digits_mlp`)."""

__all__: list[str] = []  # a namespace: import its modules (nothing is re-exported here)
