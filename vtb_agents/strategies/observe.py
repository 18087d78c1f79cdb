"""How a model sees images: references materialised at call time, and the observation rule.

The observation rule (DESIGN.md): every tool call gets a text ToolMessage; the images saved in a
round go in one HumanMessage *after all* of that round's ToolMessages (legal for the OpenAI API),
or, with native tool images, inside the tool results. Our turn graphs write that message into the
conversation; for a user's agent, :func:`show_tool_images` inserts it into each model request.
"""

from __future__ import annotations

from typing import Any, Sequence

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage

from vtb_agents.artifacts import IMAGE_REF_TYPE, ArtifactStore, image_ref_block

OBSERVATION_HEADER = "Images saved by your tool calls in this round:"
REGION_FIELD = "region"
"""Field of an image reference block holding the region of a task image the image shows."""


def materialize_block(block: Any, artifacts: ArtifactStore, max_side: int) -> Any:
    """An ``image_ref`` block as a LangChain standard image block; other blocks unchanged."""
    if not (isinstance(block, dict) and block.get("type") == IMAGE_REF_TYPE):
        return block
    mime_type, data = artifacts.encoded(block["ref"], max_side)
    return {"type": "image", "base64": data, "mime_type": mime_type}


def materialize_messages(messages: Sequence[AnyMessage], artifacts: ArtifactStore, max_side: int) -> list[AnyMessage]:
    """Copies of ``messages`` whose image references carry the (downscaled) image bytes."""
    out = []
    for message in messages:
        content = message.content
        if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == IMAGE_REF_TYPE for b in content):
            blocks = [materialize_block(b, artifacts, max_side) for b in content]
            message = message.model_copy(update={"content": blocks})
        out.append(message)
    return out


def images_of(message: AnyMessage) -> list[dict[str, Any]]:
    """The images a tool call saved (``{"name", "ref", "size"}``), from its ToolMessage's artifact."""
    if not isinstance(message, ToolMessage) or not isinstance(message.artifact, dict):
        return []
    return list(message.artifact.get("images", []))


def image_blocks(image: dict[str, Any]) -> list[dict[str, Any]]:
    """A caption and an image reference block for one saved image; the block keeps the image's
    ``region`` (the part of a task image it was cut from), which the turn's record collects."""
    width, height = image["size"]
    block = image_ref_block(image["ref"], image["name"])
    if image.get("region") is not None:
        block[REGION_FIELD] = image["region"]
    return [{"type": "text", "text": f"{image['name']} ({width}x{height}):"}, block]


def observation_message(tool_messages: Sequence[AnyMessage]) -> HumanMessage | None:
    """The one user message showing a round's saved images, or None when the round saved none."""
    images = [image for m in tool_messages for image in images_of(m)]
    if not images:
        return None
    blocks: list[Any] = [{"type": "text", "text": OBSERVATION_HEADER}]
    for image in images:
        blocks += image_blocks(image)
    return HumanMessage(content=blocks)


def with_native_images(message: ToolMessage) -> ToolMessage:
    """``message`` with its saved images inside its own content (providers that accept that)."""
    blocks: list[Any] = [{"type": "text", "text": message.text}]
    for image in images_of(message):
        blocks += image_blocks(image)
    return message.model_copy(update={"content": blocks})


def round_messages(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """The messages after the last AIMessage (the current round's tool results)."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], AIMessage):
            return list(messages[i + 1:])
    return []


def show_tool_images(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """``messages`` with an observation message after every round of tool results that saved images.

    For conversations kept by someone else's agent: the rule is applied to the request, not to the
    agent's state. A round already followed by its observation message is left as it is.

    >>> from langchain_core.messages import AIMessage, ToolMessage
    >>> round_ = [AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "1"}]),
    ...           ToolMessage("ok", tool_call_id="1", artifact={"images": [
    ...               {"name": "transformed_image_0.png", "ref": "0" * 64, "size": [8, 8]}]})]
    >>> [type(m).__name__ for m in show_tool_images(round_)]
    ['AIMessage', 'ToolMessage', 'HumanMessage']
    """
    out: list[AnyMessage] = []
    pending: list[AnyMessage] = []
    for message in [*messages, None]:
        if isinstance(message, ToolMessage):
            pending.append(message)
            continue
        if pending:
            observation = observation_message(pending)
            already = isinstance(message, HumanMessage) and _is_observation(message)
            out += pending + ([observation] if observation is not None and not already else [])
            pending = []
        if message is not None:
            out.append(message)
    return out


def _is_observation(message: HumanMessage) -> bool:
    first = message.content[0] if isinstance(message.content, list) and message.content else None
    return isinstance(first, dict) and first.get("text") == OBSERVATION_HEADER
