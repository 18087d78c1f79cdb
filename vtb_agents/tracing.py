"""Image-safe LangSmith tracing: every base64 image in a traced run becomes a small thumbnail.

Images travel as ``image_ref`` blocks and become base64 only when a model is called, so every LLM
run's inputs would carry the full images of the conversation so far, and LangSmith rejects large
payloads. :func:`scrub_images` replaces each base64 image (LangChain standard or v0 blocks, OpenAI
``image_url`` / ``input_image`` data URLs, Anthropic ``source`` blocks, any bare base64 image or
``data:image/...`` URL) by a JPEG thumbnail of at most ``THUMBNAIL_SIDE`` px, in the same form, and
notes the original size next to it (``vtb_thumbnail``). :func:`make_langsmith_client` is a
``langsmith.Client`` that applies it to run inputs and outputs (``hide_inputs`` / ``hide_outputs``
receive each run's inputs / outputs dict).

Tracing a run: call :func:`install_tracing` once (what ``LANGSMITH_TRACING=true`` then uses for every
LangChain / LangGraph / evaluate run), or give a ``LangChainTracer`` this client in the run's callbacks.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import os
import re
import threading
from collections import OrderedDict
from typing import Any, Callable

import langsmith
from langchain_core.messages import BaseMessage
from langsmith.utils import tracing_is_enabled
from PIL import Image, UnidentifiedImageError

THUMBNAIL_SIDE = 128
"""Longest side (px) of the thumbnails that replace images in traces."""
MIN_BARE_BASE64 = 1024
"""Bare strings shorter than this are never taken for base64 images."""
MAX_OPAQUE_BASE64 = 32_768
"""Base64 strings longer than this that are not images are replaced by a note."""
THUMBNAIL_KEY = "vtb_thumbnail"
MIME_KEYS = ("mime_type", "media_type")
"""The keys of a message's image block that name its type (LangChain's and Anthropic's spellings)."""
DATA_URL = re.compile(r"data:(image/[\w.+-]+);base64,", re.IGNORECASE)
"""The start of an image as a base64 data URL (group 1: its MIME type)."""
_BASE64 = re.compile(r"[A-Za-z0-9+/\r\n]+={0,2}\s*")  # no spaces: prose is not base64
_CACHE_SIZE = 512
_cache: OrderedDict[bytes, tuple[str, dict[str, Any]] | None] = OrderedDict()
_cache_lock = threading.Lock()


def thumbnail(data: bytes, max_side: int = THUMBNAIL_SIDE) -> tuple[str, dict[str, Any]]:
    """(base64 JPEG of at most ``max_side`` px, facts about the original) for image bytes.

    Raises ``PIL.UnidentifiedImageError`` (or ``OSError``) if ``data`` is not an image.
    """
    with Image.open(io.BytesIO(data)) as image:
        original = {"bytes": len(data), "width": image.width, "height": image.height,
                    "mime_type": Image.MIME.get(image.format or "", "application/octet-stream")}
        image.draft("RGB", (max_side, max_side))  # JPEG: decode at a reduced scale
        small = image.convert("RGBA") if image.mode in ("P", "LA", "PA") else image.copy()
    if small.mode == "RGBA":
        background = Image.new("RGB", small.size, "white")
        background.paste(small, mask=small.getchannel("A"))
        small = background
    small = small.convert("RGB")
    small.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    out = io.BytesIO()
    small.save(out, format="JPEG", quality=70)
    info = {**{f"original_{k}": v for k, v in original.items()}, "width": small.width, "height": small.height}
    return base64.b64encode(out.getvalue()).decode("ascii"), info


def _cached_thumbnail(b64: str) -> tuple[str, dict[str, Any]] | None:
    """The thumbnail of base64 ``b64`` (None if it is not an image); cached, since every model call
    re-sends the images of the conversation so far."""
    key = hashlib.sha1(b64.encode("ascii", "ignore")).digest()
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    try:
        result: tuple[str, dict[str, Any]] | None = thumbnail(base64.b64decode(b64, validate=False))
    except (binascii.Error, ValueError, OSError, UnidentifiedImageError, Image.DecompressionBombError):
        result = None
    with _cache_lock:
        _cache[key] = result
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return result


def _scrub_string(text: str) -> tuple[str, dict[str, Any] | None]:
    """``text`` with an image payload replaced by its thumbnail (same form), and the thumbnail facts."""
    match = DATA_URL.match(text)
    if match:
        result = _cached_thumbnail(text[match.end():])
        if result is None:
            return f"[vtb: {len(text)}-character {match.group(1)} data URL omitted (not decodable)]", None
        return f"data:image/jpeg;base64,{result[0]}", result[1]
    if len(text) < MIN_BARE_BASE64 or not _BASE64.fullmatch(text):
        return text, None
    result = _cached_thumbnail(text)
    if result is not None:
        return result[0], result[1]
    if len(text) > MAX_OPAQUE_BASE64:
        return f"[vtb: {len(text)} characters of base64 omitted]", None
    return text, None


def scrub_images(value: Any) -> Any:
    """A copy of ``value`` (dicts, lists, tuples, messages) with every base64 image thumbnailed.

    ``value`` is never modified. In a dict whose string value was an image, ``mime_type`` /
    ``media_type`` become ``image/jpeg`` and ``vtb_thumbnail`` records the original size.
    """
    if isinstance(value, str):
        return _scrub_string(value)[0]
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        facts: dict[str, Any] | None = None
        for key, item in value.items():
            if isinstance(item, str):
                out[key], found = _scrub_string(item)
                facts = facts or found
            else:
                out[key] = scrub_images(item)
        if facts is not None:
            out[THUMBNAIL_KEY] = facts
            for key in MIME_KEYS:
                if key in out:
                    out[key] = "image/jpeg"
        return out
    if isinstance(value, list):
        return [scrub_images(v) for v in value]
    if isinstance(value, tuple):
        return tuple(scrub_images(v) for v in value)
    if isinstance(value, BaseMessage) and not isinstance(value.content, str):
        return value.model_copy(update={"content": scrub_images(value.content)})
    return value


def _env_true(name: str) -> bool:
    return any(os.environ.get(f"{prefix}_{name}", "").lower() == "true" for prefix in ("LANGSMITH", "LANGCHAIN"))


def make_langsmith_client(**kwargs: Any) -> langsmith.Client:
    """A ``langsmith.Client`` whose traced run inputs and outputs carry thumbnails, not images.

    ``kwargs`` go to ``langsmith.Client`` (``api_url``, ``api_key``...). ``LANGSMITH_HIDE_INPUTS`` /
    ``_OUTPUTS=true`` still hide everything; an ``anonymizer`` (which the client applies instead of
    ``hide_inputs``) runs on the scrubbed data.
    """
    kwargs.setdefault("hide_inputs", True if _env_true("HIDE_INPUTS") else scrub_images)
    kwargs.setdefault("hide_outputs", True if _env_true("HIDE_OUTPUTS") else scrub_images)
    anonymizer: Callable[[dict], dict] | None = kwargs.get("anonymizer")
    if anonymizer is not None:
        kwargs["anonymizer"] = lambda data: anonymizer(scrub_images(data))
    return langsmith.Client(**kwargs)


_default_client: langsmith.Client | None = None
_default_lock = threading.Lock()


def default_client() -> langsmith.Client:
    """The process-wide image-safe client (configured from the ``LANGSMITH_*`` environment)."""
    global _default_client
    with _default_lock:
        if _default_client is None:
            _default_client = make_langsmith_client()
        return _default_client


def install_tracing(client: langsmith.Client | None = None) -> langsmith.Client:
    """Make ``client`` (default: :func:`default_client`) the client of all LangSmith tracing in this
    process: runs traced because ``LANGSMITH_TRACING=true``, ``langsmith.evaluate`` and ``@traceable``."""
    client = client or default_client()
    langsmith.configure(client=client)
    return client


def install_tracing_from_env() -> langsmith.Client | None:
    """:func:`install_tracing` if tracing is on (``LANGSMITH_TRACING=true``), else nothing."""
    return install_tracing() if tracing_is_enabled() else None
