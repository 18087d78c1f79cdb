"""Images that model-written code saves: picked up as artifacts, within a host memory bound.

Why: model code is hostile or careless, and a 13000x13000 PNG is a few hundred KB on disk but
half a gigabyte once decoded on the host (three of them at ``--concurrency 16`` exhaust any
machine). Only the header is read here; an image over the validator's pixel limit
(:data:`~vtb_agents.defaults.DEFAULT_MAX_PIXELS`) is refused, and the code call fails with
a message telling the model the limit, so that it can save a smaller crop or a downscaled copy.
"""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath
from typing import Any

from PIL import Image

from vtb_agents.artifacts import IMAGE_SUFFIXES, ArtifactStore
from vtb_agents.sandbox.base import ExecResult, Sandbox
from vtb_agents.sandbox.regions import read_region
from vtb_agents.defaults import DEFAULT_MAX_PIXELS


@dataclass
class CollectedImages:
    """What a code call's new files gave: stored images (``{"name", "ref", "size"}``, and ``"region"``
    when the sandbox recorded the part of a task image the image was cut from) and refusals."""

    images: list[dict[str, Any]] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from the header of encoded ``data`` (nothing is decoded), or None if it
    is not a readable image."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                return image.size
    except (OSError, ValueError, Image.DecompressionBombError):
        return None


def over_limit_message(name: str, size: tuple[int, int], max_pixels: int) -> str:
    """What the model reads about an image it saved that is too large to be shown."""
    width, height = size
    return (f"{name} is {width}x{height} = {width * height:,} pixels, over the limit of {max_pixels:,} "
            "pixels: it was not shown; save a crop or a downscaled copy instead")


def collect_images(sandbox: Sandbox, artifacts: ArtifactStore, names: list[str],
                   max_pixels: int = DEFAULT_MAX_PIXELS) -> CollectedImages:
    """Store every decodable image among ``names`` within ``max_pixels``; refuse larger ones.

    Files that are not images (or not readable ones) are neither stored nor refused: they stay
    listed as plain new files.
    """
    found = CollectedImages()
    for name in names:
        if PurePosixPath(name).suffix.lower() not in IMAGE_SUFFIXES:
            continue
        data = sandbox.get_file(name)
        size = image_size(data)
        if size is None:
            continue
        if size[0] * size[1] > max_pixels:
            found.refused.append(over_limit_message(name, size, max_pixels))
            continue
        image: dict[str, Any] = {"name": name, "ref": artifacts.put(data), "size": list(size)}
        if (region := read_region(data)) is not None:
            image["region"] = region.model_dump(mode="json")
        found.images.append(image)
    return found


def with_refusals(result: ExecResult, refused: list[str]) -> ExecResult:
    """``result`` as a failed call when images were refused, the refusals in its error line."""
    if not refused:
        return result
    error = "; ".join(filter(None, [result.error, *refused]))
    return replace(result, ok=False, error=error)
