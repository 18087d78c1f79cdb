"""The outcomes no other test reaches, each end to end through the real `vtb run`: a sandbox that
cannot start (refused before the first task; during a task, ``sandbox_error``), a checkpoint
database another process keeps locked (``storage_error``), an agent that never stops calling
tools (``step_limit``) and a bug in the agent's own code (``harness_error``). Infrastructure
outcomes leave the run incomplete (exit 3) until ``--resume --retry-errors`` runs those tasks
again; the step limit is the model's doing and is graded like any unanswered turn (docs/concepts/outcomes.md).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import write_task
from support.cli import PROJECT, checkout_env, vtb

INCOMPLETE = 3  # docs/concepts/outcomes.md: `vtb run` exits 3 while infrastructure failures leave tasks ungraded




def summary_of(run: Path) -> dict[str, Any]:
    return json.loads((run / "summary.json").read_text())


def outcomes_of(run: Path) -> dict[str, str]:
    """Each task's outcome, later lines superseding earlier ones (as --retry-errors appends)."""
    lines = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    return {r["task_id"]: r["outcome"] for r in lines}


def two_tasks(tmp_path: Path) -> Path:
    root = tmp_path / "tasks"
    write_task(root, "t-a")
    write_task(root, "t-b")
    return root


def test_a_subprocess_imports_vtb_agents_from_this_checkout(tmp_path):
    decoy = tmp_path / "vtb_agents"  # a stale copy next to the test's own modules must not win
    decoy.mkdir()
    (decoy / "__init__.py").write_text("raise ImportError('the decoy copy was imported')\n")
    done = subprocess.run([sys.executable, "-c", "import vtb_agents; print(vtb_agents.__file__)"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path / "..",
                          env=checkout_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == PROJECT / "vtb_agents" / "__init__.py"


def test_a_sandbox_that_cannot_start_refuses_the_run_before_its_first_task(tmp_path):
    root = two_tasks(tmp_path)
    run = tmp_path / "run"
    empty_path = tmp_path / "bin"  # bwrap is asked for but not on PATH: the sandbox cannot start
    empty_path.mkdir()
    failed = vtb("run", "--tasks", str(root), "--model", "replay", "--out", str(run), cwd=tmp_path,
                 path=[tmp_path], env={"PATH": str(empty_path), "VTB_SANDBOX_ISOLATION": "bwrap"})
    assert failed.returncode == 2, failed.stderr[-3000:]  # the check before the run (docs/how-to/doctor.md)
    errors = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "sandbox 'local'" in errors[0] and "bwrap" in errors[0], failed.stderr
    assert not run.exists()


GOES_DOWN = """
import os
from vtb_agents.sandbox import LocalSandbox, SandboxError


class GoesDown(LocalSandbox):
    \"\"\"The local sandbox whose service goes down (SANDBOX_DOWN set) after the check before the run.\"\"\"

    built = 0

    def __init__(self, workdir=None, **options):
        GoesDown.built += 1
        if GoesDown.built > 1 and os.environ.get("SANDBOX_DOWN"):
            raise SandboxError("the sandbox service is down")
        super().__init__(workdir, **options)
"""


@pytest.mark.slow
def test_a_sandbox_that_cannot_start_during_a_task_is_a_sandbox_error_until_retried(tmp_path):
    root = two_tasks(tmp_path)
    run = tmp_path / "run"
    (tmp_path / "goes_down.py").write_text(GOES_DOWN)
    flags = ["--tasks", str(root), "--model", "replay", "--sandbox", "goes_down:GoesDown", "--out", str(run)]
    failed = vtb("run", *flags, cwd=tmp_path, path=[tmp_path], env={"SANDBOX_DOWN": "1"})
    assert failed.returncode == INCOMPLETE, failed.stderr[-3000:]
    summary = summary_of(run)
    assert summary["outcomes"] == {"sandbox_error": 2}
    assert (summary["complete"], summary["graded"], summary["apr"]) == (False, 0, None)
    assert summary["infrastructure_errors"] == {"count": 2, "task_ids": ["t-a", "t-b"]}
    error = json.loads((run / "results.jsonl").read_text().splitlines()[0])["episode"]["error"]
    assert error.startswith("SandboxError:") and "the sandbox service is down" in error, error

    retried = vtb("run", *flags, "--resume", "--retry-errors", cwd=tmp_path, path=[tmp_path])
    assert retried.returncode == 0, retried.stderr[-3000:]
    assert outcomes_of(run) == {"t-a": "answered", "t-b": "answered"}
    assert (summary_of(run)["complete"], summary_of(run)["apr"]) == (True, 1.0)


@pytest.mark.slow
def test_a_locked_checkpoint_database_is_a_storage_error_until_retried(tmp_path):
    root = two_tasks(tmp_path)
    run = tmp_path / "run"
    first = vtb("run", "--tasks", str(root), "--model", "replay", "--limit", "1", "--out", str(run), cwd=tmp_path,
                path=[tmp_path])
    assert first.returncode == 0, first.stderr[-3000:]
    holder = sqlite3.connect(run / "checkpoints.sqlite", isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock (a backup, a second tool)
        locked = vtb("run", "--tasks", str(root), "--model", "replay", "--out", str(run), "--resume", cwd=tmp_path,
                     path=[tmp_path])
    finally:
        holder.rollback()
        holder.close()
    assert locked.returncode == INCOMPLETE, locked.stderr[-3000:]
    assert outcomes_of(run) == {"t-a": "answered", "t-b": "storage_error"}
    summary = summary_of(run)
    assert summary["outcomes"] == {"answered": 1, "storage_error": 1}
    assert summary["infrastructure_errors"] == {"count": 1, "task_ids": ["t-b"]} and summary["apr"] == 1.0

    retried = vtb("run", "--tasks", str(root), "--model", "replay", "--out", str(run), "--resume", "--retry-errors",
                  cwd=tmp_path, path=[tmp_path])
    assert retried.returncode == 0, retried.stderr[-3000:]
    assert outcomes_of(run) == {"t-a": "answered", "t-b": "answered"}
    assert summary_of(run)["complete"] is True


LOOPING_AGENT = '''
from typing import Any, TypedDict

from langgraph.graph import START, StateGraph


class State(TypedDict):
    messages: list[Any]


def build(tools, *, system_prompt):
    """An agent whose graph keeps stepping and never ends its turn (no model call to cap): it runs
    until the episode's step (recursion) limit."""
    graph = StateGraph(State)
    graph.add_node("again", lambda state: {"messages": state["messages"]})
    graph.add_edge(START, "again")
    graph.add_edge("again", "again")
    return graph.compile()
'''


@pytest.mark.slow
def test_an_agent_that_never_ends_its_turn_reaches_the_step_limit_and_is_graded(tmp_path):
    root = two_tasks(tmp_path)
    (tmp_path / "looping_agent.py").write_text(LOOPING_AGENT)
    run = tmp_path / "run"
    done = vtb("run", "--tasks", str(root), "--model", "agent:looping_agent:build", "--max-tool-rounds", "2",
               "--out", str(run), cwd=tmp_path, path=[tmp_path])
    assert done.returncode == 0, done.stderr[-3000:]  # the model's doing: graded, the run complete
    summary = summary_of(run)
    assert summary["outcomes"] == {"step_limit": 2}
    assert (summary["complete"], summary["graded"], summary["apr"], summary["ars"]) == (True, 2, 0.0, 0.0)
    result = json.loads((run / "results.jsonl").read_text().splitlines()[0])
    assert result["episode"]["error"].startswith("GraphRecursionError:")
    # the unanswered turn fails both rubrics (weights 5 and 1): score 0 / 6, not ungraded
    assert (result["grade"]["graded"], result["grade"]["score"], result["grade"]["passed"]) == (True, 0.0, False)
    assert {v["status"] for v in result["grade"]["verdicts"]} == {"not_met"}


BROKEN_AGENT = '''
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda

def build(tools):
    def answer(state):
        return {"messages": [*state["messages"], AIMessage(state["answer_key"])]}  # a bug: no such key
    return RunnableLambda(answer)
'''
FIXED_AGENT = BROKEN_AGENT.replace('state["answer_key"]', '"The number is 42."')


@pytest.mark.slow
def test_a_bug_in_the_harness_is_a_harness_error_until_fixed_and_retried(tmp_path):
    root = two_tasks(tmp_path)
    agent = tmp_path / "broken_agent.py"
    agent.write_text(BROKEN_AGENT)
    run = tmp_path / "run"
    failed = vtb("run", "--tasks", str(root), "--model", "agent:broken_agent:build", "--out", str(run), cwd=tmp_path,
                 path=[tmp_path])
    assert failed.returncode == INCOMPLETE, failed.stderr[-3000:]
    summary = summary_of(run)
    assert summary["outcomes"] == {"harness_error": 2} and summary["ungraded"] == 2 and summary["apr"] is None
    result = json.loads((run / "results.jsonl").read_text().splitlines()[0])
    assert result["episode"]["error"] == "KeyError: 'answer_key'"
    assert "Traceback" in result["episode"]["traceback"]

    agent.write_text(FIXED_AGENT)
    retried = vtb("run", "--tasks", str(root), "--model", "agent:broken_agent:build", "--out", str(run), "--resume",
                  "--retry-errors", cwd=tmp_path, path=[tmp_path])
    assert retried.returncode == 0, retried.stderr[-3000:]
    assert outcomes_of(run) == {"t-a": "answered", "t-b": "answered"}
    assert (summary_of(run)["complete"], summary_of(run)["apr"]) == (True, 1.0)
