"""Images a strategy prepares itself (marked or zoomed views), made in the episode's sandbox.

The code runs in the sandbox like a tool call (the task's images never leave it); the views it
saves become artifacts and are shown to the model in one user message, like a round's images.
"""

from __future__ import annotations

from typing import Any, Sequence

from langchain_core.messages import AnyMessage, HumanMessage

from vtb_agents.artifacts import IMAGE_REF_TYPE
from vtb_agents.models.replay import TURN_MESSAGE_PREFIX
from vtb_agents.strategies.base import EpisodeContext
from vtb_agents.strategies.observe import image_blocks
from vtb_agents.tools.images import collect_images


class ViewError(RuntimeError):
    """The strategy's own code failed in the sandbox (a bug or a broken image, not the model's doing)."""


def turn_images(messages: Sequence[AnyMessage]) -> list[str]:
    """File names of the images the current turn's opening message brought (``image_N.png``)."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage) and (message.id or "").startswith(TURN_MESSAGE_PREFIX):
            content = message.content if isinstance(message.content, list) else []
            return [b["name"] for b in content if isinstance(b, dict) and b.get("type") == IMAGE_REF_TYPE]
    return []


def make_views(ctx: EpisodeContext, code: str) -> list[dict[str, Any]]:
    """Run the strategy's ``code`` in the sandbox; the images it saved, stored as artifacts."""
    result = ctx.sandbox.run(code, timeout=ctx.code_timeout_s)
    if not result.ok:
        raise ViewError(f"preparing views failed: {result.error or result.stderr}".strip())
    return collect_images(ctx.sandbox, ctx.artifacts, result.new_files).images


def views_message(text: str, views: list[dict[str, Any]]) -> HumanMessage:
    """One user message: ``text``, then each view with its caption."""
    blocks: list[Any] = [{"type": "text", "text": text}]
    for view in views:
        blocks += image_blocks(view)
    return HumanMessage(content=blocks)
