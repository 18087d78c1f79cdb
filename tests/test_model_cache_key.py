"""The model-cache key covers every parameter that reaches the request (issue #31 item 4).

For every setting of ``ChatOpenAI`` and ``ChatAnthropic`` (and the parameters a call adds), a real
client sends a request to a local server (tests/support/openai_server.py; an Anthropic Messages route on
tests/support/servers.py) while a LangChain cache records the key :func:`vtb_agents.models.cache.cache_key`
gives the same call. Whenever the request the server received (its JSON body; for Anthropic also the
``anthropic-beta`` header that ``betas`` sets) differs from the baseline's, the key must differ too;
the only exception is documented (:data:`DELIVERY`: how the answer is delivered, streamed or not).
Headers, endpoint, organization and credentials are where and how a request is sent, not what is
asked (``TRANSPORT_SETTINGS``). A key that changes while the request does not only costs a cache miss.
A request the local server cannot answer (the Responses API, an SDK that refuses a parameter) is
taken from the client's own payload builder (``_get_request_payload``), the body it hands its SDK.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.caches import BaseCache
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from support.openai_server import OpenAIServer
from pydantic import BaseModel
from support.scripted_vision import VisionModel
from support.servers import LocalServer, Reply
from support.cli import openai_env, vtb

from vtb_agents.models.cache import TRANSPORT_SETTINGS, cache_key

DELIVERY = {"stream", "stream_options"}
"""Request fields that say how the answer is delivered (streamed or not), not what is asked: the
cache answers a streamed call with a stored answer and the other way round."""


class KeyRecorder(BaseCache):
    """A chat model's own cache (``cache=``): records the key of each lookup, answers nothing."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    def lookup(self, prompt: str, llm_string: str) -> Any:
        self.keys.append(cache_key(prompt, llm_string)[0])
        return None

    def update(self, prompt: str, llm_string: str, return_val: Any) -> None:
        return None

    def clear(self, **kwargs: Any) -> None:
        return None


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class Verdict(BaseModel):
    """A structured answer."""

    verdict: str


OPENAI_SETTINGS: dict[str, Any] = {
    "model_name": "other-model", "temperature": 0.3, "model_kwargs": {"user": "u1"}, "presence_penalty": 0.5,
    "frequency_penalty": 0.5, "seed": 7, "logprobs": True, "top_logprobs": 2, "logit_bias": {50256: -100}, "n": 2,
    "top_p": 0.5, "max_tokens": 33, "reasoning_effort": "low", "reasoning": {"effort": "low"}, "verbosity": "low",
    "stop": ["END"], "extra_body": {"x": 1}, "disabled_params": {"parallel_tool_calls": None},
    "context_management": [{"type": "compaction"}], "include": ["reasoning.encrypted_content"],
    "prompt_cache_options": {"key": "k"}, "service_tier": "flex", "store": True, "truncation": "auto",
    "use_previous_response_id": True, "use_responses_api": True, "output_version": "responses/v1",
    "streaming": True, "stream_usage": True, "disable_streaming": True, "include_response_headers": True,
    "tiktoken_model_name": "gpt-4o", "default_headers": {"X-A": "1"}, "default_query": {"q": "1"},
    "openai_organization": "org-2", "request_timeout": 5.0, "max_retries": 1, "name": "nm",
    "openai_api_base": None, "openai_api_key": None, "openai_proxy": None,
}
"""A changed value for every ChatOpenAI setting a user can give (None: the test sets it itself)."""
ANTHROPIC_SETTINGS: dict[str, Any] = {
    "model": "claude-other", "temperature": 0.3, "max_tokens": 33, "top_k": 5, "top_p": 0.5,
    "stop_sequences": ["END"], "betas": ["b1"], "model_kwargs": {"service_tier": "auto"},
    "thinking": {"type": "enabled", "budget_tokens": 2000}, "output_config": {"effort": "low"},
    "reasoning_effort": "low", "mcp_servers": [{"type": "url", "url": "http://127.0.0.1:9/", "name": "m"}],
    "context_management": {"edits": []}, "container": "c1", "reuse_last_container": True, "inference_geo": "us",
    "user_profile_id": "p", "streaming": True, "stream_usage": False, "disable_streaming": True,
    "output_version": "v1", "default_headers": {"X-A": "1"}, "default_request_timeout": 5.0, "max_retries": 1,
    "name": "nm", "anthropic_api_url": None, "anthropic_api_key": None, "anthropic_proxy": None,
}
"""A changed value for every ChatAnthropic setting a user can give (None: the test sets it itself)."""
CALLS: dict[str, tuple[dict[str, Any], str]] = {
    "stop": ({"stop": ["END"]}, "invoke"), "temperature": ({"temperature": 0.9}, "bind"),
    "tool_choice": ({"tool_choice": "none"}, "bind"), "parallel_tool_calls": ({"parallel_tool_calls": False}, "bind"),
    "tools": ({}, "bind_tools"), "structured output": ({}, "structured"),
}
"""Parameters a call adds, and how: ``invoke(..., **kw)``, ``bind(**kw)``, ``bind_tools``,
``with_structured_output``."""
ANTHROPIC_REPLY = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
                   "content": [{"type": "text", "text": "{\"verdict\": \"ok\"}"}], "stop_reason": "end_turn",
                   "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 1}}


def user_settings(model_class: type) -> set[str]:
    """The settings of ``model_class`` a user can give (pydantic fields not excluded from its data)."""
    return {name for name, field in model_class.model_fields.items() if not field.exclude}


def call_with(model: Any, how: str, call: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The runnable a call of kind ``how`` makes from ``model``, and its ``invoke`` keywords."""
    if how == "bind":
        return model.bind(**call), {}
    if how == "bind_tools":
        return model.bind_tools([add]), {}
    if how == "structured":
        return model.with_structured_output(Verdict, method="json_schema"), {}
    return model, call


def payload_of(model: Any, how: str, call: dict[str, Any]) -> dict[str, Any]:
    """The body the client hands its SDK for the call (for a request the local server cannot take)."""
    messages = [HumanMessage("What is it?")]
    if how == "bind":
        return model._get_request_payload(messages, **call)
    if how == "bind_tools":
        return model._get_request_payload(messages, **model.bind_tools([add]).kwargs)
    if how == "structured":
        return model._get_request_payload(messages, **model.with_structured_output(
            Verdict, method="json_schema").first.kwargs)
    return model._get_request_payload(messages, **call)


def differs(one: dict[str, Any], other: dict[str, Any]) -> set[str]:
    """The top-level fields in which two requests differ."""
    return {name for name in set(one) | set(other) if one.get(name) != other.get(name)}


def check_every_change(probe: Any, settings: dict[str, Any]) -> dict[str, set[str]]:
    """Probe the baseline, each setting and each call parameter; fail on a request change the key
    does not follow; return the request fields each probe changed (for the assertions below)."""
    base_request, base_key = probe({}, "invoke", {})
    changed: dict[str, set[str]] = {}
    problems = []
    for label, (setting, how, call) in [*((name, ({name: value}, "invoke", {})) for name, value in settings.items()
                                          if value is not None),
                                        *((f"call {name}", ({}, how, call)) for name, (call, how) in CALLS.items())]:
        request, key = probe(setting, how, call)
        fields = differs(request, base_request) - DELIVERY
        changed[label] = fields
        if fields and key == base_key:
            problems.append(f"{label}: the request changed in {sorted(fields)} but the key did not")
    assert not problems, problems
    return changed


def test_every_chatopenai_parameter_that_changes_the_request_changes_the_key():
    untested = user_settings(ChatOpenAI) - set(OPENAI_SETTINGS)
    assert not untested, f"give these ChatOpenAI settings a value in OPENAI_SETTINGS: {sorted(untested)}"
    with OpenAIServer(lambda body: '{"verdict": "ok"}') as server:

        def probe(setting: dict[str, Any], how: str, call: dict[str, Any]) -> tuple[dict[str, Any], str]:
            recorder = KeyRecorder()
            named = setting if "model_name" in setting else {"model": "m", **setting}
            model = ChatOpenAI(**named, base_url=server.base_url, api_key="k", cache=recorder)
            runnable, keywords = call_with(model, how, call)
            before = len(server.requests)
            try:
                runnable.invoke([HumanMessage("What is it?")], **keywords)
                sent = server.requests[before] if len(server.requests) > before else None
            except Exception:  # the local server speaks chat completions only (not the Responses API)
                sent = None
            return dict(sent or payload_of(model, how, call)), recorder.keys[0]

        changed = check_every_change(probe, OPENAI_SETTINGS)
    assert changed["stop"] == {"stop"} and changed["call stop"] == {"stop"}  # issue #31: stop was dropped
    assert changed["temperature"] == {"temperature"} and changed["model_name"] == {"model"}
    assert changed["streaming"] == set()  # delivery only: the same key (DELIVERY)


def test_every_chatanthropic_parameter_that_changes_the_request_changes_the_key():
    """langchain-anthropic is a dev dependency (pyproject ``dev`` extra, constraints.txt): real client,
    local Messages API route."""
    from langchain_anthropic import ChatAnthropic

    untested = user_settings(ChatAnthropic) - set(ANTHROPIC_SETTINGS)
    assert not untested, f"give these ChatAnthropic settings a value in ANTHROPIC_SETTINGS: {sorted(untested)}"
    with LocalServer() as server:
        server.route("/v1/messages", lambda request: Reply(body=ANTHROPIC_REPLY), method="POST")

        def probe(setting: dict[str, Any], how: str, call: dict[str, Any]) -> tuple[dict[str, Any], str]:
            recorder = KeyRecorder()
            model = ChatAnthropic(**{"model": "claude-x", **setting}, base_url=server.url(""), api_key="k",
                                  cache=recorder)
            runnable, keywords = call_with(model, how, call)
            before = len(server.requests_to("/v1/messages"))
            try:
                runnable.invoke([HumanMessage("What is it?")], **keywords)
            except Exception:  # streaming needs server-sent events; the SDK refuses some parameters
                pass
            sent = server.requests_to("/v1/messages")[before:]
            request = dict(sent[0].json()) if sent else payload_of(model, how, call)
            beta = sent[0].headers.get("anthropic-beta") if sent else ",".join(model.betas or []) or None
            request["header anthropic-beta"] = beta
            return request, recorder.keys[0]

        changed = check_every_change(probe, ANTHROPIC_SETTINGS)
    assert changed["stop_sequences"] == {"stop_sequences"} and changed["call stop"] == {"stop_sequences"}
    # a secret setting: in the key as "set" (two different server lists share a key: docs/how-to/replay-offline.md)
    assert "mcp_servers" in changed["mcp_servers"]
    assert changed["betas"] == {"header anthropic-beta"}


@pytest.mark.slow
def test_the_models_own_stop_sequence_stays_in_the_key_when_the_call_gives_none():
    """The bug of issue #31: LangChain's ``stop=None`` of the call overwrote the model's ``stop``."""
    def key(**settings: Any) -> str:
        recorder = KeyRecorder()
        with OpenAIServer(lambda body: "ok") as server:
            ChatOpenAI(model="m", base_url=server.base_url, api_key="k", cache=recorder, **settings).invoke("hi")
        return recorder.keys[0]

    assert key(stop=["END"]) != key() and key(stop=["END"]) != key(stop=["STOP"])
    assert "stop" not in TRANSPORT_SETTINGS




@pytest.mark.parametrize("changed", [None, '{"stop": ["END"]}', '{"temperature": 0.5}'],
                         ids=["unchanged", "stop", "temperature"])
@pytest.mark.slow
def test_a_cache_only_replay_with_a_stop_sequence_added_misses_as_another_temperature_does(tmp_path, changed):
    cache = tmp_path / "model_cache.sqlite"
    common = ["--tasks", "sample", "--task-id", "rs-finance-invoice", "--model", "openai:vision-test",
              "--judge", "rule", "--model-cache", str(cache)]
    with OpenAIServer(VisionModel()) as server:
        recorded = vtb("run", *common, "--out", str(tmp_path / "recorded"), env=openai_env(server.base_url),
                       columns=250)
    assert recorded.returncode == 0, recorded.stderr
    with OpenAIServer(lambda body: 500) as sentinel:  # a replay must never reach a model
        replay = vtb("run", *common, "--model-cache-only", *(["--model-kwargs", changed] if changed else []),
                     "--out", str(tmp_path / "replayed"), env=openai_env(sentinel.base_url), columns=250)
    assert sentinel.requests == []
    if changed is None:
        assert replay.returncode == 0, replay.stderr
    else:
        assert replay.returncode == 2, (replay.stdout, replay.stderr)
        assert "model cache miss: task rs-finance-invoice, turn 1" in " ".join(replay.stderr.split())
