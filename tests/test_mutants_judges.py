"""How a judge's reply becomes a verdict, and the verdict cache, at their boundaries: a reply with
whitespace, a reply that is no verdict, an error message longer than the cap, an exception that
cannot be printed, a judge given no time, a cached verdict found by the pass that paid for it or by
another, a judge error that carries usage (never stored). Part of ``make mutation`` (docs/development.md).
The LLM judge talks to a local OpenAI-compatible server (``tests/support/openai_server.py``)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_openai import ChatOpenAI

from support.openai_server import OpenAIServer
from vtb_agents.judges.base import Judgement, RuleJudge
from vtb_agents.judges.bounded import ask_judge, bounded_judgement, judge_time_limit, verdict_problem
from vtb_agents.judges.grade import rubric_verdict
from vtb_agents.judges.cache import CachedJudge, JudgeCache, Payer, StoredVerdict, judge_for_epoch
from vtb_agents.judges.llm import LLMJudge
from vtb_agents.judges.prompt import PROMPT_VERSION, RULES, SYSTEM, judge_prompt
from vtb_agents.models.cache import PaidHere
from vtb_agents.models.usage import CACHE_HIT_METADATA_KEY, track_usage
from vtb_agents.results import Episode, TokenUsage, TurnRecord
from vtb_agents.tasks.model import Rubric, Task, Turn
from vtb_agents.timebox import until

RUBRIC = Rubric(id="r1", description="Says 42", weight=5)
TASK = Task(id="t", turns=[Turn(prompt="Which number?", golden_answer="42", rubrics=[RUBRIC])])
USAGE = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}
"""What the judge's server reports for each call: stored with the verdict as TokenUsage below."""
STORED = TokenUsage(calls=1, input_tokens=120, output_tokens=30, total_tokens=150)


def verdict(status: str = "met", why: str = "It says 42.") -> dict:
    return {"content": json.dumps({"verdict": status, "justification": why}), "usage": USAGE}


def llm_judge(server: OpenAIServer, method: str = "json_schema", attempts: int = 2) -> LLMJudge:
    model = ChatOpenAI(model="judge-1", base_url=server.base_url, api_key="k", max_retries=0)
    return LLMJudge(model, "openai:judge-1", attempts=attempts, backoff_initial_s=0.01, backoff_max_s=0.01,
                    method=method)  # type: ignore[arg-type]


def ask(judge: object, answer: str = "42") -> Judgement:
    return judge.judge(task=TASK, turn=0, rubric=RUBRIC, answer=answer)  # type: ignore[attr-defined]


def test_the_llm_judge_asks_with_the_prompt_and_strips_the_justification():
    with OpenAIServer(lambda request: verdict("not_met", "  It rambles.\n")) as server:
        judge = llm_judge(server)
        assert (judge.name, judge.attempts) == ("openai:judge-1", 2)
        assert ask(judge) == Judgement("not_met", "It rambles.")
    (request,) = server.requests
    assert request["response_format"]["type"] == "json_schema"
    assert [m["content"] for m in request["messages"]] == [SYSTEM, judge_prompt(TASK, 0, RUBRIC, "42")]


def test_a_judge_that_keeps_failing_is_an_error_naming_its_attempts_cut_to_500_characters():
    with OpenAIServer(lambda request: ("raw", json.dumps({"error": {"message": "x" * 900}}), 400)) as server:
        judgement = ask(llm_judge(server, attempts=2))
    assert len(server.requests) == 2
    assert judgement.status == "error" and len(judgement.justification) == 500
    assert judgement.justification.startswith(
        "judge failed after 2 attempts: OpenAIInvalidRequestError: Error code: 400")


def test_the_llm_judges_defaults_are_three_attempts_with_a_json_schema_and_backoff_from_one_second(retry_waits):
    with OpenAIServer(lambda request: 500) as server:
        model = ChatOpenAI(model="judge-1", base_url=server.base_url, api_key="k", max_retries=0)
        judgement = ask(LLMJudge(model, "openai:judge-1"))
    assert judgement.status == "error" and judgement.justification.startswith("judge failed after 3 attempts: ")
    assert len(server.requests) == 3 and server.requests[0]["response_format"]["type"] == "json_schema"
    # 1 s then 2 s, each plus up to 1 s of jitter (recorded, not slept)
    assert len(retry_waits) == 2 and 1 <= retry_waits[0] <= 2 and 2 <= retry_waits[1] <= 3


def test_the_llm_judges_backoff_is_capped_at_its_maximum(retry_waits):
    with OpenAIServer(lambda request: 500) as server:
        model = ChatOpenAI(model="judge-1", base_url=server.base_url, api_key="k", max_retries=0)
        ask(LLMJudge(model, "openai:judge-1", attempts=3, backoff_initial_s=0.25, backoff_max_s=0.3))
    # 0.25 s plus jitter, then 0.5 s plus jitter: both capped at 0.3 s
    assert len(retry_waits) == 2 and 0.25 <= retry_waits[0] <= 0.3 and retry_waits[1] == 0.3


def test_a_reply_with_no_tool_call_is_no_verdict():
    # function calling: a plain text reply parses to no tool call, None
    with OpenAIServer(lambda request: {"content": "met", "usage": USAGE}) as server:
        judgement = ask(llm_judge(server, method="function_calling"))
    assert judgement == Judgement("error", "judge gave no verdict (got NoneType)")


def test_the_judges_own_time_limit_is_its_attempts_and_backoffs():
    assert judge_time_limit() == 450.0  # 3 attempts x (120 s request + 30 s longest backoff)
    assert judge_time_limit(10.0) == 120.0  # 3 x (10 + 30)


class Odd:
    """A judge plugged in by a user (``--judge my_pkg.judges:odd``) that replies ``reply`` or raises it."""

    calls_model = False

    def __init__(self, reply: object, name: str = "odd") -> None:
        self.reply, self.name, self.asked, self.thread = reply, name, 0, ""

    def judge(self, *, task: Task, turn: int, rubric: Rubric, answer: str) -> Judgement:
        self.asked += 1
        self.thread = threading.current_thread().name
        if isinstance(self.reply, BaseException):
            raise self.reply
        return self.reply  # type: ignore[return-value]


class Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no")


@pytest.mark.parametrize("reply, problem", [
    ("met", "it returned a str, not a vtb_agents.judges.Judgement"),
    (Judgement("maybe", "?"), "it returned the status 'maybe', not one of error, met, not_met, unjudged"),  # type: ignore[arg-type]
    (Judgement("met", 1), "its justification is a int, not a string"),  # type: ignore[arg-type]
])
def test_a_reply_that_is_no_verdict_says_why(reply, problem):
    assert verdict_problem(reply) == problem
    got = ask_judge(Odd(reply), task=TASK, turn=0, rubric=RUBRIC, answer="42", limit_s=30)
    assert got == Judgement("error", f"judge 'odd' gave no verdict: {problem}")
    assert verdict_problem(Judgement("unjudged", "")) is None


def test_a_judge_is_asked_on_a_thread_named_after_the_task():
    judge = Odd(Judgement("met", "ok"))
    assert ask_judge(judge, task=TASK, turn=0, rubric=RUBRIC, answer="42", limit_s=30) == Judgement("met", "ok")
    assert judge.thread == "vtb-judge-t"  # what a stack dump of a hanging run shows


def test_a_judge_that_raises_is_an_error_naming_the_exception_cut_to_500_characters():
    got = ask_judge(Odd(ValueError("v" * 600)), task=TASK, turn=0, rubric=RUBRIC, answer="42", limit_s=30)
    assert got.status == "error" and got.justification == f"judge 'odd' failed: ValueError: {'v' * 600}"[:500]
    assert len(got.justification) == 500
    got = ask_judge(Odd(Unprintable()), task=TASK, turn=0, rubric=RUBRIC, answer="42", limit_s=30)
    assert got == Judgement("error", "judge 'odd' failed: Unprintable: <message not printable: ValueError>")
    got = ask_judge(Odd(SystemExit(3)), task=TASK, turn=0, rubric=RUBRIC, answer="42", limit_s=30)
    assert got == Judgement("error", "judge 'odd' failed: SystemExit: 3")
    with pytest.raises(KeyboardInterrupt):
        ask_judge(Odd(KeyboardInterrupt()), task=TASK, turn=0, rubric=RUBRIC, answer="42", limit_s=30)


class Slow:
    name, calls_model = "slow", False

    def __init__(self) -> None:
        self.release = threading.Event()

    def judge(self, *, task: Task, turn: int, rubric: Rubric, answer: str) -> Judgement:
        self.release.wait(60)
        return Judgement("met", "late")


def test_a_judge_past_its_time_or_the_deadline_is_an_error_naming_the_time():
    slow = Slow()
    try:
        got = ask_judge(slow, task=TASK, turn=0, rubric=RUBRIC, answer="42", limit_s=0.2)
        assert got == Judgement("error", "judge 'slow' gave no verdict within its time limit (0.2 s)")
        with until(time.monotonic() - 1):  # the grading window is over: the judge is not even asked
            got = ask_judge(Odd(Judgement("met", "")), task=TASK, turn=0, rubric=RUBRIC, answer="42", limit_s=30)
        assert got == Judgement("error", "judge 'odd' gave no verdict within its time limit (0.0 s)")
    finally:
        slow.release.set()


class Boxed:
    """A judge that bounds its own calls (``judge_within``), as the verdict cache does."""

    name, calls_model = "boxed", False

    def judge(self, *, task: Task, turn: int, rubric: Rubric, answer: str) -> Judgement:
        return Judgement("not_met", "asked without its own time box")

    def judge_within(self, *, task: Task, turn: int, rubric: Rubric, answer: str, limit_s: float) -> Judgement:
        return Judgement("met", f"{task.id} turn {turn} {rubric.id}: {answer!r} within {limit_s} s")


def test_bounded_judgement_goes_through_a_judges_own_time_box_if_it_has_one():
    plain = Odd(Judgement("met", "plain"))
    assert bounded_judgement(plain, task=TASK, turn=0, rubric=RUBRIC, answer="42", limit_s=30) == Judgement(
        "met", "plain")
    assert bounded_judgement(Boxed(), task=TASK, turn=0, rubric=RUBRIC, answer="42", limit_s=30) == Judgement(
        "met", "t turn 0 r1: '42' within 30 s")


def test_the_cache_key_keeps_epoch_one_as_a_run_without_epochs():
    # the keys of verdict caches on disk: sha256 of the JSON list [judge, prompt version, prompt], with the
    # epoch appended from epoch 2 on; a key that changed would judge (and pay for) every cached verdict again
    assert JudgeCache.key("openai:o4-mini", "Which number?") == JudgeCache.key("openai:o4-mini", "Which number?", 1) \
        == "b4a393cff7f25d12009583ecf9882763c36a3296fb848f9c51e0fe16c9318332"
    assert JudgeCache.key("openai:o4-mini", "Which number?", 2) == \
        "40e39d5a54097ae87d3e9f1ccd56f7234f025a12e59049719f527c1cfeb1b2d4"
    assert JudgeCache.key("j", "p") == JudgeCache.key("j", "p", 1)
    keys = {JudgeCache.key("j", "p"), JudgeCache.key("j", "p", 2), JudgeCache.key("j2", "p"), JudgeCache.key("j", "p2")}
    assert len(keys) == 4 and PROMPT_VERSION == "vtb-judge-v1"


def test_the_cache_stores_verdicts_with_usage_and_payer_and_never_errors(tmp_path: Path):
    cache = JudgeCache(tmp_path / "verdicts.sqlite")
    assert cache.get("k") is None
    payer = Payer("run-1", "t", 2)
    cache.put("k", "j", Judgement("not_met", "no"), STORED, TokenUsage(calls=1), payer)
    assert cache.get("k") == StoredVerdict(Judgement("not_met", "no"), STORED, TokenUsage(calls=1), payer)
    cache.put("bare", "j", Judgement("met", "yes"))  # outside a run: no usage measured, no payer
    assert cache.get("bare") == StoredVerdict(Judgement("met", "yes"), TokenUsage(), TokenUsage(), None)
    cache.put("e", "j", Judgement("error", "boom"), STORED, None, payer)  # a judge error that carries usage
    cache.put("u", "j", Judgement("unjudged", "no check"))
    assert cache.get("e") is None and cache.get("u") is None
    cache.close()


def test_a_verdict_written_before_payers_were_kept_reads_without_usage(tmp_path: Path):
    cache = JudgeCache(tmp_path / "verdicts.sqlite")
    cache.put("old", "j", Judgement("met", "yes"), STORED, None, Payer("run-1", "t", 1))
    cache._db.write_all([("DELETE FROM verdict_payers", ())])  # as in a file of an earlier version
    assert cache.get("old") == StoredVerdict(Judgement("met", "yes"), TokenUsage(), TokenUsage(), None)
    cache.close()


def test_a_cached_verdict_is_the_paying_pass_own_call_once_and_a_hit_for_everyone_else(tmp_path: Path):
    cache = JudgeCache(tmp_path / "verdicts.sqlite")
    with OpenAIServer(lambda request: verdict("met", " yes ")) as server:
        inner = llm_judge(server)

        def judged(judge: CachedJudge, task: Task = TASK) -> tuple[Judgement, TokenUsage]:
            with track_usage() as usage:
                got = judge.judge(task=task, turn=0, rubric=RUBRIC, answer="42")
            return got, usage.total

        first = CachedJudge(inner, cache, grading="run-1")
        assert (first.name, first.calls_model, first.epoch) == ("openai:judge-1", True, 1)
        assert judged(first) == (Judgement("met", "yes"), STORED)  # asked: the call and its usage
        assert judged(first) == (Judgement("met", "yes", cached=True), TokenUsage())  # twice in one attempt
        resumed = CachedJudge(inner, cache, grading="run-1")  # a new attempt of the pass that paid
        assert judged(resumed) == (Judgement("met", "yes"), STORED)
        assert judged(resumed) == (Judgement("met", "yes", cached=True), TokenUsage())
        assert judged(CachedJudge(inner, cache, grading="run-2"))[0].cached
        assert judged(CachedJudge(inner, cache))[0].cached  # outside a run directory
        other = Task(id="twin", turns=TASK.turns)  # the same prompt: the same key, another task's payment
        assert judged(CachedJudge(inner, cache, grading="run-1"), other)[0].cached
        assert len(server.requests) == 1
        assert server.requests[0]["messages"][-1]["content"] == judge_prompt(TASK, 0, RUBRIC, "42")
        second = judge_for_epoch(first, 2)
        assert isinstance(second, CachedJudge)
        assert (second.epoch, second.grading, second.inner, second.cache) == (2, "run-1", inner, cache)
        assert judged(second) == (Judgement("met", "yes"), STORED)  # epoch 2 is judged apart
        assert len(server.requests) == 2
        key = JudgeCache.key("openai:judge-1", judge_prompt(TASK, 0, RUBRIC, "42"), 2)
        assert cache.get(key) == StoredVerdict(Judgement("met", "yes"), STORED, TokenUsage(), Payer("run-1", "t", 2))
        assert judged(second.for_epoch(2)) == (Judgement("met", "yes", cached=True), TokenUsage())  # paid here
    cache.close()


class Replayed:
    """A judge whose one chat-model call the model cache answered (``--model-cache``): its usage is
    reported, and counted as from the cache."""

    name, calls_model = "replayed", True

    def judge(self, *, task: Task, turn: int, rubric: Rubric, answer: str) -> Judgement:
        reply = AIMessage("met", usage_metadata={"input_tokens": 120, "output_tokens": 30, "total_tokens": 150},
                          response_metadata={CACHE_HIT_METADATA_KEY: "k"})
        return Judgement("met", str(GenericFakeChatModel(messages=iter([reply])).invoke(answer).content))


def test_a_verdict_stores_the_part_of_its_usage_the_model_cache_answered_and_counts_it_when_found_again(
        tmp_path: Path):
    cache = JudgeCache(tmp_path / "verdicts.sqlite")
    judge = CachedJudge(Replayed(), cache, grading="run-1")
    with track_usage() as usage:
        assert ask(judge) == Judgement("met", "met")
    assert (usage.total, usage.from_cache) == (STORED, STORED)
    key = JudgeCache.key("replayed", judge_prompt(TASK, 0, RUBRIC, "42"))
    assert cache.get(key) == StoredVerdict(Judgement("met", "met"), STORED, STORED, Payer("run-1", "t", 1))
    with track_usage() as usage:  # a resumed attempt of the same pass: the call it paid for, from the cache
        assert ask(CachedJudge(Replayed(), cache, grading="run-1")) == Judgement("met", "met")
    assert (usage.total, usage.from_cache) == (STORED, STORED)
    cache.close()


def test_a_judge_error_is_not_stored_and_asked_again(tmp_path: Path):
    cache = JudgeCache(tmp_path / "verdicts.sqlite")
    with OpenAIServer(lambda request: 500) as server:
        judge = CachedJudge(llm_judge(server, attempts=1), cache, grading="run-1")
        assert ask(judge).status == "error" and ask(judge).status == "error"
        assert len(server.requests) == 2
    cache.close()


def test_judge_for_epoch_leaves_other_judges_as_they_are():
    rule = RuleJudge()
    assert judge_for_epoch(rule, 3) is rule
    shared = PaidHere()
    judge = CachedJudge(rule, JudgeCache.__new__(JudgeCache), paid_here=shared)
    assert judge.for_epoch(2)._paid_here is shared


def test_the_prompt_shows_earlier_turns_of_a_multi_turn_task_only():
    second = Rubric(id="r2", description="Doubles it", weight=2)
    task = Task(id="mt", turns=[Turn(prompt="Which number?", golden_answer="42", rubrics=[RUBRIC]),
                                Turn(prompt="Double it?", golden_answer="84", rubrics=[second])])
    assert judge_prompt(task, 1, second, "84") == "\n\n".join([
        "## Earlier turns of the conversation\nTurn 1 question: Which number?\nTurn 1 reference answer: 42",
        "## Question (turn 2 of 2)\nDouble it?", "## Reference answer\n84", "## Criterion\nDoubles it",
        "## Answer to grade\n84", RULES])
    assert judge_prompt(task, 0, RUBRIC, "42").startswith("## Question (turn 1 of 2)\nWhich number?\n\n")
    assert judge_prompt(TASK, 0, RUBRIC, "42") == "\n\n".join([
        "## Question\nWhich number?", "## Reference answer\n42", "## Criterion\nSays 42", "## Answer to grade\n42",
        RULES])


def test_a_rubric_verdict_gives_the_judge_the_grading_windows_limit_or_its_own():
    episode = Episode(task_id="t", model="m", turns=[TurnRecord(index=0, answer="42", status="answered")])
    assert rubric_verdict(TASK, episode, Boxed(), 0, RUBRIC, limit_s=7.5).justification == \
        "t turn 0 r1: '42' within 7.5 s"
    assert rubric_verdict(TASK, episode, Boxed(), 0, RUBRIC).justification == "t turn 0 r1: '42' within 450.0 s"


def test_the_prompt_of_a_third_turn_shows_both_earlier_turns_apart():
    rubric = Rubric(id="r3", description="Halves it", weight=2)
    task = Task(id="mt", turns=[Turn(prompt="Which number?", golden_answer="42"), Turn(prompt="Double it?",
                                                                                        golden_answer="84"),
                                Turn(prompt="Halve that?", golden_answer="42", rubrics=[rubric])])
    assert judge_prompt(task, 2, rubric, "42").startswith(
        "## Earlier turns of the conversation\nTurn 1 question: Which number?\nTurn 1 reference answer: 42\n\n"
        "Turn 2 question: Double it?\nTurn 2 reference answer: 84\n\n## Question (turn 3 of 3)\nHalve that?\n\n")
