"""MkDocs hook: lays out graphfit's sources as the installed package names them, so that
mkdocstrings (griffe) reads the docstrings statically, without importing TensorFlow.

pyproject.toml maps `graphfit` to `framework/` and `graphfit.layers`, `.optimizers`,
`.callbacks` to top-level folders; griffe finds packages by folder name only. This hook
builds `build/api_sources/graphfit/` out of symbolic links to those folders (build/ is
ignored by git), and mkdocs.yml points the Python handler's `paths` there.
"""

import os
import pathlib
import re
import shutil
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCES = ROOT / "build" / "api_sources"


def package_dirs(pyproject: pathlib.Path = ROOT / "pyproject.toml") -> dict[str, pathlib.Path]:
    """`[tool.setuptools] package-dir` of pyproject.toml: {package name: folder}."""
    match = re.search(r"^package-dir\s*=\s*\{(.*?)\}\s*$", pyproject.read_text(), re.M)
    if match is None:
        raise ValueError(f"{pyproject}: no one-line `package-dir = {{...}}` table was found; "
                         "tools/mkdocs_hooks.py reads it to find graphfit's folders")
    pairs = re.findall(r'"([\w.]+)"\s*=\s*"([^"]+)"', match.group(1))
    return {name: ROOT / folder for name, folder in pairs}


def lay_out_sources(target: pathlib.Path = SOURCES) -> pathlib.Path:
    """Writes the links under `target` (replacing what was there) and returns `target`."""
    dirs = package_dirs()
    target.parent.mkdir(parents=True, exist_ok=True)
    fresh = pathlib.Path(tempfile.mkdtemp(dir=target.parent, prefix=".api_sources_"))
    package = fresh / "graphfit"
    package.mkdir()
    for entry in sorted(dirs["graphfit"].iterdir()):
        if entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name, folder in dirs.items():
        if name != "graphfit":
            link = package.joinpath(*name.split(".")[1:])
            if link.is_symlink():
                link.unlink()
            link.symlink_to(folder)
    old = target.with_name(target.name + f".old{os.getpid()}")
    if target.exists():
        target.rename(old)
    fresh.rename(target)
    shutil.rmtree(old, ignore_errors=True)
    return target


def on_startup(**kwargs):
    # Before any plugin's on_config: mkdocstrings takes its `paths` when it is configured,
    # and a folder missing then (a fresh clone) sends griffe to the editable install, where
    # graphfit.callbacks and the other top-level folders are not under framework/.
    lay_out_sources()
