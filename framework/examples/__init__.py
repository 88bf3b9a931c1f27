"""Small runnable examples shipped with graphfit (`python -m graphfit.examples.digits_mlp`)."""
