"""The self-contained Python examples of the documentation pages (docs/ and its folders,
and the README) run: every block that starts with its imports (the others are fragments
of a page's running example), in page order in one folder, as a reader pasting them one
after another would (a later block may read what an earlier one wrote)."""

import pathlib
import re
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
IDS = [str(page.relative_to(ROOT).with_suffix("")) for page in PAGES]


def _blocks(page: pathlib.Path) -> list[tuple[int, str]]:
    text = page.read_text()
    blocks = [(text[:match.start()].count("\n") + 1, match.group(1))
              for match in re.finditer(r"```python\n(.*?)```", text, re.S)
              if match.group(1).startswith(("import ", "from "))]
    if page.name == "README.md":  # a block the site shows too runs once, on the site's page
        site = "".join(other.read_text() for other in PAGES if other != page)
        blocks = [(line, code) for line, code in blocks if f"```python\n{code}```" not in site]
    return blocks


def test_every_python_block_of_a_page_is_python():
    # The fragments (a page's running example, names from earlier blocks) are not run, but
    # each is valid Python: a placeholder is `...` or a comment.
    for page in PAGES:
        text = page.read_text()
        for match in re.finditer(r"```python\n(.*?)```", text, re.S):
            line = text[:match.start()].count("\n") + 1
            compile(textwrap.dedent(match.group(1)), f"{page}:{line}", "exec")


def test_the_pages_have_examples_to_run():
    assert sum(len(_blocks(page)) for page in PAGES) >= 14


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_a_page_s_self_contained_examples_run(page, tmp_path, monkeypatch):
    # The examples' paths assume the repository's root: the folder sees its recipes.
    (tmp_path / "recipes").symlink_to(ROOT / "recipes")
    monkeypatch.chdir(tmp_path)
    for line, code in _blocks(page):
        try:
            exec(compile(code, f"{page}:{line}", "exec"), {"__name__": "__doc_example__"})
        except Exception as error:
            pytest.fail(f"the example at {page.relative_to(ROOT)}:{line} failed: "
                        f"{type(error).__name__}: {error}")
