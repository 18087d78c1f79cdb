"""The documentation site as `make docs` builds it (``mkdocs build --strict``, scripts/docs_hooks.py), opened in
headless Chromium: search finds 'epochs' and its first hit opens, the graph diagrams render from the site's own
mermaid.js, nothing is fetched from the network; the build made the screenshots, and the references cover every
public name of ``vtb_agents`` and every ``vtb`` command and option."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
import typer
from PIL import Image

import vtb_agents
from vtb_agents.cli import app
from support.servers import LocalServer, add_directory

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
MERMAID_JS = Path(os.environ.get("VTB_MERMAID_JS", ROOT / ".venv" / "share" / "mermaid" / "mermaid.min.js"))
playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = [pytest.mark.browser, pytest.mark.slow]  # a real mkdocs build, then Chromium


def missing(what: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} is required in CI (make installs it)")
    pytest.skip(f"{what} is not installed (make installs it)")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built as `make docs` builds it, into a temporary folder."""
    if not CHROMIUM.exists():
        missing("Chromium")
    if not MERMAID_JS.is_file():
        missing(f"mermaid.js ({MERMAID_JS})")
    out = tmp_path_factory.mktemp("docs") / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    return out


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    """The site over HTTP on 127.0.0.1 (search runs in a web worker, which file:// pages cannot start)."""
    with LocalServer() as server:
        add_directory(server, site)
        yield server.url("/")


@pytest.fixture(scope="module")
def chromium(served: str) -> Iterator[object]:
    """One headless Chromium for the module's pages."""
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield browser
        browser.close()


@pytest.fixture
def page(served: str, chromium) -> Iterator[object]:
    """A page in a fresh browser context that records every request; at the end, none may have left 127.0.0.1."""
    requested: list[str] = []
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    context.on("request", lambda request: requested.append(request.url))
    yield context.new_page()
    context.close()
    assert requested and [url for url in requested if not url.startswith(served)] == []


def test_search_for_epochs_and_follow_the_first_hit(served, page):
    page.goto(served)
    page.locator(".md-search__input").first.click()
    meta = page.locator(".md-search-result__meta")  # "Initializing search" until the index is loaded
    meta.get_by_text("Type to start searching").wait_for(timeout=60_000)
    page.locator(".md-search__input").press_sequentially("epochs", delay=50)  # keystrokes: Material reads keyup
    first = page.locator(".md-search-result__item a").first
    first.wait_for(state="visible", timeout=60_000)
    # the hits of the whole word: those of "epoch" show while the last key is handled (a hit links with ?h=QUERY)
    page.wait_for_function("() => /[?&]h=epochs(#|$)/.test(document.querySelector('.md-search-result__item a')"
                           "?.href ?? '')", timeout=60_000)
    target = first.evaluate("a => a.href")
    assert target.startswith(served) and target != served
    first.click()
    page.wait_for_url(target, timeout=30_000)
    assert page.url != served
    assert "epochs" in page.locator("article").inner_text().lower()


def test_the_graph_diagrams_render_from_the_sites_own_mermaid(served, page):
    """Material draws each diagram into a closed shadow root: a drawn diagram has a height, an undrawn one none."""
    page.goto(served + "concepts/graphs-and-driver/")
    assert page.locator("div.mermaid").count() == 8  # follow_up, region_switch, the five strategies, grading
    assert page.evaluate("() => typeof mermaid !== 'undefined'")  # the site's own mermaid.js, not a CDN's
    drawn = "() => [...document.querySelectorAll('div.mermaid')].map(d => d.getBoundingClientRect().height)"
    page.wait_for_function(f"() => ({drawn})().filter(h => h > 100).length >= 3", timeout=60_000)
    heights = page.evaluate(drawn)
    assert heights[0] > heights[1] > 100 and heights[-1] > 100  # follow_up's clarify loop makes it the taller
    page.get_by_text("zoom", exact=True).first.click()  # a strategy's tab: its diagram is drawn when shown
    page.wait_for_function(f"() => ({drawn})()[3] > 100", timeout=30_000)


def test_the_build_made_the_screenshots(site):
    for name in ("report", "task", "compare"):
        with Image.open(site / "assets" / "screenshots" / f"{name}.png") as shot:
            assert shot.size == (1280, 900)
            colours = shot.convert("RGB").getcolors(maxcolors=1_000_000)
            assert colours is not None and len(colours) > 50, name  # a rendered page, not a blank one
    index = (site / "index.html").read_text(encoding="utf-8")
    assert 'src="assets/screenshots/report.png"' in index


def page_text(site: Path, path: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", (site / path / "index.html").read_text(encoding="utf-8")))


def test_the_api_reference_lists_every_public_name_with_signature_and_docstring(site):
    source = (site / "reference" / "python-api" / "index.html").read_text(encoding="utf-8")
    text = page_text(site, "reference/python-api")
    for name in vtb_agents.__all__:
        obj = getattr(vtb_agents, name)
        anchor = f'id="{obj.__module__}.{name}"'
        assert anchor in source, name
        section = source[source.index(anchor):]
        assert 'class="doc-signature' in section[:20_000] or "doc-signature" in section[:20_000], name
        first_line = " ".join((obj.__doc__ or "").split("\n\n")[0].split())[:40]
        first_line = re.sub(r":\w+:`~?([^`]*)`", r"\1", first_line).replace("``", "")
        assert first_line and first_line.split()[0] in text, name


def commands(group: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    yield path, group
    if isinstance(group, click.Group):
        for name, command in group.commands.items():
            if not command.hidden:
                yield from commands(command, (*path, name))


def test_the_cli_reference_lists_every_command_and_option(site):
    text = page_text(site, "reference/cli")
    for path, command in commands(typer.main.get_command(app)):
        assert " ".join(["vtb", *path]) in text, path
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert any(opt in text for opt in param.opts), (path, param.opts)
