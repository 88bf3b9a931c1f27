"""A user module that raises while it is imported (for class_path_raises_on_import.yaml)."""

SETTINGS = {}
LIMIT = SETTINGS["limit"]
