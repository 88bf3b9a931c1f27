"""Checks of the places a study writes to, named on the command line (`--storage` for SQLite,
`--mlflow`), made before anything is created: a folder named in a URL must exist already
(graphfit creates only the study folder and the stores inside it)."""

from __future__ import annotations

import os
from urllib.parse import urlparse

from graphfit.tuning.optuna_objects import StudyError

__all__ = ["check_sqlite_folder", "check_tracking_uri"]


def _folder_problem(folder: str) -> str | None:
    """Why files cannot be created in `folder`, or None."""
    folder = os.path.abspath(folder or ".")
    if os.path.isdir(folder):
        return None if os.access(folder, os.W_OK) else f"the folder {folder} is not writable"
    above = folder
    while above and not os.path.exists(above):
        above = os.path.dirname(above) if os.path.dirname(above) != above else ""
    if above and not os.path.isdir(above):
        return f"{above} is a file, not a folder"
    return f"the folder {folder} does not exist"


def check_sqlite_folder(url: str, option: str) -> None:
    """Refuses a `sqlite:///PATH` URL whose folder is missing (SQLite cannot create it; the
    error would otherwise come from the driver, after the study folder was made)."""
    if not url.startswith("sqlite:"):
        return
    from sqlalchemy.engine import make_url

    database = make_url(url).database
    if not database or database == ":memory:":
        return
    problem = _folder_problem(os.path.dirname(database))
    if problem:
        raise StudyError(f"{option} {url}: {problem}; create the folder first, or give a "
                         f"path in an existing folder")


def check_tracking_uri(uri: str) -> None:
    """Refuses an MLflow tracking URI on this machine (`sqlite:///PATH`, `file:///PATH` or a
    plain path) that MLflow could not create its store at; a server's URI is left to MLflow."""
    check_sqlite_folder(uri, "--mlflow")
    scheme = urlparse(uri).scheme
    if scheme not in ("", "file") or uri.startswith("sqlite:"):
        return
    path = urlparse(uri).path if scheme == "file" else uri
    if os.path.exists(path) and not os.path.isdir(path):
        raise StudyError(f"--mlflow {uri}: {path} is a file, not a folder; give a folder "
                         f"for MLflow's file store, or a sqlite:/// URI")
    problem = None if os.path.isdir(path) else _folder_problem(os.path.dirname(
        os.path.abspath(path)))
    if problem:
        raise StudyError(f"--mlflow {uri}: {problem}; create the folder first, or give a "
                         f"path in an existing folder")
    if not _file_store_allowed():
        raise StudyError(f"--mlflow {uri}: MLflow refuses its file store (maintenance mode) "
                         f"unless MLFLOW_ALLOW_FILE_STORE=true is set; give a database "
                         f"instead, e.g. --mlflow sqlite:///{os.path.abspath(path)}.db, or "
                         f"--mlflow alone for the store in the study folder")


def _file_store_allowed() -> bool:
    try:
        from mlflow.environment_variables import MLFLOW_ALLOW_FILE_STORE
    except ImportError:  # an older MLflow, which has no such switch
        return True
    return bool(MLFLOW_ALLOW_FILE_STORE.get())
