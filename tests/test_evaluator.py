"""The openevals / LangSmith rubric evaluator: direct calls, LangSmith's own wrapper offline, an LLM judge."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, UTC

import pytest
from langchain_core.load import dumpd
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI
from langsmith import tracing_context
from langsmith.evaluation.evaluator import EvaluationResult, run_evaluator
from langsmith.schemas import Example, Run

from conftest import write_task
from support.openai_server import OpenAIServer
from vtb_agents.judges.evaluator import PASS_KEY, SCORE_KEY, make_rubric_evaluator
from vtb_agents.judges.llm import LLMJudge
from vtb_agents.runner.plan import plan_judge
from vtb_agents.runner.run import RunConfig, run_suite
from vtb_agents.tasks import Task, load_tasks


@pytest.fixture(scope="module")
def tasks(tmp_path_factory) -> dict[str, Task]:
    """``t``: r1 (critical, check: 42) and r2 (no check); ``mt``: a second turn whose r1 checks 84."""
    root = tmp_path_factory.mktemp("evaluator-tasks")
    write_task(root, "t")
    folder = write_task(root, "mt")
    data = json.loads((folder / "task.json").read_text())
    data["turns"].append({"prompt": "Double it?", "images": [], "golden_answer": "84", "rubrics": {
        "r1": {"description": "Says 84", "weight": 4, "check": {"type": "number", "value": 84}}}})
    (folder / "task.json").write_text(json.dumps(data))
    return {t.id: t for t in load_tasks(root)}


def dump(task: Task) -> dict:
    """What a LangSmith example carries as reference outputs (JSON round trip included)."""
    return json.loads(json.dumps(task.model_dump(mode="json")))


OPENEVALS_RESULT_KEYS = {"key", "score", "comment", "metadata", "source_run_id"}
"""The fields of openevals' ``EvaluatorResult`` (checked against the package when it is installed)."""


def results_by_key(results: list[dict]) -> dict[str, dict]:
    assert [r["key"] for r in results] == [SCORE_KEY, PASS_KEY]
    assert all(set(r) <= OPENEVALS_RESULT_KEYS for r in results)
    return {r["key"]: r for r in results}


def test_result_fields_are_openevals_fields():
    from openevals import types

    assert set(types.EvaluatorResult.__annotations__) == OPENEVALS_RESULT_KEYS


def test_direct_call_with_the_task_as_reference(tasks):
    evaluator = make_rubric_evaluator()
    task = tasks["t"]
    good = results_by_key(evaluator(inputs={"task_id": "t", "prompts": [task.turns[0].prompt]},
                                    outputs={"answers": ["The number is 42."]}, reference_outputs=dump(task)))
    assert good[SCORE_KEY]["score"] == 1.0 and good[PASS_KEY]["score"] is True
    assert good[SCORE_KEY]["comment"] == "5/5 rubric weight met over 1 judged rubric(s); 1 unjudged (not counted)"
    assert good[PASS_KEY]["comment"] == "passed: all 1 critical rubric(s) met"
    verdicts = {v["rubric_id"]: v for v in good[SCORE_KEY]["metadata"]["verdicts"]}
    assert verdicts["r1"]["source"] == "check" and verdicts["r2"]["status"] == "unjudged"
    bad = results_by_key(evaluator(inputs={"task_id": "t"}, outputs={"answer": "I see 47."},
                                   reference_outputs=dump(task)))
    assert bad[SCORE_KEY]["score"] == 0.0 and bad[PASS_KEY]["score"] is False
    assert bad[PASS_KEY]["comment"] == "failed: 1 critical rubric(s) not met: turn 1 r1: expected 42 ± 0; answer has 47"


def test_task_ids_are_looked_up(tasks):
    evaluator = make_rubric_evaluator(tasks.values())
    for reference in ("t", {"task_id": "t"}, {}, None):
        results = results_by_key(evaluator(inputs={"task_id": "t"}, outputs={"answer": "42"},
                                           reference_outputs=reference))
        assert results[PASS_KEY]["score"] is True
    with pytest.raises(ValueError, match="unknown task id 'nope'"):
        evaluator(inputs={"task_id": "nope"}, outputs={"answer": "42"}, reference_outputs={})
    with pytest.raises(ValueError, match="inputs\\['task_id'\\] is 'mt' but the reference task is 't'"):
        evaluator(inputs={"task_id": "mt"}, outputs={"answer": "42"}, reference_outputs=dump(tasks["t"]))
    with pytest.raises(ValueError, match="no task"):
        make_rubric_evaluator()(inputs={}, outputs={"answer": "42"}, reference_outputs={})


@pytest.mark.parametrize("messages", [
    [HumanMessage("What number?"), AIMessage("", tool_calls=[{"name": "calculator", "args": {}, "id": "c1"}]),
     ToolMessage("42", tool_call_id="c1"), AIMessage([{"type": "text", "text": "The number is 42."}])],
    [{"role": "user", "content": "What number?"}, {"role": "assistant", "content": "The number is 42."}],
    [dumpd(HumanMessage("What number?")), dumpd(AIMessage("The number is 42."))],
])
def test_langchain_messages_give_the_last_ai_text(tasks, messages):
    results = results_by_key(make_rubric_evaluator(tasks.values())(
        inputs={"task_id": "t"}, outputs={"messages": messages}, reference_outputs={}))
    assert results[PASS_KEY]["score"] is True


def test_langsmith_wrapped_outputs_count_as_answers(tasks):
    evaluator = make_rubric_evaluator(tasks.values())
    single = results_by_key(evaluator(inputs={"task_id": "t"}, outputs={"output": "42"}, reference_outputs={}))
    multi = results_by_key(evaluator(inputs={"task_id": "mt"}, outputs={"output": ["42", "84"]}, reference_outputs={}))
    assert single[PASS_KEY]["score"] is True and multi[PASS_KEY]["score"] is True


def test_multi_turn_answers_and_missing_turns(tasks):
    evaluator = make_rubric_evaluator(tasks.values())
    both = results_by_key(evaluator(inputs={"task_id": "mt"}, outputs={"answers": ["42", "It is 84."]},
                                    reference_outputs={}))
    assert both[SCORE_KEY]["score"] == 1.0 and both[PASS_KEY]["score"] is True
    wrong = results_by_key(evaluator(inputs={"task_id": "mt"}, outputs={"answers": ["42", "It is 80."]},
                                     reference_outputs={}))
    assert wrong[SCORE_KEY]["score"] == pytest.approx(5 / 9) and wrong[PASS_KEY]["score"] is False
    missing = results_by_key(evaluator(inputs={"task_id": "mt"}, outputs={"answers": ["42"]}, reference_outputs={}))
    assert missing[SCORE_KEY]["score"] is None and missing[PASS_KEY]["score"] is None
    assert missing[PASS_KEY]["comment"].startswith("ungraded: 1 rubric(s) could not be judged: no answer for turn 2")
    nothing = results_by_key(evaluator(inputs={"task_id": "t"}, outputs={}, reference_outputs={}))
    assert nothing[PASS_KEY]["score"] is None  # a target run that errored has no outputs
    with pytest.raises(ValueError, match="a 2-turn task needs outputs\\['answers'\\]"):
        evaluator(inputs={"task_id": "mt"}, outputs={"answer": "42"}, reference_outputs={})
    with pytest.raises(ValueError, match="3 answers for a 2-turn task"):
        evaluator(inputs={"task_id": "mt"}, outputs={"answers": ["1", "2", "3"]}, reference_outputs={})


def test_scores_match_the_runner_on_a_real_run(tasks, tmp_path):
    """Answers of a replay run, fed to the evaluator, get the grade the runner gave them."""
    failing = tasks["t"].model_copy(deep=True, update={"id": "t-fail"})
    failing.turns[0].golden_answer = "The number is 47."
    run_suite([tasks["t"], failing, tasks["mt"]], RunConfig(model="replay"), tmp_path / "run")
    evaluator = make_rubric_evaluator([tasks["t"], failing, tasks["mt"]])
    lines = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    assert [line["grade"]["passed"] for line in lines] == [True, False, True]
    for line in lines:
        answers = [turn["answer"] for turn in line["episode"]["turns"]]
        got = results_by_key(evaluator(inputs={"task_id": line["task_id"]}, outputs={"answers": answers},
                                       reference_outputs={}))
        assert got[SCORE_KEY]["score"] == line["grade"]["score"] and got[PASS_KEY]["score"] == line["grade"]["passed"]


def langsmith_pair(task: Task, outputs: dict | None) -> tuple[Run, Example]:
    """A finished target run and its dataset example, built locally (no LangSmith server)."""
    inputs = {"task_id": task.id, "prompts": [turn.prompt for turn in task.turns]}
    run = Run(id=uuid.uuid4(), trace_id=uuid.uuid4(), name="vtb-target", run_type="chain",
              start_time=datetime.now(UTC), inputs=inputs, outputs=outputs)
    example = Example(id=uuid.uuid4(), inputs=inputs, outputs=dump(task))
    return run, example


def test_through_langsmiths_own_evaluator_wrapper_offline(tasks, monkeypatch):
    for name in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGSMITH_API_KEY", "LANGCHAIN_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    wrapped = run_evaluator(make_rubric_evaluator())
    with tracing_context(enabled=False):
        failed = wrapped.evaluate_run(*langsmith_pair(tasks["t"], {"answers": ["The number is 47."]}))
        errored = wrapped.evaluate_run(*langsmith_pair(tasks["t"], None))  # the target raised: no outputs
    results = {r.key: r for r in failed["results"]}
    assert set(results) == {SCORE_KEY, PASS_KEY} and all(isinstance(r, EvaluationResult) for r in results.values())
    assert results[SCORE_KEY].score == 0.0 and results[PASS_KEY].score is False
    assert "expected 42 ± 0; answer has 47" in results[PASS_KEY].comment
    assert results[SCORE_KEY].source_run_id is not None  # LangSmith links the feedback to the evaluator run
    ungraded = {r.key: r for r in errored["results"]}
    assert ungraded[SCORE_KEY].score is None and ungraded[PASS_KEY].comment.startswith("ungraded:")


def verdict(status: str, why: str) -> str:
    return json.dumps({"verdict": status, "justification": why})


def test_an_llm_judge_decides_rubrics_without_a_check(tasks):
    with OpenAIServer(lambda request: verdict("not_met", "Too wordy.")) as server:
        model = ChatOpenAI(model="judge-1", base_url=server.base_url, api_key="k", temperature=0, max_retries=0)
        evaluator = make_rubric_evaluator(judge=LLMJudge(model, "openai:judge-1", backoff_initial_s=0.01))
        results = results_by_key(evaluator(inputs={"task_id": "t"}, outputs={"answer": "Well, it is 42."},
                                           reference_outputs=dump(tasks["t"])))
    (request,) = server.requests  # r1 is decided by its check; only r2 went to the judge
    prompt = request["messages"][-1]["content"]
    assert "## Criterion\nIs concise" in prompt and "## Answer to grade\nWell, it is 42." in prompt
    assert results[SCORE_KEY]["score"] == pytest.approx(5 / 6) and results[PASS_KEY]["score"] is True
    r2 = next(v for v in results[SCORE_KEY]["metadata"]["verdicts"] if v["rubric_id"] == "r2")
    assert r2 == {"turn": 1, "rubric_id": "r2", "status": "not_met", "weight": 1, "critical": False,
                  "source": "openai:judge-1", "justification": "Too wordy."}


def test_a_judge_spec_goes_through_the_plan(tasks, monkeypatch):
    with OpenAIServer(lambda request: verdict("met", "Short.")) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        evaluator = make_rubric_evaluator(tasks.values(), judge=plan_judge("openai:judge-2").judge)
        results = results_by_key(evaluator(inputs={"task_id": "t"}, outputs={"answer": "42"}, reference_outputs={}))
    assert [r["model"] for r in server.requests] == ["judge-2"]
    assert results[SCORE_KEY]["score"] == 1.0 and results[SCORE_KEY]["metadata"]["judge"] == "openai:judge-2"


def test_a_bad_judge_spec_fails_when_it_is_planned():
    with pytest.raises(ValueError, match="is not 'rule', 'provider:model'"):
        plan_judge("o4mini")
