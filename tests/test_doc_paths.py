"""Every documentation page that a comment or docstring of the code or the tests cites
(`docs/guides/levenberg_marquardt.md`, ...) exists: pages moved under docs/guides/ and
docs/benchmarks/ once, and 35 comments went on citing the old paths."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
_CITED = re.compile(r"(?<![\w/.-])docs/[\w/-]+\.md")
_SKIPPED = {".venv", "build", "runs", ".git"}


def test_every_cited_docs_page_exists():
    missing = []
    for source in sorted(ROOT.rglob("*.py")):
        if _SKIPPED & set(source.relative_to(ROOT).parts):
            continue
        for number, line in enumerate(source.read_text(errors="replace").splitlines(), 1):
            missing += [f"{source.relative_to(ROOT)}:{number}: {page}"
                        for page in _CITED.findall(line) if not (ROOT / page).exists()]
    assert not missing, "cited pages that do not exist:\n" + "\n".join(missing)
