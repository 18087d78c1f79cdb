"""A model request in JSON with its images by hash: what a transcript records and a model cache keys on.

The images of a request travel as base64 inside its messages (LangChain standard ``image`` blocks,
v0 ``source_type="base64"`` blocks, OpenAI ``image_url`` data URLs, Anthropic ``source`` blocks).
:func:`wire_request` replaces each by ``{"sha256": <hex>}``, the sha256 of the decoded bytes, which
are the bytes the provider receives, and keeps the bytes aside (:class:`WireImage`) so that a caller
stores each image once. Message ids and response metadata are left out: they differ between two runs
of the same request.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> request = wire_request([HumanMessage([{"type": "image", "base64": "aGk=", "mime_type": "image/png"}])])
    >>> request.messages[0]["content"][0]["base64"]
    {'sha256': '8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4'}
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from vtb_agents.tracing import DATA_URL, MIME_KEYS

__all__ = ["WireImage", "WireRequest", "request_key", "wire_request"]

_BASE64_KEYS = ("base64", "data")


@dataclass(frozen=True)
class WireImage:
    """One image of a request: the sha256 of its bytes, the bytes and their MIME type."""

    sha256: str
    data: bytes
    mime_type: str


@dataclass
class WireRequest:
    """A request's messages as JSON (images as ``{"sha256"}``) and its images in order of appearance
    (an image sent twice appears twice)."""

    messages: list[dict[str, Any]]
    images: list[WireImage] = field(default_factory=list)


def _decode(b64: str) -> bytes | None:
    try:
        return base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        return None


class _Hasher:
    def __init__(self, known: dict[str, WireImage] | None = None) -> None:
        self.images: list[WireImage] = []
        self.known = known

    def image(self, text: str, mime_type: str, start: int = 0) -> dict[str, str] | None:
        """``{"sha256"}`` of the base64 image ``text[start:]`` (``text`` may be a data URL)."""
        image = self.known.get(text) if self.known is not None else None
        if image is None:
            data = _decode(text[start:])
            if data is None:
                return None
            image = WireImage(hashlib.sha256(data).hexdigest(), data, mime_type)
            if self.known is not None:
                self.known[text] = image
        self.images.append(image)
        return {"sha256": image.sha256}

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            match = DATA_URL.match(value)
            if match:
                return self.image(value, match.group(1).lower(), match.end()) or value
            return value
        if isinstance(value, Mapping):
            return self.mapping(value)
        if isinstance(value, (list, tuple)):
            return [self.value(v) for v in value]
        return value

    def mapping(self, block: Mapping[str, Any]) -> dict[str, Any]:
        mime = next((block[k] for k in MIME_KEYS if isinstance(block.get(k), str)), "")
        is_image = mime.startswith("image/") or block.get("type") == "image"
        out: dict[str, Any] = {}
        for key, item in block.items():
            if is_image and key in _BASE64_KEYS and isinstance(item, str) and not DATA_URL.match(item):
                out[key] = self.image(item, mime or "application/octet-stream") or item
            else:
                out[key] = self.value(item)
        return out


def _message_json(message: BaseMessage, hasher: _Hasher) -> dict[str, Any]:
    data: dict[str, Any] = {"role": message.type, "content": hasher.value(message.content)}
    if message.name:
        data["name"] = message.name
    if isinstance(message, AIMessage) and message.tool_calls:
        data["tool_calls"] = [{"id": c["id"], "name": c["name"], "args": c["args"]} for c in message.tool_calls]
    if isinstance(message, ToolMessage):
        data["tool_call_id"] = message.tool_call_id
    return data


def wire_request(messages: Sequence[BaseMessage], known: dict[str, WireImage] | None = None) -> WireRequest:
    """The JSON form of ``messages`` with every inlined base64 image replaced by ``{"sha256"}``.

    ``known`` memoises images by their base64 text across requests (a conversation re-sends its
    images with every call): an image seen before is not decoded and hashed again. Python keeps a
    string's hash, so looking up the same string object (the artifact store caches the encoded
    images) costs nothing however large the image."""
    hasher = _Hasher(known)
    return WireRequest([_message_json(m, hasher) for m in messages], hasher.images)


def request_key(model: str, params: Mapping[str, Any], request: WireRequest,
                tools: Sequence[Any] = ()) -> str:
    """A sha256 naming one request: the model, its parameters, the messages (images by hash) and the
    tools. Two requests that would send the same bytes to the provider get the same key."""
    payload = {"model": model, "params": dict(params), "messages": request.messages, "tools": list(tools)}
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
