"""The `graphfit` command line: train, validate, evaluate, predict, inspect, list."""

from graphfit.cli.main import main

__all__ = ["main"]
