"""The reference crops of tasks, kept on disk from one run to the next.

Measuring a task's reference crops runs its reference code in a fresh sandbox (:mod:`vtb_agents.episodes.regions`):
for the bundled suite's replay, half of a run's time. They depend only on the task's content and on the
code that measures them, so every run of the same tasks on the same vtb measures the same crops: a run
keeps what it measured in a folder of files, one per task content, and a later run (another strategy,
model or epoch count, a resume) reads them instead. The key is the task's content (images and code steps,
:meth:`~vtb_agents.episodes.regions.ReferenceRegionCache.key`), this vtb's code (every module of the
package, by content: an edited module measures anew) and the versions of the image libraries the sandbox
measures with.

The folder is ``$VTB_CACHE_DIR/reference-regions`` if ``VTB_CACHE_DIR`` is set (``off``: no folder,
every run measures), else the user's cache folder (``~/.cache/vtb-agents/reference-regions`` on Linux,
platformdirs' ``user_cache_path``). A file that cannot be read or written is measured anew, with a
warning: a cache never fails a run.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from pydantic import BaseModel, ValidationError

from vtb_agents.results import ImageRegion

__all__ = ["CACHE_DIR_ENV", "STORE_FORMAT", "ReferenceStore", "code_fingerprint", "reference_store"]

_log = logging.getLogger(__name__)

CACHE_DIR_ENV = "VTB_CACHE_DIR"
"""The environment variable naming vtb's cache folder (``off``: none)."""
STORE_FORMAT = 1
"""The format of one stored file (its ``format_version``); a file of another format is measured anew."""
IMAGE_LIBRARIES = ("pillow", "numpy", "opencv-python-headless")
"""The libraries the sandbox measures crops with: another version of one measures anew."""


class StoredRegions(BaseModel):
    """One stored file: a task content's reference crops, turn by turn."""

    format_version: int
    regions: list[list[ImageRegion]]


@functools.cache
def code_fingerprint() -> str:
    """sha256 of every module of this vtb (by path and content) and of the image libraries' versions."""
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for module in sorted(package.rglob("*.py")):
        digest.update(module.relative_to(package).as_posix().encode() + b"\0" + module.read_bytes() + b"\0")
    for library in IMAGE_LIBRARIES:
        try:
            digest.update(f"{library}=={version(library)}\0".encode())
        except PackageNotFoundError:
            digest.update(f"{library} missing\0".encode())
    return digest.hexdigest()


class ReferenceStore:
    """Reference crops in ``folder``, one JSON file per task content and vtb code."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)

    def path(self, key: str) -> Path:
        """The file of the task content ``key`` measured by this vtb."""
        name = hashlib.sha256(f"{key}\0{code_fingerprint()}".encode()).hexdigest()
        return self.folder / f"{name}.json"

    def load(self, key: str) -> list[list[ImageRegion]] | None:
        """The stored crops of ``key`` (None: none stored, or a file that cannot be read, warned about)."""
        path = self.path(key)
        try:
            stored = StoredRegions.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValidationError) as exc:
            _log.warning("reference crops %s cannot be read, measured anew: %s", path, exc)
            return None
        if stored.format_version != STORE_FORMAT:
            return None
        return stored.regions

    def save(self, key: str, regions: list[list[ImageRegion]]) -> None:
        """Store the crops of ``key`` (atomically: a reader sees the whole file or none; a file that cannot
        be written is warned about)."""
        path = self.path(key)
        data = StoredRegions(format_version=STORE_FORMAT, regions=regions).model_dump_json()
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
        except OSError as exc:
            _log.warning("reference crops %s cannot be stored: %s", path, exc)
            return
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(data)
            os.replace(temporary, path)
        except OSError as exc:
            Path(temporary).unlink(missing_ok=True)
            _log.warning("reference crops %s cannot be stored: %s", path, exc)


def reference_store() -> ReferenceStore | None:
    """The store of ``$VTB_CACHE_DIR`` (``off``: None) or of the user's cache folder."""
    configured = os.environ.get(CACHE_DIR_ENV)
    if configured is not None and configured.strip().lower() == "off":
        return None
    if configured:
        return ReferenceStore(Path(configured) / "reference-regions")
    import platformdirs

    return ReferenceStore(platformdirs.user_cache_path("vtb-agents") / "reference-regions")
