"""The documentation site: `mkdocs build --strict` (into a temporary folder, once for the
module), no broken internal link or anchor in the built HTML, and the home page and an API page
rendered by headless Chromium from a server on 127.0.0.1 with no console error."""

import functools
import http.server
import os
import pathlib
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse
from html.parser import HTMLParser

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CHROMIUM = next((path for path in (shutil.which("chromium"), "/usr/bin/chromium",
                                   shutil.which("chromium-browser"))
                 if path and pathlib.Path(path).exists()), None)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--clean",
         "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(out)],
        cwd=tmp_path_factory.mktemp("build_cwd"), capture_output=True, text=True, timeout=600,
        # Material's banner about MkDocs 2 is not a warning about this site.
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    seconds = time.perf_counter() - start
    return out, done, seconds


def test_the_site_builds_strictly_without_warnings(site):
    out, done, seconds = site
    assert done.returncode == 0, done.stderr[-4000:]
    warnings = [line for line in done.stderr.splitlines() if "WARNING" in line]
    assert not warnings, warnings
    pages = sorted(out.rglob("index.html"))
    print(f"built {len(pages)} pages in {seconds:.1f} s")
    # Home, getting started, the guides, the API reference (one page per package), benchmarks.
    assert len(pages) >= 35
    for page in ("getting_started", "guides/recipes", "guides/your_own_data", "api/layers",
                 "api/optimizers", "benchmarks"):
        assert (out / page / "index.html").exists(), page


class _Links(HTMLParser):
    """The ids (anchors) a page defines and the internal links it holds."""

    def __init__(self):
        super().__init__()
        self.ids, self.links = set(), []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key) and (key == "id" or tag == "a"):
                self.ids.add(attrs[key])
        for key in ("href", "src"):
            value = attrs.get(key)
            if value is not None and not urllib.parse.urlsplit(value).scheme \
                    and not value.startswith("//"):
                self.links.append((tag, value))


@functools.lru_cache(maxsize=None)
def _parse(path: pathlib.Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(errors="replace"))
    return parser


def _broken_links(out: pathlib.Path) -> list[str]:
    broken = []
    for page in sorted(out.rglob("*.html")):
        for tag, link in _parse(page).links:
            target, _, fragment = link.partition("#")
            target = urllib.parse.unquote(target)
            # An absolute path (404.html's, built without a site_url) starts at the site's root.
            base = out if target.startswith("/") else page.parent
            path = (base / target.lstrip("/")).resolve() if target else page
            if path.is_dir():
                path = path / "index.html"
            where = f"{page.relative_to(out)}: <{tag}> {link}"
            if not path.exists():
                broken.append(f"{where} (no file {path})")
            elif fragment and path.suffix == ".html" \
                    and urllib.parse.unquote(fragment) not in _parse(path).ids:
                broken.append(f"{where} (no anchor #{fragment})")
    return broken


def test_the_link_checker_finds_a_broken_link_and_a_broken_anchor(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "index.html").write_text(
        '<h2 id="here">x</h2><a href="#here">ok</a><a href="../b/">missing</a>'
        '<a href="#gone">bad anchor</a><a href="https://example.org/x">external</a>')
    assert _broken_links(tmp_path) == [
        f"a/index.html: <a> ../b/ (no file {tmp_path / 'b'})",
        "a/index.html: <a> #gone (no anchor #gone)"]


def test_no_broken_internal_link_or_anchor(site):
    out, done, _ = site
    assert done.returncode == 0, done.stderr[-4000:]
    assert len(list(out.rglob("*.html"))) >= 35
    assert _broken_links(out) == []


class _Quiet(http.server.SimpleHTTPRequestHandler):
    statuses: list = []

    def log_message(self, format, *args):
        pass

    def log_request(self, code="-", size="-"):
        type(self).statuses.append((int(code) if str(code).isdigit() else 0, self.path))


@pytest.fixture(scope="module")
def served(site):
    out, done, _ = site
    assert done.returncode == 0, done.stderr[-4000:]
    handler = type("Handler", (_Quiet,), {"statuses": []})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(handler, directory=str(out)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler.statuses
    server.shutdown()
    server.server_close()


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on this machine "
                    "(Debian's package: apt-get install chromium)")
# The API page's code blocks get their copy buttons from Material's JavaScript: proof that it
# ran (the home page has nothing the scripts add).
@pytest.mark.parametrize("path, expected", [
    ("/", ["keeps the graph-level ideas in view", "Getting started"]),
    ("/api/layers/", ["graphfit.layers.Dense", "md-code__button"]),
])
def test_a_page_renders_in_headless_chromium_without_console_errors(served, tmp_path, path,
                                                                     expected):
    base, statuses = served
    statuses.clear()
    done = subprocess.run(
        [CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
         "--disable-extensions", "--disable-dev-shm-usage", f"--user-data-dir={tmp_path}",
         "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", "--dump-dom",
         base + path], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    for text in expected:
        assert text in done.stdout, text
    # Chromium writes every console message (console.error, an uncaught exception, a
    # resource that failed to load) as a CONSOLE line on stderr; these pages write none.
    console = [line for line in done.stderr.splitlines()
               if ":CONSOLE" in line or "Uncaught" in line]
    assert console == []
    failed = [(code, where) for code, where in statuses if code >= 400]
    assert statuses and failed == [], failed


def test_the_console_check_sees_an_uncaught_error(tmp_path):
    if CHROMIUM is None:
        pytest.skip("no chromium binary on this machine (Debian's package: apt-get install "
                    "chromium)")
    page = tmp_path / "broken.html"
    page.write_text('<script>console.error("bad"); throw new Error("boom")</script>')
    done = subprocess.run(
        [CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
         "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    assert any('"bad"' in line for line in console), done.stderr[-2000:]
    assert any("Uncaught Error: boom" in line for line in console), done.stderr[-2000:]


def test_the_api_pages_of_the_lazy_packages_name_every_public_name():
    # graphfit, graphfit.tabular and graphfit.tuning load their names on first use, so the
    # API reference cannot read them from their __init__: its pages name each one's home.
    import graphfit
    import graphfit.tabular
    import graphfit.tuning

    for package, page in ((graphfit, "graphfit"), (graphfit.tabular, "tabular"),
                          (graphfit.tuning, "tuning")):
        text = (ROOT / "docs" / "api" / f"{page}.md").read_text()
        for name in package.__all__:
            value = getattr(package, name)
            if getattr(value, "__name__", None) == f"{package.__name__}.{name}":
                continue  # a subpackage: its own page
            home = getattr(value, "__module__", None) or package.__name__
            assert f"::: {home}.{name}" in text or f"::: {home}\n" in text, (page, name, home)
