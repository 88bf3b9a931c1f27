"""The README's two commands stay exactly the ones `.ci/run` and the main job use, and the
site's Getting started page shows the same two."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
MAIN_JOB = ("python3 -m venv .venv && . .venv/bin/activate && pip install -e . && "
            "graphfit train recipes/quickstart.yaml")
TESTS = ("python3 -m venv .venv && . .venv/bin/activate && pip install -e \".[test]\" && "
         "ruff check . && python -m pytest -n 2 --dist loadfile")


def _bash_blocks(path: pathlib.Path) -> list[str]:
    return [block.strip() for block in
            re.findall(r"```bash\n(.*?)```", path.read_text(), re.S)]


def test_the_readme_s_first_two_commands_are_the_main_job_and_the_ci_s():
    blocks = _bash_blocks(ROOT / "README.md")
    assert blocks[:2] == [MAIN_JOB, TESTS]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert TESTS in ci  # .ci/run runs exactly the README's install-and-test line
    assert (ROOT / "recipes" / "quickstart.yaml").exists()


def test_getting_started_shows_the_same_two_commands():
    assert _bash_blocks(ROOT / "docs" / "getting_started.md")[:2] == [MAIN_JOB, TESTS]


def test_the_readme_links_into_the_site_and_stays_short():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    for page in re.findall(r"\]\((docs/[^)#]+)", text):
        assert (ROOT / page).exists(), page
    assert "docs/getting_started.md" in text and "docs/api/index.md" in text
