"""The model-call cache: every chat-model response of a run stored by a hash of its request, so that a
later run answers identical requests without calling the model, or (cache only) replays offline.

Why LangChain's cache seam: a chat model looks a request up in ``langchain_core``'s LLM cache before
it calls the provider and stores the response after (``generate`` and ``agenerate``, streamed or
not, tools bound or not), and its callbacks fire on a hit as on a call, so token counting and
transcripts see cached answers too. The cache is the process-wide one (``set_llm_cache``) that every
chat model without a ``cache=`` of its own uses, so it reaches the models a user's agent builds
itself (``agent:`` specs), the LLM judge and the simulated user, not only ours.

Scope: :func:`task_model_calls` opens a task's scope (a context variable, inherited by the threads
LangChain and LangGraph start); a call inside one goes to that run's :class:`ModelCache`, a call
outside any scope to the cache that was installed before (none by default). Two runs in one process
(``vtb_agents.evaluate`` in threads) therefore keep their own caches.

The key (:func:`cache_key`) is :func:`~vtb_agents.models.wire.request_key` of the request as the
provider receives it: the model class and name, the parameters (the chat model's settings and the
call's, e.g. ``temperature``, ``tool_choice``, ``stop``), the messages in wire form (each image by the
sha256 of its bytes; message ids, response metadata and tool artifacts left out) and the tool schemas.
A call's parameter overrides the model's setting of the same name, as in the request, except a
``stop`` of None: LangChain passes one with every call that sets none, and the provider then sends
the model's own stop sequences, so the model's setting stands (:func:`model_and_params`).
Where the model is reached and how is not part of it: endpoint, credentials, headers, timeouts,
retries, streaming (:data:`TRANSPORT_SETTINGS`). A setting LangChain serialises as a secret (say,
``ChatAnthropic``'s ``mcp_servers``, which may hold tokens) reaches the key as "set" only, since its
value is not in what the cache is given: change it and use another cache file.
``tests/test_model_cache_key.py`` checks, for every ChatOpenAI and ChatAnthropic parameter, that a
change of the request the local server receives changes the key. Only responses are stored (no
images, no requests).

A miss in a cache-only run (``only``) raises :class:`ModelCacheMiss` naming the task, the turn and
the step (the LangGraph node path making the call), and is kept on the task's scope so that the
runner stops the run even when an agent catches the exception.

Who paid: each response is stored with the run that called the model for it (``run_id``, from
``run.json``), the task and the epoch. A response found again by that same run, task and epoch was
paid for by an attempt that left no result (a kill, a full disk): a resume counts it as the call it
was (tokens and cost, not ``cache_hits``), once per attempt, so that the resumed run's summary equals
an uninterrupted run's. Any other response found is a cache hit.
"""

from __future__ import annotations

import ast
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.caches import RETURN_VAL_TYPE, BaseCache
from langchain_core.globals import get_llm_cache, set_llm_cache
from langchain_core.load import dumps
from langchain_core.messages import BaseMessage, messages_from_dict
from langchain_core.outputs import ChatGeneration, Generation
from langchain_core.runnables import ensure_config
from pydantic import BaseModel

from vtb_agents.models.usage import CACHE_HIT_METADATA_KEY, TURN_METADATA_KEY
from vtb_agents.models.wire import request_key, wire_request
from vtb_agents.sharedsqlite import SharedSqlite

__all__ = ["CallSite", "ModelCache", "ModelCacheMiss", "PaidHere", "TRANSPORT_SETTINGS", "cache_key",
           "task_model_calls"]

TRANSPORT_SETTINGS = frozenset({
    "openai_api_base", "base_url", "openai_api_key", "api_key", "openai_organization", "organization",
    "openai_proxy", "request_timeout", "timeout", "max_retries", "default_headers", "default_query",
    "http_client", "http_async_client", "anthropic_api_url", "anthropic_api_key", "azure_endpoint",
    "azure_ad_token", "rate_limiter", "callbacks", "verbose", "tags", "metadata", "cache", "name",
    "streaming", "stream_usage", "disable_streaming", "default_request_timeout", "anthropic_proxy",
})
"""Chat-model settings that say where and how a request is sent or its answer delivered (streamed or
not), not what is asked: not in the key."""
_WIRE_FIELDS = frozenset({"type", "content", "name", "tool_calls", "tool_call_id"})
_SCHEMA = ["CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, model TEXT NOT NULL, "
           "response TEXT NOT NULL, stored_at TEXT NOT NULL)",
           "CREATE TABLE IF NOT EXISTS response_payers (key TEXT PRIMARY KEY, run_id TEXT NOT NULL, "
           "task_id TEXT NOT NULL, epoch INTEGER NOT NULL)"]
"""Responses, and apart from them (a cache recorded before payers were kept still replays) who paid."""


def _literal(text: str) -> dict[str, Any]:
    """LangChain's ``str(sorted(params.items()))`` back as a dict (as text if it is no Python literal)."""
    try:
        pairs = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return {"unparsed": text}
    return dict(pairs) if isinstance(pairs, list) else {"unparsed": text}


def model_and_params(llm_string: str) -> tuple[str, dict[str, Any], list[Any]]:
    """The model (``Class:name``), the parameters and the tools of LangChain's ``llm_string``: the
    serialised chat model and ``---`` and the call's parameters, or, for a model LangChain cannot
    serialise, its invocation parameters.

    The call's parameters override the model's settings, but for a ``stop`` of None, which LangChain
    adds to every call that gives none and which leaves the model's own stop sequences in the request
    (``ChatOpenAI`` keeps its ``stop``, ``ChatAnthropic`` its ``stop_sequences``). A secret setting
    other than the credentials stays in as its placeholder ("set")."""
    settings: dict[str, Any] = {}
    kind, rest = "", llm_string
    try:
        serialized, end = json.JSONDecoder().raw_decode(llm_string)
    except json.JSONDecodeError:
        serialized = None
    if isinstance(serialized, dict) and llm_string.startswith("---", end):
        kind = str((serialized.get("id") or [""])[-1])
        settings = {k: v for k, v in (serialized.get("kwargs") or {}).items() if k not in TRANSPORT_SETTINGS}
        rest = llm_string[end + 3:]
    call = _literal(rest)
    if call.get("stop", "") is None:
        del call["stop"]
    params = {**settings, **call}
    kind = str(params.pop("_type", kind))
    name = params.pop("model_name", None) or params.pop("model", None) or ""
    tools = params.pop("tools", None) or []
    return f"{kind}:{name}", params, list(tools)


def revive_message(serialized: dict[str, Any], keep: frozenset[str] | None = None) -> BaseMessage:
    """A message from LangChain's ``dumps`` form, rebuilt from its fields (those in ``keep``, default
    all); no class is imported by name, unlike ``langchain_core.load.loads``: a cache file is data."""
    fields = {k: v for k, v in serialized["kwargs"].items() if keep is None or k in keep}
    return messages_from_dict([{"type": fields["type"], "data": fields}])[0]


def prompt_messages(prompt: str) -> list[BaseMessage]:
    """The messages LangChain's cache prompt holds (``dumps`` of the request's messages), with the
    fields the wire form reads (metadata is left out: a replayed reply's differs from the original's)."""
    return [revive_message(item, _WIRE_FIELDS) for item in json.loads(prompt)]


def _plain(value: Any) -> Any:
    """``value`` with pydantic objects as their JSON data (a structured reply's ``parsed``, which
    LangChain's parser takes back as a dict)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def response_text(response: RETURN_VAL_TYPE) -> str:
    """A response as stored: LangChain's ``dumps`` of its generations, pydantic values as data."""
    stored = [ChatGeneration(message=g.message.model_copy(update={
                  "additional_kwargs": _plain(g.message.additional_kwargs),
                  "response_metadata": _plain(g.message.response_metadata)}), generation_info=g.generation_info)
              if isinstance(g, ChatGeneration) else g for g in response]
    return dumps(stored)


def revive_response(text: str) -> list[Generation]:
    """The generations :func:`response_text` stored."""
    generations: list[Generation] = []
    for item in json.loads(text):
        fields = item["kwargs"]
        if isinstance(fields.get("message"), dict):
            generations.append(ChatGeneration(message=revive_message(fields["message"]),
                                              generation_info=fields.get("generation_info")))
        else:
            generations.append(Generation(text=fields.get("text", ""), generation_info=fields.get("generation_info")))
    return generations


def cache_key(prompt: str, llm_string: str, epoch: int = 1) -> tuple[str, str]:
    """The request key (:func:`~vtb_agents.models.wire.request_key`) of a LangChain cache lookup, and its
    model. Epoch ``k`` > 1 of a task (a repeat meant as an independent sample) has keys of its own
    (``vtb_epoch`` among the parameters), so that each epoch records and replays its own answers."""
    model, params, tools = model_and_params(llm_string)
    if epoch > 1:
        params = {**params, "vtb_epoch": epoch}
    return request_key(model, params, wire_request(prompt_messages(prompt)), tools), model


@dataclass(frozen=True)
class CallSite:
    """Where a model call is made: the task, the turn (0-based, None outside the turns) and the step
    (the path of LangGraph nodes making the call, None outside a graph)."""

    task_id: str
    turn: int | None
    step: str | None

    @classmethod
    def here(cls, task_id: str) -> CallSite:
        """The call site of a call made now, from the run config LangChain and LangGraph pass down."""
        metadata = ensure_config().get("metadata") or {}
        turn = metadata.get(TURN_METADATA_KEY)
        namespace = metadata.get("langgraph_checkpoint_ns")
        step = ("/".join(part.split(":")[0] for part in namespace.split("|")) if isinstance(namespace, str)
                and namespace else metadata.get("langgraph_node"))
        return cls(task_id, turn if isinstance(turn, int) else None, step if isinstance(step, str) else None)

    def __str__(self) -> str:
        turn = "no turn" if self.turn is None else f"turn {self.turn + 1}"
        return f"task {self.task_id}, {turn}, step {self.step or '(outside a graph)'}"


class ModelCacheMiss(RuntimeError):
    """A request a cache-only run found no response for (never retried: the same request misses again)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


@dataclass(frozen=True)
class StoredResponse:
    """A stored response, revived, and who paid for it (run id, task id, epoch; None: not known)."""

    generations: list[Generation]
    payer: tuple[str, str, int] | None


class ModelCache:
    """Model responses by request key in one SQLite file (:class:`~vtb_agents.sharedsqlite.SharedSqlite`:
    shared by the threads and the Ray workers of a run); ``only``: never call the model, a miss is an
    error; ``run_id``: the run paying for the calls made through it (see the module docstring)."""

    def __init__(self, path: Path, *, only: bool = False, run_id: str | None = None) -> None:
        self.path, self.only, self.run_id = Path(path), only, run_id
        self._db = SharedSqlite(self.path, _SCHEMA)

    def get(self, key: str) -> StoredResponse | None:
        """The stored response to the request ``key`` and who paid for it (None if there is none)."""
        row = self._db.one("SELECT response, run_id, task_id, epoch FROM responses LEFT JOIN response_payers "
                           "USING (key) WHERE key = ?", (key,))
        if row is None:
            return None
        return StoredResponse(revive_response(row[0]), (row[1], row[2], row[3]) if row[1] is not None else None)

    def put(self, key: str, model: str, response: RETURN_VAL_TYPE, payer: tuple[str, str, int] | None = None) -> None:
        """Store ``response`` to the request ``key`` and who paid for it (the first stored for a key stays)."""
        statements: list[tuple[str, tuple[Any, ...]]] = [
            ("INSERT OR IGNORE INTO responses VALUES (?, ?, ?, ?)",
             (key, model, response_text(response), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))]
        if payer is not None:
            statements.append(("INSERT OR IGNORE INTO response_payers VALUES (?, ?, ?, ?)", (key, *payer)))
        self._db.write_all(statements)

    def close(self) -> None:
        """Close the file."""
        self._db.close()


@dataclass
class PaidHere:
    """The keys one attempt paid for or counted as its own (thread-safe): a second look-up of one in
    the same attempt (a request made twice) is a cache hit, as in a run never interrupted. Shared
    by the model-call cache and the verdict cache (:mod:`vtb_agents.judges.cache`)."""

    keys: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def claim(self, key: str) -> bool:
        """Mark ``key`` as paid here; False if it already was."""
        with self.lock:
            if key in self.keys:
                return False
            self.keys.add(key)
            return True


@dataclass
class TaskCalls:
    """The model calls of one task (one attempt of it) against a run's cache: answers lookups, stores
    responses and keeps the first miss of a cache-only run (``miss``)."""

    cache: ModelCache
    task_id: str
    epoch: int = 1
    hits: int = 0
    miss: ModelCacheMiss | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _paid_here: PaidHere = field(default_factory=PaidHere, repr=False)

    @property
    def payer(self) -> tuple[str, str, int] | None:
        """Who pays for this task's calls: the run, the task, the epoch (None: a cache outside a run)."""
        return (self.cache.run_id, self.task_id, self.epoch) if self.cache.run_id is not None else None

    def lookup(self, prompt: str, llm_string: str) -> list[Generation] | None:
        """The stored response, or None to call the model; in a cache-only run a miss raises
        :class:`ModelCacheMiss`. A hit has each message marked with its key (``CACHE_HIT_METADATA_KEY``),
        except a response this run paid for in an attempt of this task that left no result: that one
        is the call it was (see the module docstring)."""
        key, _ = cache_key(prompt, llm_string, self.epoch)
        found = self.cache.get(key)
        if found is not None:
            if found.payer is not None and found.payer == self.payer and self._paid_here.claim(key):
                return found.generations
            for generation in found.generations:
                if isinstance(generation, ChatGeneration):
                    generation.message.response_metadata[CACHE_HIT_METADATA_KEY] = key
            with self._lock:
                self.hits += 1
            return found.generations
        if not self.cache.only:
            return None
        miss = ModelCacheMiss(f"model cache miss: {CallSite.here(self.task_id)}: {self.cache.path} holds no response "
                              f"to this request (key {key[:16]}), and a cache-only run calls no model")
        with self._lock:
            self.miss = self.miss or miss
        raise miss

    def raise_miss(self) -> None:
        """Raise the first miss of this task, if any (an agent may have caught it)."""
        if self.miss is not None:
            raise self.miss

    def update(self, prompt: str, llm_string: str, response: RETURN_VAL_TYPE) -> None:
        """Store the response the model gave."""
        key, model = cache_key(prompt, llm_string, self.epoch)
        self._paid_here.claim(key)
        self.cache.put(key, model, response, self.payer)


_task_calls: ContextVar[TaskCalls | None] = ContextVar("vtb_model_cache_calls", default=None)


class _ScopedCache(BaseCache):
    """LangChain's process-wide cache while any model cache is in use: a call inside a task's scope
    goes to that task's :class:`TaskCalls`, any other call to the cache installed before (if any)."""

    def __init__(self, outer: BaseCache | None) -> None:
        self.outer = outer

    def lookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        calls = _task_calls.get()
        if calls is not None:
            return calls.lookup(prompt, llm_string)
        return self.outer.lookup(prompt, llm_string) if self.outer is not None else None

    def update(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        calls = _task_calls.get()
        if calls is not None:
            calls.update(prompt, llm_string, return_val)
        elif self.outer is not None:
            self.outer.update(prompt, llm_string, return_val)

    async def alookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        calls = _task_calls.get()
        if calls is not None:
            return calls.lookup(prompt, llm_string)  # one indexed SQLite read: no executor hop
        return await self.outer.alookup(prompt, llm_string) if self.outer is not None else None

    async def aupdate(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        calls = _task_calls.get()
        if calls is not None:
            calls.update(prompt, llm_string, return_val)
        elif self.outer is not None:
            await self.outer.aupdate(prompt, llm_string, return_val)

    def clear(self, **kwargs: Any) -> None:
        """Clears the cache installed before (a run's model cache is a file: delete it to clear it)."""
        if self.outer is not None:
            self.outer.clear(**kwargs)


_install_lock = threading.Lock()


def _install() -> None:
    """Make :class:`_ScopedCache` LangChain's process-wide cache (once), around the one set before."""
    with _install_lock:
        current = get_llm_cache()
        if not isinstance(current, _ScopedCache):
            set_llm_cache(_ScopedCache(current))


@contextmanager
def task_model_calls(cache: ModelCache | None, task_id: str, epoch: int = 1) -> Iterator[TaskCalls | None]:
    """Within the block, chat-model calls (in this thread and those started from it) go through
    ``cache`` as those of ``task_id`` (in its ``epoch``, 1-based); yields the task's :class:`TaskCalls`
    (None without a cache)."""
    if cache is None:
        yield None
        return
    _install()
    calls = TaskCalls(cache, task_id, epoch)
    token = _task_calls.set(calls)
    try:
        yield calls
    finally:
        _task_calls.reset(token)

