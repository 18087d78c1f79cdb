"""Failure taxonomy: an LLM classifier over the local OpenAI-compatible server, on real replay runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import typer
from conftest import write_task
from langchain_core.runnables import RunnableLambda
from langchain_openai import ChatOpenAI
from support.openai_server import OpenAIServer
from typer.testing import CliRunner

from vtb_agents.analysis.failures import FAILURES_FILE, FailureClassifier, classify_failures
from vtb_agents.runner.plan import classifier_model
from vtb_agents.cli.analyze import analyze_app
from vtb_agents.runner.run import RunConfig, RunError, run_suite
from vtb_agents.tasks import load_tasks


def edit_turn(folder: Path, **changes: object) -> None:
    """Change fields of the first turn of a written task (what makes replay fail a task)."""
    data = json.loads((folder / "task.json").read_text())
    data["turns"][0].update(changes)
    (folder / "task.json").write_text(json.dumps(data))


@pytest.fixture(scope="module")
def task_root(tmp_path_factory) -> Path:
    """ok passes; misread and arith fail their critical check; nocheck is ungraded under the rule judge."""
    root = tmp_path_factory.mktemp("failure-tasks")
    write_task(root, "ok")
    edit_turn(write_task(root, "misread"), golden_answer="The number is 47.")
    edit_turn(write_task(root, "arith", category="Hybrid Tool Reasoning", domain="maths"),
              golden_answer="The total is 40.")
    folder = write_task(root, "nocheck")
    rubrics = json.loads((folder / "task.json").read_text())["turns"][0]["rubrics"]
    del rubrics["r1"]["check"]
    edit_turn(folder, rubrics=rubrics)
    return root


@pytest.fixture(scope="module")
def replay_run(task_root, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("runs") / "replay"
    summary = run_suite(load_tasks(task_root), RunConfig(model="replay", tasks=str(task_root)), out)
    assert summary.tasks == 4 and summary.graded == 3
    return out


@pytest.fixture
def run_dir(replay_run, tmp_path) -> Path:
    """A private copy of the replay run (each test writes its own failures.json)."""
    return Path(shutil.copytree(replay_run, tmp_path / "run"))


def label(category: str, why: str = "The model misread the digit.") -> str:
    return json.dumps({"category": category, "explanation": why})


def by_task(request: dict) -> str:
    prompt = request["messages"][-1]["content"]
    return "misread" if "Reference answer: The number is 47." in prompt else "arith"


def classifier(server: OpenAIServer, attempts: int = 3) -> FailureClassifier:
    model = ChatOpenAI(model="classifier-1", base_url=server.base_url, api_key="test-key", temperature=0,
                       max_retries=0)
    return FailureClassifier(model, "openai:classifier-1", attempts=attempts, backoff_initial_s=0.01,
                             backoff_max_s=0.02)


def test_failed_tasks_are_classified_and_written(run_dir):
    replies = {"misread": label("visual_perception"), "arith": label("calculation", "40 is a wrong sum.")}
    with OpenAIServer(lambda request: replies[by_task(request)]) as server:
        report = classify_failures(run_dir, classifier(server))
    assert len(server.requests) == 2  # ok passed, nocheck is ungraded: neither goes to the classifier
    request = next(r for r in server.requests if by_task(r) == "misread")
    assert request["model"] == "classifier-1" and request["response_format"]["type"] == "json_schema"
    assert set(request["response_format"]["json_schema"]["schema"]["properties"]) == {"category", "explanation"}
    prompt = request["messages"][-1]["content"]
    assert "Question: What number is printed in the bottom-right corner?" in prompt
    assert "Model answer: The number is 47." in prompt
    assert "- turn 1 r1 (critical, weight 5): Says 42\n  grader: " in prompt
    assert "- turn 1 round 1 python_image_processing [ok]: " in prompt
    assert "visual_perception" in request["messages"][0]["content"] + prompt

    saved = json.loads((run_dir / FAILURES_FILE).read_text())
    assert saved == report.to_dict()
    assert saved["tasks"] == 4 and saved["passed"] == 1 and saved["failed"] == 2
    assert saved["excluded"] == {"episode_error": [], "ungraded": ["nocheck"]}
    assert saved["counts"] == {"visual_perception": 1, "reasoning": 0, "calculation": 1, "other": 0, "error": 0}
    assert saved["by_task_category"] == {
        "hybrid_tool": {"visual_perception": 0, "reasoning": 0, "calculation": 1, "other": 0, "error": 0},
        "region_switch": {"visual_perception": 1, "reasoning": 0, "calculation": 0, "other": 0, "error": 0},
    }
    assert saved["failures"] == [  # in the order of results.jsonl
        {"task_id": "arith", "category": "calculation", "explanation": "40 is a wrong sum.",
         "task_category": "hybrid_tool", "domain": "stem"},
        {"task_id": "misread", "category": "visual_perception", "explanation": "The model misread the digit.",
         "task_category": "region_switch", "domain": "finance"},
    ]
    assert not (run_dir / (FAILURES_FILE + ".tmp")).exists()


@pytest.mark.parametrize("bad", [("raw", "{not json"), "no JSON here", label("perception")])
def test_malformed_replies_are_retried_then_recorded_as_error(run_dir, bad):
    with OpenAIServer(lambda request: label("visual_perception") if by_task(request) == "misread" else bad) as server:
        report = classify_failures(run_dir, classifier(server, attempts=3))
    assert sum(by_task(r) == "arith" for r in server.requests) == 3
    by_id = {f.task_id: f for f in report.failures}
    assert by_id["misread"].category == "visual_perception"
    assert by_id["arith"].category == "error" and "classifier failed after 3 attempts" in by_id["arith"].explanation
    assert report.counts()["error"] == 1
    assert json.loads((run_dir / FAILURES_FILE).read_text())["counts"]["error"] == 1


def test_a_retry_that_succeeds_gives_a_category(run_dir):
    replies = iter([("raw", "oops"), label("reasoning")])
    with OpenAIServer(lambda request: next(replies) if by_task(request) == "arith" else label("other")) as server:
        report = classify_failures(run_dir, classifier(server))
    assert len(server.requests) == 3
    assert report.counts() == {"visual_perception": 0, "reasoning": 1, "calculation": 0, "other": 1, "error": 0}


def test_the_first_retry_waits_backoff_initial_s(run_dir, retry_waits):
    replies = iter([("raw", "oops"), label("reasoning")])
    with OpenAIServer(lambda request: next(replies) if by_task(request) == "arith" else label("other")) as server:
        model = ChatOpenAI(model="classifier-1", base_url=server.base_url, api_key="test-key", max_retries=0)
        report = classify_failures(run_dir, FailureClassifier(model, "openai:classifier-1", backoff_initial_s=0.25,
                                                              backoff_max_s=0.6))
    assert len(server.requests) == 3 and report.counts()["reasoning"] == 1
    assert len(retry_waits) == 1 and 0.25 <= retry_waits[0] <= 0.5  # 0.25 s plus up to 0.25 s of jitter


def broken_agent(tools: list) -> RunnableLambda:
    """An agent factory (``agent:test_failures:broken_agent``) whose agent returns no messages."""
    return RunnableLambda(lambda state: "no messages")


def test_errored_episodes_are_excluded_not_classified(task_root, tmp_path):
    out = tmp_path / "broken"
    run_suite(load_tasks(task_root), RunConfig(model="agent:test_failures:broken_agent", tasks=str(task_root)), out)
    with OpenAIServer(lambda request: label("other")) as server:
        report = classify_failures(out, classifier(server))
    assert server.requests == [] and report.failures == []
    assert report.excluded == {"episode_error": ["arith", "misread", "nocheck", "ok"], "ungraded": []}
    assert json.loads((out / FAILURES_FILE).read_text())["counts"]["error"] == 0


def test_missing_run_and_tasks_are_clear_errors(run_dir, tmp_path):
    def unused() -> FailureClassifier:
        raise AssertionError("no classifier is built for a run that cannot be read")

    with pytest.raises(RunError, match="no such run directory"):
        classify_failures(tmp_path / "nope", unused)
    only_ok = [t for t in load_tasks(json.loads((run_dir / "run.json").read_text())["config"]["tasks"])
               if t.id == "ok"]
    with pytest.raises(RunError, match="not found in the task source: arith, misread"):
        classify_failures(run_dir, unused, tasks=only_ok)
    with pytest.raises(ValueError, match="is not 'provider:model'"):  # decoded by the plan module
        classifier_model("gpt-without-provider")


def cli() -> typer.Typer:
    app = typer.Typer()
    app.add_typer(analyze_app, name="analyze")
    return app


def test_cli_errors_prints_counts_and_writes_failures(run_dir, monkeypatch):
    with OpenAIServer(lambda request: label("visual_perception")) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        result = CliRunner().invoke(cli(), ["analyze", "errors", str(run_dir), "--model", "openai:classifier-1"])
    assert result.exit_code == 0, result.output
    assert {r["model"] for r in server.requests} == {"classifier-1"}
    assert "visual_perception" in result.output and "region_switch" in result.output
    assert "4 task(s): 1 passed, 2 failed; left out: 0 with an errored episode, 1 ungraded" in result.output
    saved = json.loads((run_dir / FAILURES_FILE).read_text())
    assert saved["classifier"] == "openai:classifier-1" and saved["counts"]["visual_perception"] == 2


def test_cli_errors_exit_2_on_bad_input(run_dir, tmp_path):
    runner = CliRunner()
    missing = runner.invoke(cli(), ["analyze", "errors", str(tmp_path / "nope"), "--model", "openai:x"])
    assert missing.exit_code == 2 and "no such run directory" in missing.output
    bad_spec = runner.invoke(cli(), ["analyze", "errors", str(run_dir), "--model", "classifier"])
    assert bad_spec.exit_code == 2 and "is not 'provider:model'" in bad_spec.output
    other = tmp_path / "other-tasks"
    write_task(other, "ok")
    unknown = runner.invoke(cli(), ["analyze", "errors", str(run_dir), "--model", "openai:x", "--tasks", str(other)])
    assert unknown.exit_code == 2 and "not found in the task source" in unknown.output
