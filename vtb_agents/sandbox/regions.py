"""The host's side of image-region tracking: the region a saved image records (``region_tracker.py``).

The file comes from model code, so what it says is checked: a region that is not valid JSON of an
:class:`~vtb_agents.results.ImageRegion` (after clamping to its image and rounding to 1/1000 pixel)
counts as none. A forged region only misleads the region metric about the model itself.
"""

from __future__ import annotations

import io
import json
import math
import warnings

from PIL import Image
from pydantic import ValidationError

from vtb_agents.results import ImageRegion

from .region_tracker import REGION_KEY


def parse_region(text: object) -> ImageRegion | None:
    """The region of a ``vtb-region`` text chunk, clamped and rounded; None when it is not one."""
    if not isinstance(text, str) or len(text) > 1000:
        return None
    try:
        data = json.loads(text)
        width, height = (int(v) for v in data["image_size"])
        x0, y0, x1, y1 = (float(v) for v in data["box"])
        if not all(math.isfinite(v) for v in (x0, y0, x1, y1)):
            return None
        box = (round(max(0.0, x0), 3), round(max(0.0, y0), 3), round(min(width, x1), 3), round(min(height, y1), 3))
        return ImageRegion(image=data["image"], box=box, image_size=(width, height))
    except (ValueError, TypeError, KeyError, ValidationError):
        return None


def read_region(data: bytes) -> ImageRegion | None:
    """The region recorded in encoded image ``data`` (only the header chunks are read), or None."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                return parse_region(image.info.get(REGION_KEY))
    except (OSError, ValueError, Image.DecompressionBombError):
        return None
