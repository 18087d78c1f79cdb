"""Token usage of chat-model calls, summed from LangChain's ``usage_metadata`` by a callback handler.

Why: the paper's cost of a run is its tokens; providers report them per call, and LangChain puts
them on each reply's ``usage_metadata``. :func:`track_usage` installs a :class:`UsageTracker`
for every LangChain call made in its ``with`` block (in this thread and in the threads LangChain
and LangGraph start from it), through langchain-core's configure hook, the mechanism of
``get_usage_metadata_callback``: nothing has to pass callbacks down by hand, so the model, an
``agent:`` runnable and the LLM judge are all counted. Only what the provider reported is counted;
a reply without usage is counted in ``calls_without_usage``.

Per turn: the episode driver calls :func:`set_turn` with the 0-based turn index before it feeds
a turn to the graph (and again when it resumes after a clarifying question, with the new turn);
calls made while a turn is set are also summed under that turn. A call whose run metadata carries
``vtb_turn`` is counted under that turn instead.

A reply the model cache answered (:mod:`vtb_agents.models.cache`) is counted as the call it
replays, with the usage the provider reported then, and also summed in ``from_cache``: its tokens
are the original's, what it costs is nothing (:mod:`vtb_agents.analysis.cost`).

:func:`measure_usage` measures the calls of a block apart while the active tracker keeps counting
them (the verdict cache stores each judge call's usage with its verdict); :func:`add_usage` counts
usage measured earlier as calls made now (a verdict a killed attempt of the run paid for, or one a
provider's batch API gave: its usage is summed in ``batch`` too, billed at the batch price).

A tracker with a ``token_limit`` (``--task-token-limit``) raises :class:`TokenLimitReached` from the
call whose reply takes the tokens it counted past the limit (the tokens as reported, model-cache
answers included, so that a replay ends where the original did): the task ends as ``token_limit``
(:mod:`vtb_agents.runner.outcomes`).
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.tracers.context import register_configure_hook

from vtb_agents.results import TokenUsage

TURN_METADATA_KEY = "vtb_turn"
CACHE_HIT_METADATA_KEY = "vtb_model_cache_key"
"""Set in a reply's ``response_metadata`` (to its request key) when the model cache answered it
(:mod:`vtb_agents.models.cache`): counted in ``from_cache`` too."""

_active: ContextVar[UsageTracker | None] = ContextVar("vtb_usage_tracker", default=None)
_measuring: ContextVar[UsageTracker | None] = ContextVar("vtb_usage_measure", default=None)


BATCH_TIERS = frozenset({"flex"})
"""Service tiers billed at the batch rate: OpenAI bills ``service_tier="flex"`` at its Batch API rates
(https://platform.openai.com/docs/guides/flex-processing); set it with ``--model-kwargs``."""
_TIERS = ("flex", "priority")
"""Service tiers LangChain's OpenAI client reports apart: their token details are keyed ``flex_cache_read``,
``flex_reasoning`` (and the tier's own count under ``flex``) instead of ``cache_read``, ``reasoning``."""


def billed_at_batch(usage: TokenUsage) -> TokenUsage:
    """``usage`` with all of it billed at the batch rate (its ``batch_*`` counts equal its counts): a
    call answered through a provider's batch API, or on a batch-priced service tier."""
    return usage.model_copy(update={"batch_calls": usage.calls, "batch_input_tokens": usage.input_tokens,
                                    "batch_cached_tokens": usage.cached_tokens,
                                    "batch_cache_write_tokens": usage.cache_write_tokens,
                                    "batch_output_tokens": usage.output_tokens})


def usage_of(message: AIMessage) -> TokenUsage | None:
    """The usage a reply reports (None when its ``usage_metadata`` is missing, or holds no token
    counts: LangChain adds ``total_cost: 0`` to a cached reply that had none). Cache reads and writes
    are LangChain's ``cache_read`` and ``cache_creation`` (OpenAI's ``prompt_tokens_details.cached_tokens``,
    Anthropic's ``cache_read_input_tokens`` and ``cache_creation_input_tokens``); a reply on a service
    tier of :data:`BATCH_TIERS` is billed at the batch rate."""
    meta = message.usage_metadata
    if not meta or "input_tokens" not in meta:
        return None
    inputs: dict[str, Any] = dict(meta.get("input_token_details") or {})  # tier keys are not in the TypedDict
    outputs: dict[str, Any] = dict(meta.get("output_token_details") or {})
    tier = next((t for t in _TIERS if t in inputs or t in outputs), None)
    prefix = f"{tier}_" if tier else ""
    usage = TokenUsage(calls=1, input_tokens=meta.get("input_tokens", 0), output_tokens=meta.get("output_tokens", 0),
                       total_tokens=meta.get("total_tokens", 0),
                       reasoning_tokens=outputs.get(f"{prefix}reasoning", 0) or 0,
                       cached_tokens=inputs.get(f"{prefix}cache_read", 0) or 0,
                       cache_write_tokens=inputs.get(f"{prefix}cache_creation", 0) or 0)
    return billed_at_batch(usage) if tier in BATCH_TIERS else usage


class TokenLimitReached(RuntimeError):
    """A task's model calls used more tokens (input and output) than its ``--task-token-limit``."""


class UsageTracker(BaseCallbackHandler):
    """Sums the usage of every chat-model reply it sees, in total and per turn (thread-safe); with a
    ``token_limit``, the reply that takes the total past it raises :class:`TokenLimitReached`."""

    def __init__(self, token_limit: int | None = None) -> None:
        super().__init__()
        self.token_limit = token_limit
        self.raise_error = token_limit is not None  # LangChain re-raises a handler's error only with this set
        self._lock = threading.Lock()
        self.total = TokenUsage()
        self.from_cache = TokenUsage()
        self.by_turn: dict[int, TokenUsage] = {}
        self.turn: int | None = None
        self._run_turns: dict[UUID, int] = {}

    def set_turn(self, turn: int | None) -> None:
        """Count the calls that follow under ``turn`` (0-based), or under no turn (None)."""
        with self._lock:
            self.turn = turn

    def on_chat_model_start(self, serialized: dict[str, Any], messages: Any, *, run_id: UUID,
                            metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        """Remember the turn of this call: its metadata's ``vtb_turn``, else the current turn."""
        turn = (metadata or {}).get(TURN_METADATA_KEY, self.turn)
        if isinstance(turn, int):
            with self._lock:
                self._run_turns[run_id] = turn

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        """Add the reply's reported usage (or one call without usage) to the totals."""
        generation = response.generations[0][0] if response.generations and response.generations[0] else None
        message = generation.message if isinstance(generation, ChatGeneration) else None
        usage = usage_of(message) if isinstance(message, AIMessage) else None
        usage = usage or TokenUsage(calls=1, calls_without_usage=1)
        cached = isinstance(message, AIMessage) and CACHE_HIT_METADATA_KEY in message.response_metadata
        with self._lock:
            self.total = self.total + usage
            if cached:
                self.from_cache = self.from_cache + usage
            turn = self._run_turns.pop(run_id, None)
            if turn is not None:
                self.by_turn[turn] = self.by_turn.get(turn, TokenUsage()) + usage
            used = self.total.input_tokens + self.total.output_tokens
        if self.token_limit is not None and used > self.token_limit:
            raise TokenLimitReached(f"the task's model calls used {used} tokens, past --task-token-limit "
                                    f"{self.token_limit}")

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        """A failed call reports no usage: forget its turn."""
        with self._lock:
            self._run_turns.pop(run_id, None)

    def add(self, usage: TokenUsage, from_cache: TokenUsage) -> None:
        """Count ``usage`` (of which the model cache answered ``from_cache``) as calls made now, under
        the current turn if one is set."""
        with self._lock:
            self.total = self.total + usage
            self.from_cache = self.from_cache + from_cache
            if self.turn is not None:
                self.by_turn[self.turn] = self.by_turn.get(self.turn, TokenUsage()) + usage


register_configure_hook(_active, inheritable=True)
register_configure_hook(_measuring, inheritable=True)


@contextmanager
def track_usage(token_limit: int | None = None) -> Iterator[UsageTracker]:
    """A :class:`UsageTracker` receiving every LangChain chat-model call made inside the block (with
    ``token_limit``: raising :class:`TokenLimitReached` from the call that passes it)."""
    tracker = UsageTracker(token_limit)
    token = _active.set(tracker)
    try:
        yield tracker
    finally:
        _active.reset(token)


@contextmanager
def measure_usage() -> Iterator[UsageTracker]:
    """A :class:`UsageTracker` of the LangChain chat-model calls made inside the block only, which the
    :func:`track_usage` tracker around it counts as well (a handler of its own: LangChain attaches
    each handler once to a run, so nothing is counted twice)."""
    tracker = UsageTracker()
    token = _measuring.set(tracker)
    try:
        yield tracker
    finally:
        _measuring.reset(token)


def add_usage(usage: TokenUsage, from_cache: TokenUsage | None = None) -> None:
    """Count ``usage`` in the active tracker (if any) as calls made now: usage measured in an earlier
    attempt (a judge verdict the run paid for before it was killed, or that a batch API gave, its
    ``batch_*`` counts billed at the batch price: :mod:`vtb_agents.judges.cache`)."""
    tracker = _active.get()
    if tracker is not None:
        tracker.add(usage, from_cache or TokenUsage())


def set_turn(turn: int | None) -> None:
    """Tell the active tracker (if any) which turn the next calls belong to; see the module docstring."""
    tracker = _active.get()
    if tracker is not None:
        tracker.set_turn(turn)
