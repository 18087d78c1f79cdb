"""A browser context on the system Chromium that records every URL a page asks for (report tests)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")


@contextmanager
def offline_context() -> Iterator[Any]:
    """A headless Chromium context (1280x800); on exit, asserts that its pages fetched only ``file://``
    URLs, and at least one: a report works offline."""
    from playwright.sync_api import sync_playwright

    requested: list[str] = []
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        context = chromium.new_context(viewport={"width": 1280, "height": 800})
        context.on("request", lambda request: requested.append(request.url))
        yield context
        chromium.close()
    assert requested and all(url.startswith("file://") for url in requested)  # offline: nothing else fetched
