"""Blame (docs/concepts/outcomes.md, DESIGN.md "Two kinds of failure"): a provider that never answers is
an infrastructure failure whatever the order of the two timeouts; a model that got answers and then
ran out of time is the model's; a context-window rejection is a graded model outcome.

Each run is the real `vtb` command against a local server speaking the provider's wire format
(tests/support/openai_server.py, tests/support/servers.py) with the faults injected by the server.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import anthropic
import httpx
import openai
import pytest
from langchain_core.exceptions import ContextOverflowError

from conftest import write_task
from support.openai_server import OpenAIServer
from support.servers import LocalServer, Reply, Request
from support.cli import openai_env, vtb
from test_outcomes import ANSWER, RUBRICS, first_prompt, results_of, summary_of, tasks_with_keywords
from vtb_agents.models.blame import context_overflow, provider_outcome
from vtb_agents.runner.run import EXIT_INCOMPLETE

pytestmark = pytest.mark.timeout(240)

OPENAI_CONTEXT_ERROR = {"error": {
    "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in "
               "1285341 tokens. Please reduce the length of the messages.",
    "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}
VLLM_CONTEXT_ERROR = {
    "object": "error", "message": "This model's maximum context length is 32768 tokens. However, you requested "
                                  "40310 tokens (39286 in the messages, 1024 in the completion). Please reduce the "
                                  "length of the messages or completion.",
    "type": "BadRequestError", "param": None, "code": 400}
ANTHROPIC_CONTEXT_ERROR = {"type": "error", "error": {
    "type": "invalid_request_error", "message": "prompt is too long: 208310 tokens > 200000 maximum"},
    "request_id": "req_011CVQe1dLrGNMJyE1ghG1av"}


@pytest.mark.parametrize(("timeouts", "late"), [
    # the task limit cuts the first attempt of LATE's hanging request short: the model had its
    # answers and used the rest of its time, so it is the model's timeout
    (["--task-timeout", "6", "--request-timeout", "60"], "task_timeout"),
    # requests time out after 1 s and are retried (1 s, 2 s, 4 s backoff): the 6 s task limit passes
    # before the retries are used up; LATE's request had its full request time and no answer
    (["--task-timeout", "6", "--request-timeout", "1"], "provider_error"),
], ids=["task-limit-shorter", "request-limit-shorter"])
@pytest.mark.slow
def test_a_provider_that_never_answers_is_the_providers_failure_whatever_the_order_of_timeouts(
        tmp_path, timeouts, late):
    """HANG never gets an answer; LATE gets one (a tool call), then its next request hangs.

    The first run is incomplete (HANG is the provider's); once the provider is healthy,
    ``--resume --retry-errors`` re-runs the provider's failures only, and the run completes.
    """
    root = tasks_with_keywords(tmp_path / "tasks", ["HANG", "LATE"])
    release, lock = threading.Event(), threading.Lock()
    state = {"healthy": False}
    seen: dict[str, int] = {}

    def respond(body: dict[str, Any]) -> Any:
        keyword = first_prompt(body).split(":")[0]
        with lock:
            seen[keyword] = seen.get(keyword, 0) + 1
        if state["healthy"]:
            return ANSWER
        if keyword == "LATE" and body["messages"][-1]["role"] != "tool":
            return {"content": None, "tool_calls": [{"name": "calculator", "arguments": {"expression": "6*7"}}]}
        release.wait(120)  # accepts the request and never answers (until the test ends)
        return ANSWER

    run = tmp_path / "run"
    args = ["run", "--tasks", str(root), "--model", "openai:scripted", "--judge", "rule", "--concurrency", "2",
            "--out", str(run), *timeouts]
    try:
        with OpenAIServer(respond) as server:
            failed = vtb(*args, env=openai_env(server.base_url))
            assert failed.returncode == EXIT_INCOMPLETE, failed.stderr[-3000:]
            assert "--retry-errors" in failed.stderr
            results = results_of(run)
            assert {t: r["outcome"] for t, r in results.items()} == {"t-hang": "provider_error", "t-late": late}
            assert "had not answered any request of the task" in results["t-hang"]["episode"]["error"]
            assert "had answered earlier requests" in results["t-late"]["episode"]["error"]
            assert results["t-hang"]["grade"]["graded"] is False
            assert results["t-late"]["grade"]["graded"] is (late == "task_timeout")
            summary = summary_of(run)
            providers = ["t-hang", "t-late"] if late == "provider_error" else ["t-hang"]
            assert summary["complete"] is False
            assert summary["infrastructure_errors"] == {"count": len(providers), "task_ids": providers}

            state["healthy"] = True
            release.set()
            late_requests = seen["LATE"]
            retried = vtb(*args, "--resume", "--retry-errors", env=openai_env(server.base_url))
    finally:
        release.set()
    assert retried.returncode == 0, retried.stderr[-3000:]
    assert (seen["LATE"] > late_requests) is (late == "provider_error")  # the model's own timeout is kept
    summary = summary_of(run)
    assert summary["complete"] is True and summary["ungraded"] == 0
    assert summary["outcomes"] == ({"answered": 2} if late == "provider_error" else
                                   {"answered": 1, "task_timeout": 1})


@pytest.mark.slow
def test_context_window_rejections_are_graded_model_outcomes(tmp_path):
    root = tasks_with_keywords(tmp_path / "tasks", ["FINE", "VLLM"])
    write_task(root, "t-openai", category="Progressive Visual Reasoning", turns=[
        {"prompt": "OPENAI: what number is printed?", "images": [0], "golden_answer": ANSWER, "rubrics": RUBRICS},
        {"prompt": "Now with every image again.", "images": [0], "golden_answer": ANSWER, "rubrics": RUBRICS}])
    seen: dict[str, int] = {}

    def respond(body: dict[str, Any]) -> Any:
        keyword = first_prompt(body).split(":")[0]
        seen[keyword] = seen.get(keyword, 0) + 1
        second_turn = sum(m["role"] == "user" for m in body["messages"]) > 1
        if keyword == "OPENAI" and second_turn:
            return ("raw", json.dumps(OPENAI_CONTEXT_ERROR), 400)
        if keyword == "VLLM":
            return ("raw", json.dumps(VLLM_CONTEXT_ERROR), 400)
        return ANSWER

    run = tmp_path / "run"
    args = ["run", "--tasks", str(root), "--model", "openai:scripted", "--judge", "rule", "--out", str(run)]
    with OpenAIServer(respond) as server:
        done = vtb(*args, env=openai_env(server.base_url))
        assert done.returncode == 0, done.stderr[-3000:]
        before = dict(seen)
        retried = vtb(*args, "--resume", "--retry-errors", env=openai_env(server.base_url))
        assert retried.returncode == 0, retried.stderr[-3000:]
    assert seen == before  # nothing to retry: the context limit is the model's
    assert (seen["OPENAI"], seen["VLLM"]) == (2, 1)  # a client error is not retried either
    results = results_of(run)
    assert {t: r["outcome"] for t, r in results.items()} == {
        "t-fine": "answered", "t-openai": "context_exceeded", "t-vllm": "context_exceeded"}
    openai_task = results["t-openai"]
    assert "maximum context length is 128000 tokens" in openai_task["episode"]["error"]
    assert [t["answer"] for t in openai_task["episode"]["turns"]] == [ANSWER]  # graded on what it produced
    assert openai_task["grade"]["graded"] is True and openai_task["grade"]["score"] == pytest.approx(6 / 12)
    assert results["t-vllm"]["grade"]["graded"] is True and results["t-vllm"]["grade"]["score"] == 0
    summary = summary_of(run)
    assert summary["complete"] is True and (summary["graded"], summary["ungraded"]) == (3, 0)
    assert summary["outcomes"] == {"answered": 1, "context_exceeded": 2}
    assert summary["episodes"]["context_exceeded"] == 2
    assert summary["apr"] == pytest.approx(1 / 3)
    report = (run / "report.html").read_text()
    assert "context window (graded)</td><td>2</td>" in report
    assert "context_exceeded 2" in report


@pytest.mark.slow
def test_anthropic_prompt_too_long_is_a_graded_model_outcome(tmp_path):
    root = tasks_with_keywords(tmp_path / "tasks", ["LONG"])

    def messages(request: Request) -> Reply:
        assert request.json()["model"] == "claude-test", request.json().get("model")
        return Reply(400, ANTHROPIC_CONTEXT_ERROR)

    with LocalServer() as server:
        server.route("/v1/messages", messages, method="POST")
        done = vtb("run", "--tasks", root, "--model", "anthropic:claude-test", "--judge", "rule", "--out",
                   tmp_path / "run", env={"ANTHROPIC_BASE_URL": server.url(""), "ANTHROPIC_API_KEY": "test-key"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert server.errors == [] and len(server.requests_to("/v1/messages")) == 1
    (result,) = results_of(tmp_path / "run").values()
    assert result["outcome"] == "context_exceeded" and "prompt is too long" in result["episode"]["error"]
    assert result["grade"]["graded"] is True and result["grade"]["passed"] is False
    assert summary_of(tmp_path / "run")["complete"] is True


def test_openais_error_code_alone_marks_a_context_rejection():
    body = {"error": {"message": "Your input exceeds the context window of this model. Please adjust your input "
                                 "and try again.", "type": "invalid_request_error", "param": "input",
                      "code": "context_length_exceeded"}}
    request = httpx.Request("POST", "https://api.openai.com/v1/chat/completions")
    rejected = openai.BadRequestError("Error code: 400", response=httpx.Response(400, json=body, request=request),
                                      body=body["error"])
    assert context_overflow(rejected) and provider_outcome(rejected) == "context_exceeded"
    other = {**body["error"], "code": "invalid_value", "message": "Invalid value for 'temperature'."}
    refused = openai.BadRequestError("Error code: 400", response=httpx.Response(400, json={"error": other},
                                                                                 request=request), body=other)
    assert provider_outcome(refused) == "provider_error"



def test_anthropics_rejection_is_recognised_without_langchains_wrapper():
    request = httpx.Request("POST", "https://api.anthropic.com/v1/messages")
    response = httpx.Response(400, json=ANTHROPIC_CONTEXT_ERROR, request=request)
    rejected = anthropic.BadRequestError(f"Error code: 400 - {ANTHROPIC_CONTEXT_ERROR}", response=response,
                                         body=ANTHROPIC_CONTEXT_ERROR)
    assert provider_outcome(rejected) == "context_exceeded"


def test_context_limits_of_other_providers_are_recognised_by_their_documented_wording():
    gemini_error = type("ChatGoogleGenerativeAIError", (Exception,),
                        {"__module__": "langchain_google_genai.chat_models"})
    rejected = gemini_error("Invalid argument provided to Gemini: 400 The input token count (1290000) exceeds "
                            "the maximum number of tokens allowed (1048576).")
    assert context_overflow(rejected) and provider_outcome(rejected) == "context_exceeded"
    assert provider_outcome(ContextOverflowError("too long")) == "context_exceeded"
    # the same wording outside a provider SDK (say, in a tool's output) is no provider's rejection
    assert not context_overflow(ValueError("maximum context length is 10 tokens"))
