"""The bundled suite end to end: the replay agent passes every task; wrong answers fail."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage

from vtb_agents.graphs.grading import grade_episode
from vtb_agents.graphs.episode import run_episode
from vtb_agents.judges import RuleJudge
from vtb_agents.models.scripted import ScriptedChatModel
from vtb_agents.runner.run import RunConfig, run_suite
from vtb_agents.runner.store import ResultsStore
from vtb_agents.tasks import load_tasks
from vtb_agents.tools import select_tools
from vtb_agents.tools.sandbox import open_sandbox


@pytest.fixture(scope="module")
def sample():
    return load_tasks("sample")


@pytest.fixture(scope="module")
def replay_run(sample, tmp_path_factory):
    out = tmp_path_factory.mktemp("sample-run")
    return out, run_suite(sample, RunConfig(model="replay"), out)


def test_replay_passes_every_sample_task(replay_run, sample):
    out, summary = replay_run
    results, _ = ResultsStore(out).load()
    assert [r.task_id for r in results] == [t.id for t in sample]
    failed = [(r.task_id, r.grade.reason, [v.justification for v in r.grade.verdicts if v.status != "met"])
              for r in results if not r.grade.passed]
    assert failed == []
    assert summary["tasks"] == summary["graded"] == len(sample) and summary["apr"] == 1.0 and summary["ars"] == 1.0
    assert set(summary["by_category"]) == {"region_switch", "hybrid_tool", "follow_up", "temporal", "progressive"}
    assert summary["tool_metrics"]["proactivity"] == 1.0 and summary["tool_metrics"]["success_rate"] == 1.0
    # Offline, through the shipped cassette: every one of the six tools is exercised.
    assert set(summary["tool_metrics"]["by_tool"]) == {
        "python_image_processing", "python_interpreter", "calculator", "web_search", "browser_get_page_text",
        "historical_weather"}
    assert summary["tool_metrics"]["image_ops"]["cropping"] > 0
    assert summary["critical_disagreements"] == 1
    assert summary == json.loads((out / "summary.json").read_text())


def test_replay_uses_the_category_graphs_and_resumes_follow_ups(replay_run):
    out, _ = replay_run
    results = {r.task_id: r for r in ResultsStore(out).load()[0]}
    follow_up = results["fu-generalist-shelf"].episode
    assert follow_up.settings["graph"] == "follow_up"
    assert [t.status for t in follow_up.turns] == ["asked_user", "answered", "answered"]
    assert results["te-physics-gauge"].episode.settings["graph"] == "temporal"


def wrong(task):
    return ScriptedChatModel(script=lambda messages: AIMessage("I cannot tell; my best guess is 0."))


@pytest.mark.parametrize("task_id", ["rs-finance-invoice", "ht-medical-dosage", "te-physics-gauge", "pr-maths-plot"])
def test_rule_judge_fails_a_wrong_answer(sample, task_id, artifacts):
    task = next(t for t in sample if t.id == task_id)
    with open_sandbox("local") as sandbox:
        episode = run_episode(task, wrong(task), select_tools(), sandbox=sandbox, artifacts=artifacts,
                              model_name="wrong")
    grade = grade_episode(task, episode, RuleJudge())
    assert grade.graded and grade.passed is False and grade.score < 0.5
    critical = [v for v in grade.verdicts if v.critical]
    assert critical and any(v.status == "not_met" for v in critical)
    assert all(v.justification for v in critical)
