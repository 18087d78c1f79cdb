"""The LLM judge over the wire (a local OpenAI-compatible server), its cache, and regrading."""

from __future__ import annotations

import json

import pytest
from conftest import write_task
from langchain_openai import ChatOpenAI
from support.openai_server import OpenAIServer
from typer.testing import CliRunner

from vtb_agents.cli import app
from vtb_agents.judges.graph import grade_episode
from vtb_agents.judges.llm import LLMJudge
from vtb_agents.judges.prompt import PROMPT_VERSION
from vtb_agents.results import Episode, TurnRecord
from vtb_agents.runner.regrade import regrade_run
from vtb_agents.runner.run import RunConfig, run_suite
from vtb_agents.tasks import load_tasks


def verdict_reply(verdict: str = "met", why: str = "The answer is concise.") -> str:
    return json.dumps({"verdict": verdict, "justification": why})


def prompt_of(request: dict) -> str:
    return request["messages"][-1]["content"]


@pytest.fixture
def task(task_root):
    return load_tasks(task_root)[0]


def episode_with(answer: str) -> Episode:
    return Episode(task_id="t-corner", model="m", turns=[TurnRecord(index=0, answer=answer, status="answered")])


def judge_for(server: OpenAIServer, attempts: int = 3) -> LLMJudge:
    model = ChatOpenAI(model="judge-1", base_url=server.base_url, api_key="test-key", temperature=0, max_retries=0)
    return LLMJudge(model, name="openai:judge-1", attempts=attempts, backoff_initial_s=0.01, backoff_max_s=0.02)


def test_structured_verdict_over_the_wire(task):
    with OpenAIServer(lambda request: verdict_reply("not_met", "It rambles.")) as server:
        grade = grade_episode(task, episode_with("The number is 42."), judge_for(server))
    (request,) = server.requests  # r1 has a check; only r2 went to the judge
    assert request["model"] == "judge-1" and request["temperature"] == 0
    assert request["response_format"]["type"] == "json_schema"
    assert set(request["response_format"]["json_schema"]["schema"]["properties"]) == {"verdict", "justification"}
    prompt = prompt_of(request)
    assert "## Criterion\nIs concise" in prompt and "## Answer to grade\nThe number is 42." in prompt
    assert "## Reference answer\nThe number is 42." in prompt
    by_id = {v.rubric_id: v for v in grade.verdicts}
    assert by_id["r1"].judge == "check" and by_id["r1"].status == "met"
    assert by_id["r2"].judge == "openai:judge-1" and by_id["r2"].status == "not_met"
    assert by_id["r2"].justification == "It rambles."
    assert grade.graded and grade.passed is True and grade.score == pytest.approx(5 / 6)


@pytest.mark.parametrize("bad_reply", [("raw", "{not json"), "I think it is met", json.dumps({"verdict": "maybe"})])
def test_malformed_replies_are_retried_then_recorded_as_judge_errors(task, bad_reply):
    with OpenAIServer(lambda request: bad_reply) as server:
        grade = grade_episode(task, episode_with("The number is 42."), judge_for(server, attempts=3))
    assert len(server.requests) == 3
    r2 = next(v for v in grade.verdicts if v.rubric_id == "r2")
    assert r2.status == "error" and "judge failed after 3 attempts" in r2.justification
    assert not grade.graded and grade.passed is None and grade.score is None
    assert "could not be judged" in grade.reason


def test_a_retry_that_succeeds_gives_a_verdict(task):
    replies = iter([("raw", "oops"), verdict_reply("met")])
    with OpenAIServer(lambda request: next(replies)) as server:
        grade = grade_episode(task, episode_with("42"), judge_for(server))
    assert len(server.requests) == 2 and grade.graded and grade.score == 1.0


def test_the_first_retry_waits_backoff_initial_s_then_twice_that(task, retry_waits):
    replies = iter([("raw", "oops"), ("raw", "still not json"), verdict_reply("met")])
    with OpenAIServer(lambda request: next(replies)) as server:
        model = ChatOpenAI(model="judge-1", base_url=server.base_url, api_key="test-key", max_retries=0)
        judge = LLMJudge(model, name="openai:judge-1", attempts=3, backoff_initial_s=0.25, backoff_max_s=0.6)
        grade = grade_episode(task, episode_with("42"), judge)
    assert len(server.requests) == 3 and grade.score == 1.0
    # 0.25 s, then 0.5 s, each plus up to 0.25 s of jitter, never over 0.6 s (a first wait of 1 s
    # whatever the setting, the old bug, would be capped to 0.6)
    assert len(retry_waits) == 2
    assert 0.25 <= retry_waits[0] <= 0.5 and 0.5 <= retry_waits[1] <= 0.6


def test_multi_turn_prompt_shows_earlier_turns(tmp_path):
    folder = write_task(tmp_path, "mt")
    data = json.loads((folder / "task.json").read_text())
    second = {**data["turns"][0], "prompt": "Double it?", "golden_answer": "84", "images": []}
    data["turns"].append(second)
    (folder / "task.json").write_text(json.dumps(data))
    task = load_tasks(folder)[0]
    episode = Episode(task_id="mt", model="m", turns=[TurnRecord(index=0, answer="42", status="answered"),
                                                      TurnRecord(index=1, answer="84", status="answered")])
    with OpenAIServer(lambda request: verdict_reply()) as server:
        grade_episode(task, episode, judge_for(server))
    second_turn = [prompt_of(r) for r in server.requests if "(turn 2 of 2)" in prompt_of(r)]
    assert len(second_turn) == 1
    assert "Turn 1 question: What number is printed" in second_turn[0]
    assert "Turn 1 reference answer: The number is 42." in second_turn[0]


def test_regrade_reuses_cached_verdicts(task_root, tmp_path, monkeypatch):
    tasks = load_tasks(task_root)
    out = tmp_path / "run"
    run_suite(tasks, RunConfig(model="replay", tasks=str(task_root)), out)
    with OpenAIServer(lambda request: verdict_reply("met")) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        first = regrade_run(out, "openai:judge-1")
        assert len(server.requests) == 1
        assert first.judge.model_dump() == {"model": "openai:judge-1", "calls": 1, "checks": 1, "unjudged": 0,
                                       "errors": 0, "cache_hits": 0, "pending": 0}
        result = CliRunner().invoke(app, ["grade", str(out), "--judge", "openai:judge-1"])
        assert result.exit_code == 0, result.output
        assert "0 call(s), 1 verdict cache hit(s), 0 error(s)" in result.output
    assert len(server.requests) == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["judge"]["cache_hits"] == 1 and summary["ars"] == 1.0
    assert summary["strategy"] == "react" and summary["model"] == "replay"  # regrading keeps what was run
    run = json.loads((out / "run.json").read_text())
    assert run["config"]["judge"] == "openai:judge-1" and run["judge"]["spec"] == "openai:judge-1"
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [v["cached"] for v in lines[0]["grade"]["verdicts"]] == [False, True]


def test_prompt_version_is_part_of_the_cache_key():
    from vtb_agents.judges.cache import JudgeCache

    assert PROMPT_VERSION and JudgeCache.key("j", "p") != JudgeCache.key("j2", "p") != JudgeCache.key("j", "p2")
