"""The sandbox's Python state lasts the whole episode for a user's agent, as for the built-in loop.

A ``create_agent`` agent runs its tools in pool threads that end after each turn; the sandbox's
worker must outlive them (``sandbox/spawner.py``). Runs the real ``vtb`` command against a local
OpenAI-compatible server whose scripted model uses in turn 2 a variable its turn-1 code defined.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.openai_server import OpenAIServer
from test_agent_seam import run_cli

TURN_CODE = ["answer = 41\nprint('defined')", "print(answer + 1)"]


def two_turns(body: dict) -> dict | str:
    """One code call per turn (turn 1 defines ``answer``, turn 2 uses it), then an answer."""
    messages = body["messages"]
    if messages[-1]["role"] == "tool" or not body.get("tools") or body.get("tool_choice") == "none":
        return "done"
    earlier = sum(1 for m in messages if m["role"] == "assistant" and m.get("tool_calls"))
    return {"content": "", "tool_calls": [{"id": f"call_{earlier}", "name": "python_image_processing",
                                           "arguments": {"code": TURN_CODE[min(earlier, 1)]}}]}


@pytest.mark.slow
@pytest.mark.parametrize("model", ["agent:examples.create_agent_example:build", "openai:vision-test"])
def test_turn_two_code_sees_the_variables_of_turn_one(model: str, tmp_path: Path) -> None:
    with OpenAIServer(two_turns) as server:
        done = run_cli(tmp_path / "run", server, "--model", model, tasks=["pr-sports-boxscore"])
    assert done.returncode in (0, 1), done.stderr[-2000:]
    (line,) = [json.loads(text) for text in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    turns = line["episode"]["turns"]
    assert [[call["args"]["code"] for call in turn["tool_calls"]] for turn in turns] == [[code] for code in TURN_CODE]
    outputs = [json.loads(turn["tool_calls"][0]["output"]) for turn in turns]
    assert outputs == [{"ok": True, "stdout": "defined\n"}, {"ok": True, "stdout": "42\n"}]
    assert all(turn["tool_calls"][0]["ok"] for turn in turns)
