"""The boxes the region metric computes IoU from, as the host reads them from a saved PNG
(``sandbox/regions.py``), at their boundaries: a chunk of exactly 1,000 characters and one more,
each edge clamped on its own, rounding to 1/1000 pixel, an infinite edge, and images that are no
PNG or declare a decompression bomb's size. Part of ``make mutation`` (docs/development.md)."""

from __future__ import annotations

import io
import json
import struct
import zlib

import pytest
from PIL import Image, PngImagePlugin

from vtb_agents.results import ImageRegion
from vtb_agents.sandbox.region_tracker import REGION_KEY
from vtb_agents.sandbox.regions import parse_region, read_region


def chunk(box: list[object], size: list[object] = [100, 50], image: str = "image_0.png") -> str:  # noqa: B006
    return json.dumps({"image": image, "box": box, "image_size": size})


def test_each_edge_is_clamped_to_the_image_on_its_own_and_rounded_to_a_thousandth():
    assert parse_region(chunk([-1.5, 2, 30, 40])) == ImageRegion(image="image_0.png", box=(0, 2, 30, 40),
                                                                 image_size=(100, 50))
    assert parse_region(chunk([1, -2, 30, 40])) == ImageRegion(image="image_0.png", box=(1, 0, 30, 40),
                                                               image_size=(100, 50))
    assert parse_region(chunk([1, 2, 130, 40])).box == (1, 2, 100, 40)  # type: ignore[union-attr]
    assert parse_region(chunk([1, 2, 30, 90])).box == (1, 2, 30, 50)  # type: ignore[union-attr]
    assert parse_region(chunk([1.23456, 2.4004, 30.4996, 40.12345])).box == (  # type: ignore[union-attr]
        1.235, 2.4, 30.5, 40.123)
    assert parse_region(chunk(["1", "2", "30", "40"], ["100", "50"])).box == (1, 2, 30, 40)  # type: ignore[union-attr]


@pytest.mark.parametrize("text", [
    chunk([0, 0, float("inf"), 40]), chunk([0, float("-inf"), 30, 40]), chunk([0, 0, 30, float("nan")]),
    chunk([5, 2, 3, 4]),  # right of left: no box
    chunk([1, 2, 3, 4], image="../etc/passwd"), chunk([1, 2, 3], [100, 50]), chunk(7), chunk([1, 2, 3, 4], [1.5, "x"]),
    '{"box": [1, 2, 3, 4], "image_size": [100, 50]}', "not json", b'{"image": "image_0.png"}', None,
])
def test_what_is_not_a_finite_box_inside_its_image_is_no_region(text):
    assert parse_region(text) is None


def test_a_chunk_of_exactly_a_thousand_characters_is_read_and_a_longer_one_is_not():
    text = chunk([1, 2, 3, 4])
    assert parse_region(text + " " * (1000 - len(text))) is not None
    assert parse_region(text + " " * (1001 - len(text))) is None


def png(text: str | None, size: tuple[int, int] = (4, 3)) -> bytes:
    info = PngImagePlugin.PngInfo()
    if text is not None:
        info.add_text(REGION_KEY, text)
    out = io.BytesIO()
    Image.new("RGB", size, "white").save(out, "PNG", pnginfo=info)
    return out.getvalue()


def declared(width: int, height: int, text: str) -> bytes:
    """A PNG header declaring ``width`` x ``height`` pixels with a region chunk (no pixel data follows)."""

    def part(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    text_chunk = REGION_KEY.encode() + b"\0" + text.encode()
    return (b"\x89PNG\r\n\x1a\n" + part(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + part(b"tEXt", text_chunk) + part(b"IDAT", zlib.compress(b"")) + part(b"IEND", b""))


def test_read_region_takes_the_chunk_of_a_png_and_nothing_from_anything_else():
    assert read_region(png(chunk([1, 2, 3, 4]))) == ImageRegion(image="image_0.png", box=(1, 2, 3, 4),
                                                                 image_size=(100, 50))
    assert read_region(png(None)) is None
    assert read_region(b"not an image") is None
    # over Pillow's pixel limit (a warning, ignored) the header is still read; over twice the limit
    # (Pillow's DecompressionBombError) nothing is
    limit = Image.MAX_IMAGE_PIXELS or 89_478_485
    side = int((1.5 * limit) ** 0.5)
    assert read_region(declared(side, side, chunk([1, 2, 3, 4]))) is not None
    side = int((2.5 * limit) ** 0.5)
    assert read_region(declared(side, side, chunk([1, 2, 3, 4]))) is None
