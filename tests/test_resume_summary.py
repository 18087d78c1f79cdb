"""A run killed with SIGKILL while an LLM judge is at work, then resumed, writes the summary an
uninterrupted run writes, field for field: judge calls, cache hits and judge tokens included, though
the killed attempt paid for some verdicts that the resume finds in the verdict cache (issue #31), and
with ``--model-cache`` for model responses the resume finds in the model-call cache."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import write_task
from support.cli import openai_env, start_vtb, vtb
from support.openai_server import OpenAIServer
from support.scripted_vision import VisionModel
from support.together import together

AGENT, JUDGE = "vision-test", "judge-test"
TASKS = 4
SLOW_RUBRIC = "Mentions the corner"
"""The criterion whose judge call hangs in the attempt that is killed (task t1 only)."""
RUBRICS = {
    "r1": {"description": "Says 42", "weight": 5, "critical": "yes", "check": {"type": "number", "value": 42}},
    "r2": {"description": "Is concise", "weight": 1, "critical": "no"},
    "r3": {"description": SLOW_RUBRIC, "weight": 2, "critical": "no"},
}


def write_tasks(root: Path) -> None:
    """``TASKS`` single-turn tasks, each with a checked rubric and two for the LLM judge."""
    for i in range(TASKS):
        folder = write_task(root, f"t{i}")
        task = json.loads((folder / "task.json").read_text())
        task["turns"][0]["rubrics"] = RUBRICS
        task["turns"][0]["prompt"] += f" (t{i})"  # each task's judge prompt its own
        (folder / "task.json").write_text(json.dumps(task))


def criterion(body: dict[str, Any]) -> str:
    return json.dumps(body["messages"])


class Server:
    """The agent (scripted vision model) and the judge (met for r2, not met for r3), with a per-call
    usage that differs by rubric; the judge call of ``SLOW_RUBRIC`` on task t1 hangs while ``hold``
    is set (the attempt to kill)."""

    def __init__(self, hold: bool) -> None:
        self.vision = VisionModel()
        self.held = threading.Event()
        self.release = threading.Event()
        self.hold = hold

    def __call__(self, body: dict[str, Any]) -> Any:
        if body["model"] != JUDGE:
            return self.vision(body)
        text = criterion(body)
        if self.hold and SLOW_RUBRIC in text and "(t1)" in text:
            self.held.set()
            self.release.wait(120)
            return 500
        verdict = "not_met" if SLOW_RUBRIC in text else "met"
        tokens = 7 if SLOW_RUBRIC in text else 11
        return {"content": json.dumps({"verdict": verdict, "justification": "checked"}),
                "usage": {"prompt_tokens": 100 + tokens, "completion_tokens": tokens,
                          "total_tokens": 100 + 2 * tokens}}


def stored_verdicts(cache: Path) -> int:
    """Verdicts in the verdict cache file (0 while it or its table does not exist)."""
    if not cache.exists():
        return 0
    with sqlite3.connect(f"file:{cache}?mode=ro", uri=True, timeout=5) as db:
        if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'verdicts'").fetchone() is None:
            return 0
        return int(db.execute("SELECT count(*) FROM verdicts").fetchone()[0])


@pytest.mark.slow
@pytest.mark.parametrize("model_cache", [False, True], ids=["verdict-cache", "and-model-cache"])
def test_sigkill_while_judging_then_resume_writes_the_uninterrupted_runs_summary(tmp_path, model_cache):
    root = tmp_path / "tasks"
    write_tasks(root)
    whole, killed = tmp_path / "whole", tmp_path / "killed"

    def run_args(out: Path, *more: str) -> list[str | Path]:
        cache = ["--model-cache", out.with_suffix(".model_cache.sqlite")] if model_cache else []
        return ["run", "--tasks", root, "--model", f"openai:{AGENT}", "--judge", f"openai:{JUDGE}", "--out", out,
                "--concurrency", "1", *cache, *more]

    def uninterrupted() -> subprocess.CompletedProcess[str]:
        with OpenAIServer(Server(hold=False)) as server:
            return vtb(*run_args(whole), env=openai_env(server.base_url))

    def killed_then_resumed() -> tuple[subprocess.CompletedProcess[str], list[Any], list[Any]]:
        holding = Server(hold=True)
        with OpenAIServer(holding) as server:
            process = start_vtb(*run_args(killed), env=openai_env(server.base_url), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
            try:
                assert holding.held.wait(180), "the judge call to hold never came"
                # t0's two verdicts and t1's fast one (r2) are stored: paid for by this attempt
                deadline = time.monotonic() + 60
                while stored_verdicts(killed / "judge_cache.sqlite") < 3 and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert stored_verdicts(killed / "judge_cache.sqlite") == 3
            finally:
                process.send_signal(signal.SIGKILL)
                process.wait(timeout=30)
                holding.release.set()
        written = [json.loads(line)["task_id"] for line in (killed / "results.jsonl").read_text().splitlines()]
        assert written == ["t0"], "t1 was being judged when the run was killed"

        with OpenAIServer(Server(hold=False)) as server:
            resumed = vtb(*run_args(killed, "--resume"), env=openai_env(server.base_url))
            return (resumed, [body for body in server.requests if body["model"] == JUDGE],
                    [body for body in server.requests if body["model"] == AGENT])

    # side by side: each run has its own servers and run directory
    done, (resumed, judge_requests, agent_requests) = together(uninterrupted, killed_then_resumed)
    assert done.returncode == 0, done.stderr
    assert resumed.returncode == 0, resumed.stderr
    assert len(judge_requests) == 2 * (TASKS - 1) - 1  # t1's r2 came from the cache: paid for before the kill
    # t1's episode (a crop, then the answer) was paid for before the kill too: with a model cache it is replayed
    assert len(agent_requests) == 2 * (TASKS - 1) - (2 if model_cache else 0)

    expected = json.loads((whole / "summary.json").read_text())
    got = json.loads((killed / "summary.json").read_text())
    assert expected["judge"]["calls"] == 2 * TASKS and expected["judge"]["cache_hits"] == 0
    assert expected["usage"]["judge"]["calls"] == 2 * TASKS
    assert got == expected  # every field: scores, outcomes, judge counts, token usage, cost


def test_a_cached_verdict_counts_as_a_call_only_for_the_pass_task_and_epoch_that_paid_for_it(tmp_path, monkeypatch):
    """The verdict cache's bookkeeping (vtb_agents/judges/cache.py) with a real LLM judge: a verdict
    found again by the grading pass, task and epoch that paid for it, in a new attempt, is that call
    (its usage counted again, no request sent); found by anyone else, or twice in one attempt, it is
    a cache hit that costs nothing."""
    from vtb_agents.runner.plan import plan_judge
    from vtb_agents.judges.cache import CachedJudge, JudgeCache
    from vtb_agents.models.usage import track_usage
    from vtb_agents.tasks import load_tasks

    for task_id in ("t-a", "t-b"):  # the same content: the same judge prompt, the same cache key
        write_task(tmp_path / "tasks", task_id)
    first, twin = load_tasks(tmp_path / "tasks")
    turn, rubric = next((t, r) for t, r in first.rubrics if r.check is None)
    with OpenAIServer(Server(hold=False)) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        judge, cache = plan_judge(f"openai:{JUDGE}").judge, JudgeCache(tmp_path / "judge_cache.sqlite")

        def ask(cached: CachedJudge, task: Any = first) -> tuple[bool, int, int]:
            with track_usage() as usage:
                judgement = cached.judge(task=task, turn=turn, rubric=rubric, answer="The number is 42.")
            return judgement.cached, usage.total.calls, usage.total.input_tokens

        attempt = CachedJudge(judge, cache, grading="run-1")
        paid = ask(attempt)
        assert paid[:2] == (False, 1) and paid[2] > 0 and len(server.requests) == 1
        assert ask(attempt) == (True, 0, 0)  # asked twice in one attempt: the second is a hit
        assert ask(CachedJudge(judge, cache, grading="run-1")) == paid  # the resumed attempt: the same call
        assert ask(CachedJudge(judge, cache, grading="run-1"), twin) == (True, 0, 0)  # another task's
        assert ask(CachedJudge(judge, cache, grading="regrade-1")) == (True, 0, 0)  # another pass's
        assert ask(CachedJudge(judge, cache)) == (True, 0, 0)  # outside a run directory
        assert ask(CachedJudge(judge, cache, grading="run-1").for_epoch(2))[:2] == (False, 1)  # its own key
        assert len(server.requests) == 2
        cache.close()
