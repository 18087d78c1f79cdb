"""Prompt-cache breakpoints: where a request's stable prefix ends, marked for providers that want it.

Why: within an episode every request extends the one before (docs/concepts/prompt-caching.md), so a
provider's prompt cache can serve all of it but the newest part. OpenAI finds such prefixes itself;
Anthropic caches only up to blocks marked ``cache_control`` (at most :data:`MAX_BREAKPOINTS` per
request), in the order tools, system, messages. :func:`mark_prefix` places three breakpoints:

1. on the system prompt: the tools and the system prompt, the same in every request of a run;
2. on the last message of the previous request (the message before the newest reply): what the
   previous request wrote to the cache, read back here;
3. on the last message: all of this request, written for the next one to read.

Reads of a cached prefix cost a tenth of the input price and writes 1.25 times it (the presets'
``cached_input`` and ``cache_write``); the usage of each call says how many of each there were.
"""

from __future__ import annotations

from typing import Any, Sequence, TypeVar, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, SystemMessage

CACHE_CONTROL = {"type": "ephemeral"}
"""Anthropic's breakpoint (five-minute cache, refreshed by every read)."""
MAX_BREAKPOINTS = 4
"""Anthropic's limit of ``cache_control`` blocks in one request."""
M = TypeVar("M", bound=AnyMessage)

BREAKPOINT_LLM_TYPES = frozenset({"anthropic-chat"})
"""``_llm_type`` of the chat models whose provider caches only up to marked blocks (``ChatAnthropic``)."""


def wants_breakpoints(model: BaseChatModel | None) -> bool:
    """True for a chat model whose provider needs ``cache_control`` breakpoints to cache prompts."""
    return model is not None and getattr(model, "_llm_type", None) in BREAKPOINT_LLM_TYPES


def marked(message: M) -> M:
    """A copy of ``message`` whose last content block carries the cache breakpoint (text content
    becomes one text block); LangChain's Anthropic client moves it onto a tool result's own block.
    An empty message stays as it is (Anthropic refuses an empty text block)."""
    content = message.content
    if not content:
        return message
    blocks: list[Any] = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    last = blocks[-1]
    blocks[-1] = {**({"type": "text", "text": last} if isinstance(last, str) else last), "cache_control": CACHE_CONTROL}
    return cast(M, message.model_copy(update={"content": blocks}))


def mark_prefix(system: SystemMessage, messages: Sequence[AnyMessage]) -> tuple[SystemMessage, list[AnyMessage]]:
    """``system`` and ``messages`` with breakpoints on the system prompt, on the last message before the
    newest reply (where the previous request ended) and on the last message (see the module docstring)."""
    out = list(messages)
    replies = [i for i, m in enumerate(out) if isinstance(m, AIMessage)]
    positions = {len(out) - 1} if out else set()
    if replies and replies[-1] > 0:
        positions.add(replies[-1] - 1)
    for index in positions:
        out[index] = marked(out[index])
    return marked(system), out
