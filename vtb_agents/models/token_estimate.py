"""A request's tokens, estimated before it is sent, for limits counted in tokens (docs/how-to/cost-and-rate-limits.md).

Text: the request body's characters other than base64 images, divided by 4 (OpenAI's rule of thumb for
English; the JSON around the text makes it an overestimate, the safe side for a limit). Images: each
base64 image's pixel size (read from its first bytes) by the provider's own formula:

* OpenAI (``detail: high``, the default for large images): fit in 2048 x 2048, shorter side down to 768,
  then 85 tokens plus 170 per 512-pixel tile.
* Anthropic: fit the longer side in 1568 pixels and the area in 1092 x 1092 (the
  largest square Anthropic's table sends unresized), then ``width * height / 750``.

An image whose size cannot be read counts :data:`UNKNOWN_IMAGE_TOKENS`. The output side is the
request's ``max_tokens`` (or ``max_completion_tokens``), which OpenAI and Anthropic both count against
the limit when the request starts; without it, nothing. The raw body is searched, not parsed: a
request carries megabytes of base64 that a full JSON parse per request would spend the GIL on.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
import re
from dataclasses import dataclass

from PIL import Image, UnidentifiedImageError

CHARS_PER_TOKEN = 4
UNKNOWN_IMAGE_TOKENS = 1600
"""An image whose size cannot be read: about the most either provider counts for one image."""

_MARKERS = {"openai": (b";base64,",), "anthropic": (b'"data": "', b'"data":"')}
_MIN_IMAGE_CHARS = 64  # shorter is no image worth counting (and no header PIL could read)
_MAX_TOKENS_KEYS = (b'"max_tokens"', b'"max_completion_tokens"')
_NUMBER = re.compile(rb"\s*:\s*(\d+)")
_HEADER_CHARS = 87384  # base64 of the first 64 KiB: where a PNG's or JPEG's size is (after any EXIF)


@dataclass(frozen=True)
class TokenEstimate:
    """A request's estimated tokens: ``input`` (text and images) and ``output`` (at most ``max_tokens``)."""

    input: int
    output: int = 0

    @property
    def total(self) -> int:
        """Input and output: what a limit on all tokens counts."""
        return self.input + self.output


def openai_image_tokens(width: int, height: int) -> int:
    """OpenAI's tokens for an image of ``width`` x ``height`` at high detail."""
    scale = min(1.0, 2048 / max(width, height))
    scale *= min(1.0, 768 / (min(width, height) * scale))
    return 85 + 170 * math.ceil(width * scale / 512) * math.ceil(height * scale / 512)


def anthropic_image_tokens(width: int, height: int) -> int:
    """Anthropic's tokens for an image of ``width`` x ``height`` (downscaled to 1568 on its longer side
    and to 1092 x 1092 pixels' area, the largest square of Anthropic's table)."""
    scale = min(1.0, 1568 / max(width, height), math.sqrt(1092 * 1092 / (width * height)))
    return math.ceil(width * scale * height * scale / 750)


def image_size(blob: bytes) -> tuple[int, int] | None:
    """The pixel size of the base64 image ``blob`` from its first bytes; None if it is no image PIL reads."""
    prefix = blob[:_HEADER_CHARS]
    prefix = prefix[:len(prefix) - len(prefix) % 4]
    try:
        with Image.open(io.BytesIO(base64.b64decode(prefix))) as image:
            return image.size
    except (binascii.Error, UnidentifiedImageError, OSError, SyntaxError, ValueError):
        return None


def _blobs(body: bytes, provider: str) -> list[tuple[int, int]]:
    """Where the base64 images of a request body are (start, end), in order: after a data URL's ``base64,``
    (OpenAI) or an image source's ``"data"`` key (Anthropic), up to the closing quote. ``bytes.find``, not
    a regular expression or a JSON parse: it skips megabytes of base64 at memory speed."""
    found: list[tuple[int, int]] = []
    for marker in _MARKERS["anthropic" if provider == "anthropic" else "openai"]:
        position = body.find(marker)
        while position >= 0:
            start = position + len(marker)
            end = body.find(b'"', start)
            if end < 0:
                break
            if end - start >= _MIN_IMAGE_CHARS:
                found.append((start, end))
            position = body.find(marker, end)
    return sorted(found)


def estimate_tokens(body: bytes, provider: str) -> TokenEstimate:
    """The estimated tokens of the request ``body`` (JSON as sent) to ``provider`` (see the module's rules)."""
    image_tokens = anthropic_image_tokens if provider == "anthropic" else openai_image_tokens
    images = 0
    text: list[bytes] = []
    last = 0
    for start, end in _blobs(body, provider):
        text.append(body[last:start])
        last = end
        size = image_size(body[start:min(end, start + _HEADER_CHARS)])
        images += image_tokens(*size) if size and min(size) > 0 else UNKNOWN_IMAGE_TOKENS
    text.append(body[last:])
    rest = b"".join(text)  # the body but its images: small, searched for max_tokens
    return TokenEstimate(math.ceil(len(rest) / CHARS_PER_TOKEN) + images, _max_tokens(rest))


def _max_tokens(body: bytes) -> int:
    """The request's ``max_tokens`` or ``max_completion_tokens`` (0 if it sets neither)."""
    for key in _MAX_TOKENS_KEYS:
        position = body.find(key)
        if position >= 0:
            found = _NUMBER.match(body, position + len(key))
            if found:
                return int(found.group(1))
    return 0
