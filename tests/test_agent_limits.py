"""A user's agent keeps the run's limits: the same outcomes, rounds and tool descriptions as the built-in loop.

The example agent (examples/create_agent_example.py, a plain ``create_agent`` over its own
``ChatOpenAI``) and the built-in loop run through the real ``vtb`` command against the same
scripted OpenAI-compatible server; the assertions compare what each run recorded and what the
server received.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from support.openai_server import OpenAIServer
from support.together import together
from test_agent_seam import run_cli

AGENT = "agent:examples.create_agent_example:build"
BUILTIN = "openai:vision-test"
CROP = ("from PIL import Image\nimport os\nn = len([f for f in os.listdir('.') if f.startswith('transformed_')])\n"
        "Image.open('image_0.png').crop((0, 0, 40, 30)).save(f'transformed_image_{n}.png')\nprint(n)")


def tool_call(body: dict) -> dict:
    return {"content": "", "tool_calls": [{"id": f"call_{len(body['messages'])}", "name": "python_image_processing",
                                           "arguments": {"code": CROP}}]}


def may_call_tools(body: dict) -> bool:
    """Whether the request lets the model call a tool (as the API does: tools given, tool_choice not "none")."""
    return bool(body.get("tools")) and body.get("tool_choice") != "none"


def persistent(body: dict) -> dict | str:
    """Calls the vision tool whenever it may; answers only when it may not."""
    return tool_call(body) if may_call_tools(body) else "final answer"


def compliant(body: dict) -> dict | str:
    """Calls the vision tool until a result says the round cap is reached, then answers."""
    last = body["messages"][-1]
    capped = last["role"] == "tool" and "Not run: the limit of" in str(last["content"])
    return tool_call(body) if may_call_tools(body) and not capped else "final answer"


def run(model: str, out: Path, respond, *args: str, tasks: list[str]) -> tuple[dict, list[dict]]:
    with OpenAIServer(respond) as server:
        done = run_cli(out, server, "--model", model, *args, tasks=tasks)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    (line,) = [json.loads(text) for text in (out / "results.jsonl").read_text().splitlines()]
    return line["episode"], server.requests


def trace(episode: dict) -> list[tuple]:
    """What a run recorded per turn: status, rounds, and each call's round, name, success and result
    (the images a call saved, or the text of a call that was not run)."""
    return [(turn["status"], turn["tool_rounds"],
             [(call["round"], call["name"], call["ok"],
               json.loads(call["output"])["new_images"] if call["ok"] else call["output"])
              for call in turn["tool_calls"]])
            for turn in episode["turns"]]


def vision_descriptions(requests: list[dict]) -> list[str]:
    return [tool["function"]["description"] for body in requests for tool in body.get("tools") or []
            if tool["function"]["name"] == "python_image_processing"]


@pytest.mark.slow
@pytest.mark.parametrize("respond", [persistent, compliant])
def test_a_round_cap_of_one_ends_an_agent_turn_as_it_ends_a_builtin_one(respond, tmp_path):
    tasks = ["pr-sports-boxscore"]  # two turns: the cap is counted per turn
    (builtin, builtin_requests), (agent, agent_requests) = together(  # two runs, each with its own server
        lambda: run(BUILTIN, tmp_path / "builtin", respond, "--max-tool-rounds", "1", tasks=tasks),
        lambda: run(AGENT, tmp_path / "agent", respond, "--max-tool-rounds", "1", tasks=tasks))
    assert builtin["outcome"] == agent["outcome"] == "tool_round_cap"
    assert trace(agent) == trace(builtin)
    (status, rounds, calls), _ = trace(builtin)
    assert (status, rounds) == ("tool_round_cap", 2)
    assert [ok for _, _, ok, _ in calls] == [True, False]  # the call past the cap was not run
    assert calls[1][3].startswith("Not run: the limit of 1 tool rounds")
    if respond is compliant:  # the final answer after the cap notice is the turn's answer in both
        assert [t["answer"] for t in agent["turns"]] == [t["answer"] for t in builtin["turns"]] == ["final answer"] * 2
    # The agent saw the same tools as the built-in loop, request by request, and the same in every
    # request (a stable prefix for prompt caching; the built-in loop's last request of a capped turn
    # keeps its tools with tool_choice "none"): no description lists the working directory's files.
    assert len(agent_requests) == len(builtin_requests) == 6
    assert [body.get("tool_choice") for body in builtin_requests] == [None, None, "none"] * 2
    assert [body["tools"] for body in agent_requests] == [body["tools"] for body in builtin_requests]
    assert len({json.dumps(body["tools"]) for body in builtin_requests}) == 1
    assert not any("Files in the working directory" in d for d in vision_descriptions(builtin_requests))


TASK_TIMEOUT_S = 5
"""The runs' ``--task-timeout``: time enough to start and make the first call."""


LATE_S = 120
"""How long after the task's start the slow answer comes: long past the limit, and shorter than no client's
timeout (the example agent's own ``ChatOpenAI`` waits up to 600 s)."""


def slow_answer() -> Callable[[dict], dict | str]:
    """A calculator call at once; the answer after its result comes :data:`LATE_S` after the first request."""
    first: list[float] = []

    def respond(body: dict) -> dict | str:
        first.append(time.monotonic())
        if any(m["role"] == "tool" for m in body["messages"]):
            time.sleep(max(0.0, first[0] + LATE_S - time.monotonic()))
            return "late answer"
        return {"content": "", "tool_calls": [{"id": "c1", "name": "calculator", "arguments": {"expression": "6*7"}}]}
    return respond


def slow_tool() -> Callable[[dict], dict | str]:
    """A tool call whose code runs for 10 s."""
    def respond(body: dict) -> dict | str:
        if any(m["role"] == "tool" for m in body["messages"]):
            return "answer"
        return {"content": "", "tool_calls": [{"id": "c1", "name": "python_image_processing",
                                               "arguments": {"code": "import time\ntime.sleep(10)\nprint(1)"}}]}
    return respond


@pytest.mark.slow
@pytest.mark.parametrize("responder", [slow_answer, slow_tool])
def test_an_agent_episode_past_the_task_timeout_ends_as_a_builtin_one(responder, tmp_path):
    limits = ("--max-tool-rounds", "1", "--task-timeout", str(TASK_TIMEOUT_S))
    tasks = ["rs-finance-invoice"]
    (builtin, builtin_requests), (agent, agent_requests) = together(  # two runs, each with its own server
        lambda: run(BUILTIN, tmp_path / "builtin", responder(), *limits, tasks=tasks),
        lambda: run(AGENT, tmp_path / "agent", responder(), *limits, tasks=tasks))
    assert len(agent_requests) == len(builtin_requests) == (2 if responder is slow_answer else 1)
    assert builtin["outcome"] == agent["outcome"] == "task_timeout"
    assert agent["error"].startswith("TaskTimeout: the task ran past its time limit of 5 s")
    assert trace(agent) == trace(builtin) == []
    # Both end at the limit: the agent's own client, still waiting for the slow answer, is not waited for.
    durations = [json.loads((tmp_path / name / "results.jsonl").read_text())["duration_s"]
                 for name in ("builtin", "agent")]
    assert max(durations) < LATE_S / 2, durations
