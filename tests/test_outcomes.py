"""Every task in the denominator: outcomes, incomplete runs, --retry-errors, bounded requests.

Each test runs the real `vtb` command (``python -m vtb_agents``) with a model served by a local
OpenAI-compatible server (tests/support/openai_server.py), the real graphs and a real local sandbox.
"""

from __future__ import annotations

import copy
import json
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from conftest import write_task
from support.openai_server import OpenAIServer
from support.cli import openai_env, vtb
from support.together import together
from vtb_agents.runner.run import EXIT_INCOMPLETE

ANSWER = "The number is 42."




def first_prompt(body: dict[str, Any]) -> str:
    """The text of the task's first user message (each test task starts with a keyword)."""
    for message in body["messages"]:
        if message["role"] == "user":
            content = message["content"]
            return content if isinstance(content, str) else " ".join(
                part.get("text", "") for part in content if part.get("type") == "text")
    return ""


def last_user_text(body: dict[str, Any]) -> str:
    users = [m for m in body["messages"] if m["role"] == "user"]
    content = users[-1]["content"] if users else ""
    return content if isinstance(content, str) else " ".join(
        part.get("text", "") for part in content if part.get("type") == "text")


def tasks_with_keywords(root: Path, keywords: list[str]) -> Path:
    for keyword in keywords:
        write_task(root, f"t-{keyword.lower()}", turns=[{
            "prompt": f"{keyword}: what number is printed in the bottom-right corner?", "images": [0],
            "golden_answer": ANSWER, "rubrics": RUBRICS}])
    return root


RUBRICS = {"r1": {"description": "Says 42", "weight": 5, "critical": "yes", "category": ["visual understanding"],
                  "check": {"type": "number", "value": 42}},
           "r2": {"description": "Names the number", "weight": 1, "critical": "no", "category": ["reasoning"],
                  "check": {"type": "contains_any", "values": ["number"]}}}


def summary_of(run: Path) -> dict[str, Any]:
    return json.loads((run / "summary.json").read_text())


def results_of(run: Path) -> dict[str, dict[str, Any]]:
    lines = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    return {r["task_id"]: r for r in lines}  # later lines supersede earlier ones


@pytest.mark.slow
def test_timeout_round_cap_and_answers_are_all_in_the_denominator(tmp_path):
    root = tasks_with_keywords(tmp_path / "tasks", ["ANSWER-A", "ANSWER-B", "ROUNDCAP"])
    write_task(root, "t-timeout", category="Progressive Visual Reasoning", turns=[
        {"prompt": "TIMEOUT: what number is printed?", "images": [0], "golden_answer": ANSWER, "rubrics": RUBRICS},
        {"prompt": "And now wait for it.", "images": [], "golden_answer": ANSWER, "rubrics": RUBRICS}])

    def respond(body: dict[str, Any]) -> Any:
        prompt = first_prompt(body)
        if "tools" not in body:  # asked to answer without tools (at the round cap)
            return "I ran out of tool rounds."
        if prompt.startswith("ROUNDCAP"):
            return {"content": None, "tool_calls": [{"name": "calculator", "arguments": {"expression": "1+1"}}]}
        if prompt.startswith("TIMEOUT") and last_user_text(body).startswith("And now"):
            if body["messages"][-1]["role"] == "tool":
                return "still waiting"
            return {"content": None, "tool_calls": [{"name": "python_interpreter",
                                                     "arguments": {"code": "import time\ntime.sleep(120)"}}]}
        return ANSWER

    with OpenAIServer(respond) as server:
        done = vtb("run", "--tasks", str(root), "--model", "openai:scripted", "--judge", "rule",
                   "--max-tool-rounds", "2", "--task-timeout", "8", "--concurrency", "4",
                   "--out", str(tmp_path / "run"), env=openai_env(server.base_url, "test-key"), timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = summary_of(tmp_path / "run")
    assert summary["outcomes"] == {"answered": 2, "task_timeout": 1, "tool_round_cap": 1}
    assert (summary["tasks"], summary["graded"], summary["ungraded"]) == (4, 4, 0)
    assert summary["complete"] is True and summary["infrastructure_errors"] == {"count": 0, "task_ids": []}
    results = results_of(tmp_path / "run")
    timed_out = results["t-timeout"]
    assert [t["answer"] for t in timed_out["episode"]["turns"]] == [ANSWER]  # the finished turn is kept
    assert timed_out["grade"]["score"] == pytest.approx(6 / 12)  # turn 1 met, turn 2 unanswered: not met
    assert results["t-roundcap"]["grade"]["passed"] is False
    # the paper's formula over all four tasks
    assert summary["apr"] == pytest.approx((1 + 1 + 0 + 0) / 4)
    assert summary["ars"] == pytest.approx((1 + 1 + results["t-roundcap"]["grade"]["score"] + 0.5) / 4)


@pytest.mark.slow
def test_provider_outage_leaves_the_run_incomplete_until_retried(tmp_path):
    root = tasks_with_keywords(tmp_path / "tasks", ["ONE", "TWO"])
    state = {"healthy": False}

    def respond(body: dict[str, Any]) -> Any:
        return ANSWER if state["healthy"] else 500

    run, clean = tmp_path / "run", tmp_path / "fresh"

    def fresh_run() -> subprocess.CompletedProcess[str]:
        """The run that never failed, against a provider of its own that is always healthy."""
        with OpenAIServer(lambda body: ANSWER) as healthy:
            return vtb("run", "--tasks", str(root), "--model", "openai:scripted", "--concurrency", "2",
                       "--out", str(clean), env=openai_env(healthy.base_url, "test-key"), timeout=240)

    with OpenAIServer(respond) as server:
        failed, fresh = together(  # the outage's backoff and the clean run side by side: they share nothing
            lambda: vtb("run", "--tasks", str(root), "--model", "openai:scripted", "--concurrency", "2",
                        "--out", str(run), env=openai_env(server.base_url, "test-key"), timeout=240),
            fresh_run)
        assert failed.returncode == EXIT_INCOMPLETE, failed.stderr[-3000:]
        assert "incomplete" in failed.stderr and "--retry-errors" in failed.stderr
        summary = summary_of(run)
        assert summary["complete"] is False and summary["ungraded"] == 2 and summary["apr"] is None
        assert summary["infrastructure_errors"] == {"count": 2, "task_ids": ["t-one", "t-two"]}
        assert summary["outcomes"] == {"provider_error": 2}
        assert "INCOMPLETE" in failed.stdout  # the headline says so, and the report in red
        assert 'class="incomplete-box">INCOMPLETE: 2 task(s)' in (run / "report.html").read_text()

        resumed = vtb("run", "--tasks", str(root), "--model", "openai:scripted", "--out", str(run), "--resume",
                      env=openai_env(server.base_url, "test-key"), timeout=240)
        # --resume alone keeps finished (failed) tasks
        assert resumed.returncode == EXIT_INCOMPLETE, resumed.stderr[-3000:]

        state["healthy"] = True
        retried = vtb("run", "--tasks", str(root), "--model", "openai:scripted", "--concurrency", "2",
                      "--out", str(run), "--resume", "--retry-errors", env=openai_env(server.base_url, "test-key"),
                      timeout=240)
        assert retried.returncode == 0, retried.stderr[-3000:]
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert summary_of(run) == summary_of(clean)
    assert summary_of(run)["apr"] == 1.0 and summary_of(run)["complete"] is True
    lines = (run / "results.jsonl").read_text().splitlines()
    assert len(lines) == 4  # append-only: the retried tasks' new lines supersede the old ones
    assert {r["outcome"] for r in results_of(run).values()} == {"answered"}
    report = (run / "report.html").read_text()
    assert "INCOMPLETE" not in report


@pytest.mark.slow
def test_requests_are_bounded_and_malformed_responses_retried(tmp_path):
    """--task-timeout 12 --request-timeout 4 over a server that hangs some requests and garbles
    others: hung requests are cut off and retried, garbage and empty choices are retried; a task
    whose every request hangs got no answer from the provider at all: the provider's failure, the
    run incomplete (docs/concepts/outcomes.md, blame)."""
    root = tasks_with_keywords(tmp_path / "tasks", ["HANG-ONCE", "HANG-ALWAYS", "GARBAGE", "EMPTY", "FINE"])
    release = threading.Event()
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def respond(body: dict[str, Any]) -> Any:
        keyword = first_prompt(body).split(":")[0]
        with lock:
            seen[keyword] = seen.get(keyword, 0) + 1
            count = seen[keyword]
        if keyword == "HANG-ALWAYS" or (keyword == "HANG-ONCE" and count == 1):
            release.wait(120)  # longer than the request timeout: the client must give up first
            return ANSWER
        if keyword == "GARBAGE" and count == 1:
            return ("raw", "{this is not json")
        if keyword == "EMPTY" and count == 1:
            return ("raw", json.dumps({"id": "x", "object": "chat.completion", "created": 1, "model": "m",
                                       "choices": []}))
        return ANSWER

    try:
        with OpenAIServer(respond) as server:
            done = vtb("run", "--tasks", str(root), "--model", "openai:scripted", "--concurrency", "5",
                       "--task-timeout", "12", "--request-timeout", "4", "--out", str(tmp_path / "run"),
                       env=openai_env(server.base_url, "test-key"), timeout=110)
    finally:
        release.set()
    assert done.returncode == EXIT_INCOMPLETE, done.stderr[-3000:]
    results = results_of(tmp_path / "run")
    outcomes = {task_id: r["outcome"] for task_id, r in results.items()}
    assert outcomes == {"t-hang-once": "answered", "t-hang-always": "provider_error", "t-garbage": "answered",
                        "t-empty": "answered", "t-fine": "answered"}
    assert seen["HANG-ONCE"] == 2 and seen["GARBAGE"] == 2 and seen["EMPTY"] == 2
    assert 2 <= seen["HANG-ALWAYS"] <= 4  # 4 s per attempt and 1 s, 2 s of backoff, then the 12 s task limit
    summary = summary_of(tmp_path / "run")
    assert summary["infrastructure_errors"] == {"count": 1, "task_ids": ["t-hang-always"]}
    assert summary["ungraded"] == 1 and summary["apr"] == pytest.approx(4 / 4)


@pytest.mark.slow
def test_grade_re_asks_failed_judge_calls(tmp_path):
    root = tasks_with_keywords(tmp_path / "tasks", ["JUDGED"])
    no_check = copy.deepcopy(RUBRICS)
    del no_check["r2"]["check"]  # judged by the LLM
    task_file = root / "t-judged" / "task.json"
    task = json.loads(task_file.read_text())
    task["turns"][0]["rubrics"] = no_check
    task_file.write_text(json.dumps(task))
    state = {"healthy": False}

    def respond(body: dict[str, Any]) -> Any:
        if not state["healthy"]:
            return 503
        return json.dumps({"verdict": "met", "justification": "It names the number."})

    run = tmp_path / "run"
    with OpenAIServer(respond) as server:
        failed = vtb("run", "--tasks", str(root), "--model", "replay", "--judge", "openai:judge", "--out", str(run),
                     env=openai_env(server.base_url, "test-key"), timeout=240)
        assert failed.returncode == EXIT_INCOMPLETE, failed.stderr[-3000:]
        assert summary_of(run)["outcomes"] == {"judge_error": 1}
        state["healthy"] = True
        regraded = vtb("grade", str(run), "--judge", "openai:judge", env=openai_env(server.base_url, "test-key"),
                       timeout=240)
    assert regraded.returncode == 0, regraded.stderr[-3000:]
    summary = summary_of(run)
    assert summary["complete"] is True and summary["graded"] == 1 and summary["outcomes"] == {"answered": 1}
