"""Screenshot an HTML file with headless Chromium (used by the report's rendering test).

Chromium runs with networking side-channels off (this must work on machines without network,
where background connection attempts would hang it) and a throw-away profile directory.
Usage: ``python -m vtb_agents.report.screenshot PAGE.html OUT.png [WIDTH HEIGHT]``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars")


class ScreenshotError(RuntimeError):
    """Chromium is missing, failed, timed out, or wrote no image."""


def find_chromium() -> str | None:
    """Path of a Chromium/Chrome executable (``$CHROMIUM`` first), or None."""
    override = os.environ.get("CHROMIUM")
    if override:
        return override if Path(override).exists() else shutil.which(override)
    return next((path for name in CANDIDATES if (path := shutil.which(name))), None)


def screenshot(html_path: Path | str, png_path: Path | str, width: int = 1400, height: int = 2000, *,
               timeout: float = 60.0, settle_ms: int = 3000) -> Path:
    """Render ``html_path`` at ``width``×``height`` into ``png_path`` and return it.

    ``settle_ms`` of virtual time lets images (also lazily loaded ones) finish before the shot.
    """
    chromium = find_chromium()
    if chromium is None:
        raise ScreenshotError("Chromium not found: install it (Debian/Ubuntu: apt-get install -y chromium) "
                              "or set CHROMIUM to its path")
    page, out = Path(html_path).resolve(), Path(png_path).resolve()
    if not page.exists():
        raise ScreenshotError(f"{page}: no such file")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="vtb-chromium-") as profile:
        command = [chromium, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={out}",
                   f"--window-size={width},{height}", f"--virtual-time-budget={settle_ms}", page.as_uri()]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   start_new_session=True)  # its own group: a timeout ends its helpers too
        try:
            _, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise ScreenshotError(f"Chromium did not finish within {timeout:.0f} s rendering {page}") from None
    if process.returncode != 0 or not out.exists() or out.stat().st_size == 0:
        tail = "\n".join(stderr.strip().splitlines()[-5:])
        raise ScreenshotError(f"Chromium failed (exit {process.returncode}) rendering {page}:\n{tail}")
    return out


def main(argv: list[str] | None = None) -> None:
    """Command-line entry: ``PAGE.html OUT.png [WIDTH HEIGHT]``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (2, 4):
        raise SystemExit("usage: python -m vtb_agents.report.screenshot PAGE.html OUT.png [WIDTH HEIGHT]")
    size = (int(args[2]), int(args[3])) if len(args) == 4 else (1400, 2000)
    try:
        print(screenshot(args[0], args[1], *size))
    except ScreenshotError as exc:
        raise SystemExit(f"error: {exc}") from None


if __name__ == "__main__":
    main()
