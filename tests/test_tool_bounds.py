"""A tool of your own (``--tool``) is held to the built-in tools' bounds, through the real `vtb run`:
its text output is capped as code output is (``OUTPUT_CAP_CHARS``), a call gets the code tools'
time limit (``--code-timeout``; then the model reads an error), and no call outlives the task's ``--task-timeout``
(docs/how-to/write-a-plugin.md)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from support.cli import openai_env, vtb
from support.openai_server import OpenAIServer

from vtb_agents.sandbox.base import OUTPUT_CAP_CHARS

TASK = "ht-engineering-circuit"  # one turn of the bundled sample suite
TOOLS = '''
import time

from langchain_core.tools import tool


@tool
def flood(word: str) -> str:
    """Describe a word at great length."""
    return "x" * 60_000_000


@tool
def stall(word: str) -> str:
    """Look a word up in a service that never answers."""
    time.sleep(3600)
    return "never"
'''


def calls(*names: str) -> Any:
    """A model calling each tool of ``names`` in turn, then answering with the tool results' sizes."""

    def respond(body: dict[str, Any]) -> Any:
        results = [m for m in body["messages"] if m["role"] == "tool"]
        if len(results) < len(names):
            return {"tool_calls": [{"name": names[len(results)], "arguments": {"word": "circuit"}}]}
        return "Final answer: " + ", ".join(str(len(m["content"])) for m in results)

    return respond


def vtb_run(tmp_path: Path, server: OpenAIServer, out: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    package = tmp_path / "lib" / "slowtools"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "tools.py").write_text(TOOLS)
    return vtb("run", "--tasks", "sample", "--task-id", TASK, "--model", "openai:gpt-4o", "--out", out,
               "--tool", "slowtools.tools:flood", "--tool", "slowtools.tools:stall", *flags,
               path=[tmp_path / "lib"], env=openai_env(server.base_url), cwd=tmp_path)


def tool_messages(server: OpenAIServer) -> list[dict[str, Any]]:
    return [m for m in server.requests[-1]["messages"] if m["role"] == "tool"]


@pytest.mark.slow
def test_a_plugin_tools_output_is_capped_and_a_stalled_call_is_an_error_the_model_reads(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with OpenAIServer(calls("flood", "stall")) as server:
        started = time.monotonic()
        done = vtb_run(tmp_path, server, out, "--code-timeout", "5")  # a tool of yours gets the code tools' limit
        took = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    assert took < 200, f"the run took {took:.0f} s"  # not the tool's hour
    flooded, stalled = tool_messages(server)
    assert len(flooded["content"]) <= OUTPUT_CAP_CHARS + 100 and "more characters cut]" in flooded["content"]
    assert json.loads(stalled["content"]) == {"error": "stall gave no result within its time limit (5.0 s)"}
    assert json.loads((out / "run.json").read_text())["config"]["episode"]["code_timeout_s"] == 5.0
    result = json.loads((out / "results.jsonl").read_text())
    assert result["outcome"] == "answered"  # the model read the error and answered: its own doing
    outputs = {call["name"]: call for call in result["episode"]["turns"][0]["tool_calls"]}
    assert not outputs["stall"]["ok"] and len(outputs["flood"]["output"]) <= OUTPUT_CAP_CHARS + 100
    transcript_bytes = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    assert transcript_bytes < 20_000_000, transcript_bytes  # the run directory holds no 60 MB output


@pytest.mark.slow
def test_a_stalled_plugin_tool_ends_with_the_task_timeout(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with OpenAIServer(calls("stall")) as server:
        started = time.monotonic()
        done = vtb_run(tmp_path, server, out, "--task-timeout", "8")
        took = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    assert took < 200, f"the run took {took:.0f} s"  # not --code-timeout's 60 s per call, nor the hour
    result = json.loads((out / "results.jsonl").read_text())
    assert result["outcome"] == "task_timeout", result["episode"]["error"]
    assert result["duration_s"] < 60
