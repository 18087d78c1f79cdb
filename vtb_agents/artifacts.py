"""Content-addressed image store of a run: state and messages carry references, not bytes.

Checkpoints stay small (DESIGN.md "Images in state are references"); the model node turns
references into image blocks only when it calls the model.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from PIL import Image

from vtb_agents.defaults import DEFAULT_MAX_PIXELS

IMAGE_REF_TYPE = "image_ref"
"""Content-block type of an image reference inside a message: ``{"type": "image_ref", "ref", "name"}``."""

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif", ".tif", ".tiff"})


class ArtifactStore:
    """Image bytes stored once under ``root`` by their sha256; the hex digest is the reference."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._encoded = lru_cache(maxsize=64)(self._encode_uncached)

    def put(self, data: bytes) -> str:
        """Store ``data`` (idempotent) and return its reference."""
        ref = hashlib.sha256(data).hexdigest()
        target = self.path(ref)
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, target)
        return ref

    def path(self, ref: str) -> Path:
        """Where the bytes of ``ref`` live (the file may be PNG, JPEG... whatever was stored)."""
        if len(ref) != 64 or any(c not in "0123456789abcdef" for c in ref):
            raise ValueError(f"not an artifact reference: {ref!r}")
        return self.root / ref[:2] / f"{ref}.img"

    def get(self, ref: str) -> bytes:
        """The stored bytes of ``ref``."""
        return self.path(ref).read_bytes()

    def encoded(self, ref: str, max_side: int) -> tuple[str, str]:
        """(mime type, base64) of ``ref`` downscaled so that its longer side is at most ``max_side``.

        Cached, since every model call re-sends the images of the conversation so far.
        """
        return self._encoded(ref, max_side)

    def _encode_uncached(self, ref: str, max_side: int) -> tuple[str, str]:
        data = self.get(ref)
        with Image.open(io.BytesIO(data)) as image:
            if image.width * image.height > DEFAULT_MAX_PIXELS:  # decoding it would take too much memory
                raise ValueError(f"image {ref[:12]} is {image.width}x{image.height} pixels, over the limit of "
                                 f"{DEFAULT_MAX_PIXELS:,}")
            fmt = (image.format or "PNG").upper()
            if max(image.size) <= max_side and fmt in {"PNG", "JPEG", "WEBP", "GIF"}:
                return f"image/{fmt.lower()}", base64.b64encode(data).decode("ascii")
            image.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
            out = io.BytesIO()
            image.save(out, format="PNG")
        return "image/png", base64.b64encode(out.getvalue()).decode("ascii")


def image_ref_block(ref: str, name: str) -> dict[str, Any]:
    """A message content block that points at a stored image."""
    return {"type": IMAGE_REF_TYPE, "ref": ref, "name": name}


def to_png(data: bytes) -> bytes:
    """``data`` re-encoded as PNG (returned unchanged if it already is PNG)."""
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return data
    with Image.open(io.BytesIO(data)) as image:
        out = io.BytesIO()
        image.save(out, format="PNG")
    return out.getvalue()
