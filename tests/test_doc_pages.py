"""Every Python example of the documentation pages (docs/ and its folders, and the README)
runs: a page's blocks in page order, in one folder and one namespace, as a reader pasting
them one after another would (a later block may use the names and files of an earlier one)."""

import pathlib
import re
import textwrap

import pytest
import yaml

from graphfit.recipes import recipe_from_text

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
IDS = [str(page.relative_to(ROOT).with_suffix("")) for page in PAGES]


def _blocks(page: pathlib.Path) -> list[tuple[int, str]]:
    text = page.read_text()
    blocks = [(text[:match.start()].count("\n") + 1, match.group(1))
              for match in re.finditer(r"```python\n(.*?)```", text, re.S)]
    if page.name == "README.md":  # a block the site shows too runs once, on the site's page
        site = "".join(other.read_text() for other in PAGES if other != page)
        blocks = [(line, code) for line, code in blocks if f"```python\n{code}```" not in site]
    return blocks


def test_every_python_block_of_a_page_runs():
    # No block is left out: every ```python block of every page is among those run.
    run = sum(len(_blocks(page)) for page in PAGES)
    written = sum(page.read_text().count("```python\n") for page in PAGES)
    shared = sum(1 for page in PAGES[:-1] for _, code in _blocks(page)
                 if f"```python\n{code}```" in ROOT.joinpath("README.md").read_text())
    assert run + shared == written and run >= 40


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_a_page_s_self_contained_examples_run(page, tmp_path, monkeypatch):
    # The examples' paths assume the repository's root: the folder sees its recipes.
    (tmp_path / "recipes").symlink_to(ROOT / "recipes")
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__doc_example__"}
    for line, code in _blocks(page):
        try:
            exec(compile(textwrap.dedent(code), f"{page}:{line}", "exec"), namespace)
        except Exception as error:
            pytest.fail(f"the example at {page.relative_to(ROOT)}:{line} failed: "
                        f"{type(error).__name__}: {error}")


def test_the_pages_whole_recipes_validate():
    # A YAML block with data and model keys is a whole recipe: the recipe schema accepts it
    # (`graphfit validate --safe`, its data files not read).
    checked = 0
    for page in PAGES:
        text = page.read_text()
        for match in re.finditer(r"```yaml\n(.*?)```", text, re.S):
            recipe = yaml.safe_load(match.group(1))
            if isinstance(recipe, dict) and {"data", "model"} <= recipe.keys():
                line = text[:match.start()].count("\n") + 1
                recipe_from_text(match.group(1), f"{page.relative_to(ROOT)}:{line}",
                                 base_dir=str(ROOT), safe=True, data_files=False)
                checked += 1
    assert checked >= 6
