"""Image files of a report: small JPEG thumbnails plus full-size files under ``RUN_DIR/report_files/``.

The page references both relatively, so ``report.html`` and ``report_files/`` open offline from disk
(and can be zipped together) while the HTML stays small. Full-size files are hard links to the run's
artifacts or the task's own image files when possible (no extra disk space), copies otherwise. Files
are named by the sha256 of their bytes, so re-running the report re-uses what is there.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from PIL import Image, ImageOps

from vtb_agents.artifacts import ArtifactStore
from vtb_agents.tasks.model import TaskImage

FILES_DIR = "report_files"
THUMB_SIDE = 320
"""Longer side of a thumbnail in pixels (shown at half size: sharp on high-density screens)."""

_RESIZABLE = ("RGB", "RGBA", "L", "LA")
"""Modes resized as they are (palette and bilevel images are converted first: they only allow nearest)."""
_EXTENSIONS = {"PNG": ".png", "JPEG": ".jpg", "WEBP": ".webp", "GIF": ".gif", "BMP": ".bmp", "TIFF": ".tif"}


@dataclass(frozen=True)
class ImageLink:
    """A picture on the page: thumbnail and full-size file (relative to the report), or why there is none."""

    name: str
    thumb: str | None = None
    full: str | None = None
    size: tuple[int, int] | None = None
    problem: str | None = None


def _place(target: Path, source: Path | None, data: bytes | None) -> None:
    """Make ``target`` hold the bytes of ``source`` (hard link, else copy) or ``data``."""
    if target.exists():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.unlink(missing_ok=True)
    if source is not None:
        try:
            os.link(source, tmp)
        except OSError:  # other filesystem, or links not allowed
            shutil.copyfile(source, tmp)
    else:
        tmp.write_bytes(data or b"")
    os.replace(tmp, target)


class ReportImages:
    """Writes thumbnails and full-size files for the images a report shows."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.root = self.run_dir / FILES_DIR
        self.artifacts = ArtifactStore(self.run_dir / "artifacts")
        self._done: dict[str, ImageLink] = {}
        self._files_read: dict[tuple[Path | None, str, Path | None], ImageLink] = {}

    def from_ref(self, ref: str, name: str) -> ImageLink:
        """An image the run stored as artifact ``ref`` (a tool's output image)."""
        try:
            source = self.artifacts.path(ref)
        except ValueError:
            return ImageLink(name, problem=f"bad artifact reference {ref!r}")
        if ref not in self._done and not source.exists():
            return ImageLink(name, problem="artifact missing from the run directory")
        return self._export(name, ref, source, source)

    def from_task(self, image: TaskImage, name: str) -> ImageLink:
        """One of the task's own images (from the task source, or the run's copy of it); a file
        shown again (in another turn or task) is read and hashed once."""
        if image.data is not None:
            return self._read_task_image(image, name)
        source = (image.folder, image.file, image.path)
        if source not in self._files_read:
            self._files_read[source] = self._read_task_image(image, name)
        return replace(self._files_read[source], name=name)

    def _read_task_image(self, image: TaskImage, name: str) -> ImageLink:
        try:
            data = image.read_bytes()
        except OSError as exc:
            return ImageLink(name, problem=f"task image unreadable: {exc}")
        ref = hashlib.sha256(data).hexdigest()
        stored = self.artifacts.path(ref)
        source = stored if stored.exists() else image.path if image.path and image.path.exists() else None
        return self._export(name, ref, data, source)

    def _export(self, name: str, ref: str, image: bytes | Path, source: Path | None) -> ImageLink:
        if ref not in self._done:  # an image shown twice (e.g. in every turn) is read once
            self._done[ref] = self._files(ref, image, source)
        return replace(self._done[ref], name=name)

    def _files(self, ref: str, data: bytes | Path, source: Path | None) -> ImageLink:
        """Thumbnail and full-size file of the image ``data`` (its bytes or its file; named by ``ref``),
        or why there are none. Of a file, only the header is read when the thumbnail exists."""
        raw = data if isinstance(data, bytes) else None
        try:
            with Image.open(io.BytesIO(raw) if raw is not None else data) as image:
                size, ext = image.size, _EXTENSIONS.get((image.format or "").upper(), ".img")
                thumb = self.root / "thumbs" / f"{ref}.jpg"
                if not thumb.exists():
                    _place(thumb, None, thumbnail(image))
        except (OSError, ValueError, Image.DecompressionBombError) as exc:
            return ImageLink("", problem=f"not a readable image ({type(exc).__name__})")
        full = self.root / "full" / f"{ref}{ext}"
        _place(full, source, None if source else raw)
        return ImageLink("", thumb=thumb.relative_to(self.run_dir).as_posix(),
                         full=full.relative_to(self.run_dir).as_posix(), size=(int(size[0]), int(size[1])))


def thumbnail(image: Image.Image) -> bytes:
    """``image`` as a JPEG at most ``THUMB_SIDE`` pixels on its longer side, upright, on white.

    Resized first, in the image's own mode where the resampling filter allows it, then turned and
    flattened: converting or turning the full-size image costs more than the resize itself.
    """
    image.draft("RGB", (THUMB_SIDE, THUMB_SIDE))  # fast path for large JPEGs
    small = image if image.mode in _RESIZABLE else image.convert("RGBA")
    small.thumbnail((THUMB_SIDE, THUMB_SIDE), Image.Resampling.LANCZOS)
    small = ImageOps.exif_transpose(small)
    if small.mode not in ("RGB", "L"):
        rgba = small.convert("RGBA")
        small = Image.new("RGB", rgba.size, "white")
        small.paste(rgba, mask=rgba.getchannel("A"))
    out = io.BytesIO()
    small.save(out, format="JPEG", quality=82, optimize=True)
    return out.getvalue()
