"""Turn image references in messages into provider image blocks, only when the model is called."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AnyMessage

from vtb_agents.artifacts import IMAGE_REF_TYPE, ArtifactStore


def materialize_block(block: Any, artifacts: ArtifactStore, max_side: int) -> Any:
    """An ``image_ref`` block as a LangChain standard image block; other blocks unchanged."""
    if not (isinstance(block, dict) and block.get("type") == IMAGE_REF_TYPE):
        return block
    mime_type, data = artifacts.encoded(block["ref"], max_side)
    return {"type": "image", "base64": data, "mime_type": mime_type}


def materialize_messages(messages: list[AnyMessage], artifacts: ArtifactStore, max_side: int) -> list[AnyMessage]:
    """Copies of ``messages`` whose image references carry the (downscaled) image bytes."""
    out = []
    for message in messages:
        content = message.content
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == IMAGE_REF_TYPE for b in content
        ):
            blocks = [materialize_block(b, artifacts, max_side) for b in content]
            message = message.model_copy(update={"content": blocks})
        out.append(message)
    return out
