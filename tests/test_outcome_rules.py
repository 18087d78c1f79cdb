"""Outcome blame as the docs state it: the vocabulary's kinds, what each failure is classified
as, and which outcome a graded task ends with. Expected values are the docs' (docs/concepts/outcomes.md),
written out here, never read from the code's own tables."""

from __future__ import annotations

import errno
import re
import sqlite3
from typing import get_args

import httpx
import anthropic
import openai
import pytest
from langgraph.errors import GraphRecursionError

from support.cli import PROJECT
from vtb_agents.models.deadline import ProviderWait, TaskTimeout
from vtb_agents.models.http import MalformedResponse
from vtb_agents.results import (
    INFRASTRUCTURE_OUTCOMES,
    MODEL_OUTCOMES,
    Episode,
    Outcome,
    RubricVerdict,
    TaskGrade,
    TurnRecord,
    is_infrastructure,
    task_outcome,
)
from vtb_agents.models.usage import TokenLimitReached
from vtb_agents.runner.outcomes import classify_failure, failed_episode
from vtb_agents.sandbox import SandboxError

KINDS = {"answered": "model", "tool_round_cap": "model", "task_timeout": "model", "step_limit": "model",
         "token_limit": "model",
         "provider_error": "infrastructure", "sandbox_error": "infrastructure", "storage_error": "infrastructure",
         "harness_error": "infrastructure", "judge_error": "infrastructure", "unjudged": "neither"}
"""The docs' table of outcomes, as of this test (rows added later are checked by the table test)."""


def readme_outcomes() -> dict[str, str]:
    """outcome -> kind, from the table of docs/concepts/outcomes.md."""
    section = (PROJECT / "docs" / "concepts" / "outcomes.md").read_text().split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `(\w+)` \| (\w+) \|", section, flags=re.M))


@pytest.mark.parametrize("outcome, kind", sorted(KINDS.items()))
def test_each_outcome_has_the_kind_the_readme_gives(outcome, kind):
    assert outcome in get_args(Outcome)
    assert is_infrastructure(outcome) is (kind == "infrastructure")
    assert (outcome in MODEL_OUTCOMES) is (kind == "model")
    assert (outcome in INFRASTRUCTURE_OUTCOMES) is (kind == "infrastructure")


def test_the_readme_table_and_the_vocabulary_agree():
    table = readme_outcomes()
    assert KINDS.items() <= table.items()  # the table still says what this test assumes
    assert set(table) == set(get_args(Outcome))
    for outcome, kind in table.items():
        assert is_infrastructure(outcome) is (kind == "infrastructure"), outcome
        assert (outcome in MODEL_OUTCOMES) is (kind == "model"), outcome
    assert not is_infrastructure(None) and not is_infrastructure("no such outcome")


def caused(outer: BaseException, cause: BaseException) -> BaseException:
    """``outer`` raised from ``cause`` (as a wrapper around a failed call would be)."""
    outer.__cause__ = cause
    return outer


def in_context(outer: BaseException, context: BaseException) -> BaseException:
    """``outer`` raised while handling ``context``."""
    outer.__context__ = context
    return outer


REQUEST = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")


@pytest.mark.parametrize("exc, outcome", [
    pytest.param(TaskTimeout("task ran past 30 s"), "task_timeout", id="task timeout"),
    pytest.param(caused(SandboxError("worker died"), TaskTimeout("limit")), "task_timeout",
                 id="the sandbox stopped at the task limit"),
    pytest.param(in_context(RuntimeError("x"), in_context(KeyError("y"), TaskTimeout("limit"))), "task_timeout",
                 id="timeout deep in the context chain"),
    pytest.param(GraphRecursionError("Recursion limit of 22 reached"), "step_limit", id="recursion limit"),
    pytest.param(caused(RuntimeError("agent failed"), GraphRecursionError("limit")), "step_limit",
                 id="recursion limit as the cause"),
    pytest.param(TokenLimitReached("used 31 tokens"), "token_limit", id="task token limit"),
    pytest.param(caused(RuntimeError("agent failed"), TokenLimitReached("used 31 tokens")), "token_limit",
                 id="task token limit as the cause"),
    pytest.param(httpx.ConnectError("refused", request=REQUEST), "provider_error", id="httpx connection"),
    pytest.param(httpx.ReadTimeout("slow", request=REQUEST), "provider_error", id="httpx timeout"),
    pytest.param(MalformedResponse("no choices"), "provider_error", id="malformed 200"),
    pytest.param(ConnectionResetError(errno.ECONNRESET, "reset"), "provider_error",
                 id="connection error with an errno is the provider's, not the disk's"),
    pytest.param(openai.APIConnectionError(request=REQUEST), "provider_error", id="openai SDK error"),
    pytest.param(openai.InternalServerError("boom", response=httpx.Response(500, request=REQUEST), body=None),
                 "provider_error", id="openai 500"),
    pytest.param(caused(ValueError("bad reply"), httpx.RemoteProtocolError("eof", request=REQUEST)),
                 "provider_error", id="provider error as the cause"),
    pytest.param(SandboxError("the sandbox worker did not start"), "sandbox_error", id="sandbox"),
    pytest.param(caused(RuntimeError("tool"), SandboxError("restart failed")), "sandbox_error",
                 id="sandbox error as the cause"),
    pytest.param(sqlite3.OperationalError("database is locked"), "storage_error", id="sqlite"),
    pytest.param(OSError(errno.EACCES, "Permission denied", "/run/artifacts"), "storage_error", id="errno"),
    pytest.param(caused(ValueError("save failed"), OSError(errno.ENOSPC, "No space left")), "storage_error",
                 id="disk error as the cause"),
    pytest.param(OSError("no errno"), "harness_error", id="OSError without an errno"),
    pytest.param(KeyError("answer_key"), "harness_error", id="a bug"),
    pytest.param(in_context(KeyError("x"), ValueError("y")), "harness_error", id="a chain of bugs"),
])
def test_classify_failure(exc, outcome):
    assert classify_failure(exc) == outcome


@pytest.mark.parametrize("waiting, answered, failed_attempt, outcome", [
    (False, False, False, "task_timeout"),  # no request pending: the time went elsewhere
    (False, True, True, "task_timeout"),
    (True, False, False, "provider_error"),  # waiting on a provider that had never answered
    (True, False, True, "provider_error"),
    (True, True, True, "provider_error"),  # answered before, but the pending request had already failed
    (True, True, False, "task_timeout"),  # a provider that answers, still working on the next request
])
def test_a_timeout_is_the_providers_when_it_gave_no_answer_within_the_time(waiting, answered, failed_attempt,
                                                                           outcome):
    wait = ProviderWait(waiting=waiting, answered=answered, failed_attempt=failed_attempt)
    assert classify_failure(caused(RuntimeError("stopped"), TaskTimeout("task ran past 30 s", wait))) == outcome


def test_the_first_failure_in_the_chain_decides_between_infrastructure_kinds():
    # a sandbox error while handling a provider error, and the other way round
    assert classify_failure(in_context(SandboxError("a"), httpx.ConnectError("b", request=REQUEST))) == "sandbox_error"
    assert classify_failure(in_context(httpx.ConnectError("b", request=REQUEST), SandboxError("a"))) == "provider_error"
    assert classify_failure(in_context(GraphRecursionError("a"), SandboxError("b"))) == "step_limit"
    assert classify_failure(in_context(OSError(errno.EIO, "I/O"), SandboxError("b"))) == "storage_error"


def test_a_chain_that_loops_is_classified_once():
    first, second = RuntimeError("a"), ValueError("b")
    first.__context__, second.__context__ = second, first
    assert classify_failure(first) == "harness_error"


def test_a_failed_episode_keeps_its_outcome_error_and_traceback():
    try:
        raise caused(RuntimeError("wrapper"), SandboxError("the worker did not start"))
    except RuntimeError as exc:
        episode = failed_episode("t1", "m", exc)
    assert (episode.task_id, episode.model, episode.status, episode.outcome) == ("t1", "m", "error", "sandbox_error")
    assert episode.error == "RuntimeError: wrapper" and episode.turns == []
    assert "SandboxError: the worker did not start" in episode.traceback
    long = failed_episode("t1", "m", KeyError("x" * 5000))
    assert len(long.error) == 2000 and long.error.startswith("KeyError: 'xxx")  # capped at 2,000 characters


def v(status: str, judge: str = "o4-mini") -> RubricVerdict:
    return RubricVerdict(rubric_id="r1", turn=0, weight=5, critical=True, status=status, judge=judge)


ANSWERED = Episode(task_id="t", model="m", turns=[TurnRecord(index=0, answer="42", status="answered")])
GRADED = TaskGrade(verdicts=[v("met")], score=1.0, passed=True, graded=True)


@pytest.mark.parametrize("episode, grade, outcome", [
    pytest.param(ANSWERED, GRADED, "answered", id="answered and graded"),
    pytest.param(ANSWERED.model_copy(update={"outcome": "step_limit", "status": "error"}), GRADED, "step_limit",
                 id="the model's own failure stays"),
    pytest.param(ANSWERED.model_copy(update={"outcome": "provider_error", "status": "error"}),
                 TaskGrade(verdicts=[v("error", judge="episode")]), "provider_error",
                 id="the episode's infrastructure failure first"),
    pytest.param(ANSWERED, TaskGrade(verdicts=[v("met"), v("error")]), "judge_error", id="a judge error"),
    pytest.param(ANSWERED.model_copy(update={"outcome": "sandbox_error", "status": "error"}),
                 TaskGrade(verdicts=[v("error")]), "sandbox_error", id="the episode's failure before the judge's"),
    pytest.param(ANSWERED, TaskGrade(verdicts=[v("unjudged", judge="rule")]), "unjudged", id="nobody could judge"),
    pytest.param(ANSWERED.model_copy(update={"outcome": "task_timeout", "status": "error"}),
                 TaskGrade(verdicts=[v("error", judge="episode")]), "unjudged",
                 id="an episode verdict error is not the judge's"),
])
def test_task_outcome(episode, grade, outcome):
    assert task_outcome(episode, grade) == outcome


@pytest.mark.parametrize("status, error, turns, outcome", [
    ("error", "TaskTimeout: task ran past 30 s", [], "task_timeout"),
    ("error", "KeyError: 'x'", [], "harness_error"),
    ("error", None, [], "harness_error"),
    ("completed", None, [TurnRecord(index=0, answer="", status="tool_round_cap"),
                         TurnRecord(index=1, answer="42", status="answered")], "tool_round_cap"),
    ("completed", None, [TurnRecord(index=0, answer="42", status="answered")], "answered"),
])
def test_results_written_before_outcomes_existed_derive_one(status, error, turns, outcome):
    assert Episode(task_id="t", model="m", status=status, error=error, turns=turns).ended == outcome


def test_only_the_sdks_api_errors_are_provider_errors():
    class APIError(Exception):  # named like the SDKs' class, but this harness's own
        pass

    assert classify_failure(APIError("x")) == "harness_error"
    assert classify_failure(openai.OpenAIError("no API key given")) == "harness_error"  # not an APIError
    assert classify_failure(anthropic.APIConnectionError(request=REQUEST)) == "provider_error"


def test_a_failed_episode_keeps_a_copy_of_the_turns_it_finished():
    from vtb_agents.graphs.partial import keeping_partial

    partial = Episode(task_id="t1", model="m", turns=[TurnRecord(index=0, answer="42", status="answered")])
    try:
        with keeping_partial(partial):
            raise TaskTimeout("task ran past 30 s")
    except TaskTimeout as exc:
        episode = failed_episode("t1", "m", exc)
    assert [t.answer for t in episode.turns] == ["42"] and episode.outcome == "task_timeout"
    episode.turns[0].answer = "changed"
    assert partial.turns[0].answer == "42"  # a deep copy: the driver's record is untouched


def test_a_deep_traceback_keeps_the_innermost_eight_frames_where_the_failure_happened():
    def fail_here() -> None:
        raise LookupError("the innermost frame")

    def recurse(depth: int) -> None:
        if depth == 0:
            fail_here()
        recurse(depth - 1)

    try:
        recurse(20)  # this test's frame, 21 of recurse, fail_here: 23 frames
    except LookupError as exc:
        trace = failed_episode("t1", "m", exc).traceback
    frames = re.findall(r'^  File "[^"]+", line \d+, in (\w+)$', trace, flags=re.MULTILINE)
    # 8 frames: recurse at its recursive call 3 times shown and 3 more folded, recurse calling fail_here, fail_here
    assert frames == ["recurse"] * 4 + ["fail_here"] and trace.count("[Previous line repeated 3 more times]") == 1
    assert trace.endswith('    raise LookupError("the innermost frame")\nLookupError: the innermost frame\n')


def test_the_traceback_is_kept_to_its_last_20000_characters():
    def recurse(depth: int) -> None:
        if depth == 0:
            raise ValueError("v" * 30_000)
        recurse(depth - 1)

    try:
        recurse(3)
    except ValueError as exc:
        episode = failed_episode("t1", "m", exc)
    trace = episode.traceback
    assert len(trace) == 20_000 and trace.endswith("v" * 100 + "\n")
    short = failed_episode("t1", "m", KeyError("k")).traceback
    assert short == "KeyError: 'k'\n"  # never raised: no frames, just the exception line
