"""Every documentation page that a comment or docstring of the code or the tests cites
(`docs/guides/levenberg_marquardt.md`, ...) exists: pages moved under docs/guides/ and
docs/benchmarks/ once, and 35 comments went on citing the old paths."""

import os
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
_CITED = re.compile(r"(?<![\w/.-])docs/[\w/-]+\.md")
_SKIPPED = {".venv", "build", "runs", ".git", "__pycache__", ".pytest_cache"}


def _sources():
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [name for name in subfolders if name not in _SKIPPED]  # not walked
        yield from (pathlib.Path(folder, name) for name in files if name.endswith(".py"))


def test_every_cited_docs_page_exists():
    missing = []
    for source in sorted(_sources()):
        for number, line in enumerate(source.read_text(errors="replace").splitlines(), 1):
            missing += [f"{source.relative_to(ROOT)}:{number}: {page}"
                        for page in _CITED.findall(line) if not (ROOT / page).exists()]
    assert not missing, "cited pages that do not exist:\n" + "\n".join(missing)
