"""What a client sends to the Studio graphs, made into what the graphs run on.

- Chat messages: image content blocks as a user would send them to any chat model (OpenAI
  ``image_url`` with a ``data:`` URL, or LangChain's standard ``image`` block with base64 data)
  become files in the sandbox (``image_0.png``, ``image_1.png``, ... in the order they arrive in the
  thread) and artifact references in the state. The server never downloads: an ``http(s)`` image
  URL is refused with an error saying so.
- Tasks: a ``task.json`` object whose images carry their bytes inline, as base64 (or a ``data:``
  URL) in ``images[i].data``; a task in a suite is named by ``task_id`` instead.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, Callable

from langchain_core.messages import AnyMessage, HumanMessage
from pydantic import ValidationError

from vtb_agents.artifacts import IMAGE_REF_TYPE
from vtb_agents.tasks.errors import TaskLoadError
from vtb_agents.tasks.local import describe_validation_error
from vtb_agents.tasks.model import Task
from vtb_agents.tasks.validate import validate_task

_DATA_URL = re.compile(r"^data:[\w.+-]+/[\w.+-]+(?:;[\w.+-]+=[\w.+-]+)*;base64,(.*)$", re.DOTALL)
PlaceImage = Callable[[str, bytes], list[dict[str, Any]]]
"""Puts an image into the sandbox under a name and returns the blocks that show it in a message."""


def decode_base64(text: str, what: str) -> bytes:
    """Bytes of base64 ``text`` (a ``data:...;base64,`` URL too); ValueError naming ``what`` otherwise."""
    match = _DATA_URL.match(text.strip())
    payload = match.group(1) if match else text
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{what}: not base64 image data (or a data: URL)") from None


def block_image(block: Any, what: str) -> bytes | None:
    """The image bytes of a message content block, or None when it is not an image block."""
    if not isinstance(block, dict) or block.get("type") not in ("image_url", "image"):
        return None
    if block["type"] == "image_url":
        image_url = block.get("image_url")
        url = image_url.get("url") if isinstance(image_url, dict) else image_url
    elif isinstance(block.get("base64"), str):
        return decode_base64(block["base64"], what)
    elif block.get("source_type") == "base64" and isinstance(block.get("data"), str):
        return decode_base64(block["data"], what)
    else:
        url = block.get("url")
    if not isinstance(url, str) or not url.startswith("data:"):
        raise ValueError(f"{what}: only inline images are accepted (a data: URL or base64 data); "
                         f"the server does not download {str(url)[:60]!r}")
    return decode_base64(url, what)


def ingest_message(message: AnyMessage, first_index: int, place: PlaceImage, message_id: str) -> HumanMessage:
    """``message`` as the thread's user message ``message_id``: its images placed (``image_{k}.png``
    from ``first_index`` on) and replaced by their labels and references, its text kept."""
    content = message.content if isinstance(message.content, list) else [{"type": "text", "text": message.content}]
    blocks: list[Any] = []
    index = first_index
    for number, block in enumerate(content, start=1):
        data = block_image(block, f"message content block {number}")
        if data is None:
            blocks.append({"type": "text", "text": block} if isinstance(block, str) else block)
            continue
        blocks += place(f"image_{index}.png", data)
        index += 1
    return HumanMessage(content=blocks, id=message_id)


def thread_images(messages: list[AnyMessage]) -> list[tuple[str, str]]:
    """(file name, artifact reference) of every image the conversation refers to, in order."""
    return [(block["name"], block["ref"]) for message in messages if isinstance(message.content, list)
            for block in message.content if isinstance(block, dict) and block.get("type") == IMAGE_REF_TYPE]


def user_image_count(messages: list[AnyMessage]) -> int:
    """How many images users have sent in the thread so far (``image_0.png`` ... are taken)."""
    return len({name for name, _ in thread_images(messages) if re.fullmatch(r"image_\d+\.png", name)})


def task_from_json(data: Any, *, with_images: bool = True) -> Task:
    """The task of a ``task.json`` object sent inline; its images' bytes come from ``images[i].data``
    (base64). ``with_images=False`` (grading) ignores image data. Errors name task, turn and field."""
    if not isinstance(data, dict):
        raise ValueError(f"'task' must be a task.json object, got {type(data).__name__}")
    task_id = str(data.get("id", "(inline task)"))
    images = data.get("images") or []
    payloads = [image.get("data") if isinstance(image, dict) else None for image in images]
    fields = {**data, "images": [{k: v for k, v in image.items() if k != "data"} if isinstance(image, dict) else image
                                 for image in images]}
    try:
        task = Task.model_validate(fields)
    except ValidationError as exc:
        field, turn, message = describe_validation_error(exc)
        raise TaskLoadError(task_id, field, message, turn=turn, source="input 'task'") from None
    if not with_images:
        return task
    for index, (image, payload) in enumerate(zip(task.images, payloads)):
        if not isinstance(payload, str):
            raise TaskLoadError(task.id, f"images.{index}.data", "an inline task carries each image as base64 in "
                                "'data' (or name a task of the suite with 'task_id')", source="input 'task'")
        image.data = decode_base64(payload, f"task {task.id!r}, field 'images.{index}.data'")
    errors = [p for p in validate_task(task) if p.severity == "error"]
    if errors:
        raise ValueError(str(errors[0]))
    return task
