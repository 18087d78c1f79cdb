"""A scripted vision model for the local chat-completions server (tests/support/openai_server.py).

Per turn it crops the turn's newest image with python_image_processing, then answers; on
follow-up tasks it can open by asking a clarifying question.
"""

from __future__ import annotations

import base64
import io
import itertools

from PIL import Image

CROP = "from PIL import Image\nImage.open('image_{i}.png').crop((0, 0, 300, 200)).save('transformed_image_{n}.png')"
QUESTION = "Which item do you mean?"


class VisionModel:
    """Per turn: crop the turn's newest image, then answer; asks first on follow-up task openings."""

    def __init__(self, ask_first: bool = False, ask_on: frozenset[str] | None = None) -> None:
        self.saved = itertools.count()
        self.ask_first = ask_first
        self.ask_on = ask_on  # ask only when the conversation opens with one of these prompts

    def __call__(self, body: dict) -> object:
        last = body["messages"][-1]
        if last["role"] == "user" and not _is_observation(last):
            opening = next(_texts(m)[0] for m in body["messages"] if m["role"] == "user")
            asks = self.ask_first and (self.ask_on is None or opening in self.ask_on)
            if asks and not any(m["role"] == "assistant" for m in body["messages"]):
                return QUESTION
            newest = max(int(n.split("_")[1].split(".")[0]) for n in _image_names(body))
            code = CROP.format(i=newest, n=next(self.saved))
            return {"tool_calls": [{"name": "python_image_processing", "arguments": {"code": code}}]}
        return "Final answer: 42."


def _parts(message: dict) -> list:
    return message["content"] if isinstance(message.get("content"), list) else []


def _texts(message: dict) -> list[str]:
    content = message.get("content")
    return [content] if isinstance(content, str) else [p["text"] for p in _parts(message) if p["type"] == "text"]


def _is_observation(message: dict) -> bool:
    return any(t.startswith("Images saved by your tool calls") for t in _texts(message))


def _image_names(body: dict) -> list[str]:
    return [t.strip("[]") for m in body["messages"] for t in _texts(m) if t.startswith("[image_")]


def _images(message: dict) -> list[Image.Image]:
    found = []
    for part in _parts(message):
        if part["type"] == "image_url":
            header, data = part["image_url"]["url"].split(",", 1)
            assert header == "data:image/png;base64"
            found.append(Image.open(io.BytesIO(base64.b64decode(data))))
    return found
