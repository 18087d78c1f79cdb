"""The JSON form of a model request: images by the sha256 of the bytes sent, keys stable across runs."""

from __future__ import annotations

import base64
import hashlib
import io

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from PIL import Image

from vtb_agents.models.wire import request_key, wire_request


def png(color: str) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (4, 3), color).save(out, format="PNG")
    return out.getvalue()


RED, BLUE = png("red"), png("blue")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def conversation() -> list:
    return [
        SystemMessage("be brief"),
        HumanMessage([{"type": "text", "text": "look"},
                      {"type": "image", "base64": b64(RED), "mime_type": "image/png"},
                      {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(BLUE)}"}}],
                     id="turn-0"),
        AIMessage("", tool_calls=[{"id": "c1", "name": "calculator", "args": {"expression": "1+1"}}], id="run-x"),
        ToolMessage("2", tool_call_id="c1"),
        HumanMessage([{"type": "image", "source_type": "base64", "data": b64(RED), "mime_type": "image/png"}]),
    ]


def test_every_image_form_becomes_the_sha256_of_its_bytes_in_order() -> None:
    request = wire_request(conversation())
    assert [(i.sha256, i.data, i.mime_type) for i in request.images] == [
        (sha(RED), RED, "image/png"), (sha(BLUE), BLUE, "image/png"), (sha(RED), RED, "image/png")]
    content = request.messages[1]["content"]
    assert content[1] == {"type": "image", "base64": {"sha256": sha(RED)}, "mime_type": "image/png"}
    assert content[2] == {"type": "image_url", "image_url": {"url": {"sha256": sha(BLUE)}}}
    assert request.messages[2] == {"role": "ai", "content": "",
                                   "tool_calls": [{"id": "c1", "name": "calculator", "args": {"expression": "1+1"}}]}
    assert request.messages[3] == {"role": "tool", "content": "2", "tool_call_id": "c1"}


def test_request_key_ignores_message_ids_and_follows_every_part_of_the_request() -> None:
    base = conversation()
    renamed = [m.model_copy(update={"id": f"other-{i}"}) for i, m in enumerate(base)]
    key = request_key("m", {"temperature": 0}, wire_request(base), [{"name": "calculator"}])
    assert request_key("m", {"temperature": 0}, wire_request(renamed), [{"name": "calculator"}]) == key
    other_image = base[:1] + [HumanMessage([{"type": "image", "base64": b64(BLUE), "mime_type": "image/png"}])]
    changed = {
        request_key("n", {"temperature": 0}, wire_request(base), [{"name": "calculator"}]),
        request_key("m", {"temperature": 1}, wire_request(base), [{"name": "calculator"}]),
        request_key("m", {"temperature": 0}, wire_request(base), []),
        request_key("m", {"temperature": 0}, wire_request(other_image), [{"name": "calculator"}]),
    }
    assert key not in changed and len(changed) == 4


def test_text_that_is_not_an_image_is_kept() -> None:
    request = wire_request([HumanMessage([{"type": "text", "text": "data:image/png;base64,@@not base64"}])])
    assert request.images == []
    assert request.messages[0]["content"][0]["text"] == "data:image/png;base64,@@not base64"


def test_known_images_are_reused_across_requests_with_the_same_result() -> None:
    known: dict = {}
    first = wire_request(conversation(), known)
    assert sorted(known) == sorted({b64(RED), f"data:image/png;base64,{b64(BLUE)}"})  # as each was given
    again = wire_request(conversation(), known)
    assert again.messages == first.messages == wire_request(conversation()).messages
    assert [(i.sha256, i.data) for i in again.images] == [(sha(RED), RED), (sha(BLUE), BLUE), (sha(RED), RED)]
    assert again.images[0] is first.images[0]  # not decoded again
