"""Transcripts: every request a model server received is a model event of its task's transcript, with
the same images (by the sha256 of the bytes on the wire); every judge request is a judge event;
transcripts survive a SIGKILL and --resume whole and once; `vtb transcript` prints them."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import write_task
from support.cli import openai_env, start_vtb, vtb
from langchain_openai import ChatOpenAI
from support.openai_server import OpenAIServer
from support.scripted_vision import VisionModel
from typer.testing import CliRunner

import vtb_agents
from vtb_agents.cli import app
from vtb_agents.rundir.layout import TRANSCRIPTS_DIR, artifacts_dir, transcript_file
from vtb_agents.rundir.store import ResultsStore
from vtb_agents.rundir.transcripts import read_transcript
from vtb_agents.runner.executors import LocalExecutor
from vtb_agents.runner.regrade import regrade_run
from vtb_agents.runner.run import RunConfig, run_suite
from vtb_agents.tasks import load_tasks
from vtb_agents.transcript import JudgeEvent, ModelEvent, StepEvent, ToolEvent

AGENT, JUDGE = "vision-test", "judge-test"
PLAN = "1. Crop the region the question is about. 2. Read it. 3. Answer."
VERDICT = {"verdict": "met", "justification": "The answer states it."}
ROLES = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}


def responder(vision: VisionModel, delay_s: float = 0.0):
    """The agent model (a plan when it may not call tools, else the scripted vision model) and the judge."""
    def respond(body):
        time.sleep(delay_s)
        if body["model"] == JUDGE:
            return json.dumps(VERDICT)
        return vision(body) if may_call_tools(body) else PLAN
    return respond


def may_call_tools(body: dict) -> bool:
    """Whether the request lets the model call a tool (tools given, ``tool_choice`` not "none")."""
    return bool(body.get("tools")) and body.get("tool_choice") != "none"


def texts(message: dict) -> list[str]:
    """A message's text parts (an empty content, sent as null with tool calls, has none)."""
    content = message.get("content")
    if isinstance(content, str):
        return [content] if content else []
    return [part["text"] for part in content or [] if part.get("type") == "text"]


def wire_images(body: dict) -> list[str]:
    """sha256 of the decoded bytes of every image in a received request, in order."""
    found = []
    for message in body["messages"]:
        for part in message["content"] if isinstance(message.get("content"), list) else []:
            if part["type"] == "image_url":
                header, data = part["image_url"]["url"].split(",", 1)
                assert header.endswith(";base64")
                found.append(hashlib.sha256(base64.b64decode(data)).hexdigest())
    return found


def opening(body_messages: list[dict]) -> str:
    """The first user text of a request: the task's first prompt."""
    return next(texts(m)[0] for m in body_messages if m["role"] in ("user", "human"))


@pytest.fixture(scope="module")
def sample():
    tasks = load_tasks("sample")
    assert len({t.turns[0].prompt for t in tasks}) == len(tasks)  # a request names its task by its prompt
    return tasks


def run_with_server(tasks, strategy: str, out: Path):
    with OpenAIServer(responder(VisionModel())) as server, pytest.MonkeyPatch.context() as env:
        env.setenv("OPENAI_BASE_URL", server.base_url)
        env.setenv("OPENAI_API_KEY", "k")
        summary = run_suite(tasks, RunConfig(model=f"openai:{AGENT}", judge=f"openai:{JUDGE}", strategy=strategy),
                            out, executor=LocalExecutor(4))
    return summary, server.requests


@pytest.fixture(scope="module", params=["plan", "marks"])
def strategy_run(request, sample, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"transcripts-{request.param}") / "run"
    summary, requests = run_with_server(sample, request.param, out)
    return request.param, out, summary, requests


@pytest.mark.slow
def test_model_events_are_the_requests_the_server_received(strategy_run, sample):
    strategy, out, summary, requests = strategy_run
    by_task = {t.turns[0].prompt: t.id for t in sample}
    received: dict[str, list[dict]] = {t.id: [] for t in sample}
    for body in requests:
        if body["model"] == AGENT:
            received[by_task[opening(body["messages"])]].append(body)
    artifacts = artifacts_dir(out)
    for task in sample:
        events = [e for e in read_transcript(out, task.id).events if isinstance(e, ModelEvent)]
        bodies = received[task.id]
        assert len(events) == len(bodies) > 0, task.id
        for event, body in zip(events, bodies):
            assert [i.sha256 for i in event.images] == wire_images(body), task.id
            assert [ROLES[m["role"]] for m in event.messages] == [m["role"] for m in body["messages"]]
            assert [texts(m) for m in event.messages] == [texts(m) for m in body["messages"]]
            assert [t["function"]["name"] for t in event.params.get("tools", [])] == [
                t["function"]["name"] for t in body.get("tools", [])]
            assert event.model == AGENT
        for ref in {i.sha256 for e in events for i in e.images}:  # each image's bytes stored once, as sent
            assert hashlib.sha256((artifacts / ref[:2] / f"{ref}.img").read_bytes()).hexdigest() == ref
        first = events[0]
        assert first.step == ("plan" if strategy == "plan" else "model")
        assert first.response is not None and first.tokens is not None and first.tokens.total_tokens == 15
    assert summary.complete is True and summary.tasks == len(sample)


@pytest.mark.slow
def test_every_judge_request_is_a_judge_event(strategy_run, sample):
    _, out, summary, requests = strategy_run
    asked = Counter(texts(b["messages"][-1])[0] for b in requests if b["model"] == JUDGE)
    judged = [e for t in sample for e in read_transcript(out, t.id).events if isinstance(e, JudgeEvent)]
    recorded = Counter(texts(call.messages[-1])[0] for e in judged for call in e.calls)
    assert recorded == asked and sum(asked.values()) == summary.judge.calls > 0
    for event in judged:
        if event.calls:
            (call,) = event.calls
            verdict = event.verdict
            assert verdict.judge == f"openai:{JUDGE}" and event.prompt == texts(call.messages[-1])[0]
            assert json.loads(call.response.text) == VERDICT and verdict.status == "met"
            assert verdict.justification == VERDICT["justification"] and not verdict.cached
    assert len(judged) == sum(len(t.rubrics) for t in sample)


@pytest.mark.slow
def test_strategy_steps_are_recorded_and_counted_apart_from_tool_metrics(strategy_run, sample):
    strategy, out, summary, _ = strategy_run
    transcripts = [read_transcript(out, t.id) for t in sample]
    steps = [e for tr in transcripts for e in tr.events if isinstance(e, StepEvent)]
    tools = [e for tr in transcripts for e in tr.events if isinstance(e, ToolEvent)]
    turns = sum(len(t.turns) for t in sample)
    metrics = summary.tool_metrics
    results = {r.task_id: r for r in ResultsStore(out).load()[0]}
    assert metrics.calls == len(tools) == sum(len(r.episode.tool_calls) for r in results.values())
    # one record per fact: each tool event carries its result's tool call record, each judge event its verdict
    for task, transcript in zip(sample, transcripts):
        result = results[task.id]
        assert [e.call for e in transcript.events if isinstance(e, ToolEvent)] == result.episode.tool_calls
        assert [e.verdict for e in transcript.events if isinstance(e, JudgeEvent)] == result.grade.verdicts
    if strategy == "plan":
        assert [s.step for s in steps] == ["plan"] * turns and {s.text for s in steps} == {PLAN}
        assert metrics.strategy_image_ops == {}
    else:
        assert {s.step for s in steps} == {"marks"} and all(s.image_op == "mark" for s in steps)
        marked = sum(len(s.images) for s in steps)
        assert marked == sum(len(turn.images) for t in sample for turn in t.turns)
        assert metrics.strategy_image_ops == {"mark": marked}
        assert all(i.name.startswith("marked_image_") for s in steps for i in s.images)


@pytest.mark.parametrize("strategy_run", ["plan"], indirect=True)
@pytest.mark.slow
def test_regrade_replaces_the_verdicts_with_cached_ones_and_keeps_the_episode(strategy_run, sample):
    _, out, _, _ = strategy_run
    task = next(t for t in sample if any(r.check is None for _, r in t.rubrics))
    before = read_transcript(out, task.id)
    with OpenAIServer(responder(VisionModel())) as server, pytest.MonkeyPatch.context() as env:
        env.setenv("OPENAI_BASE_URL", server.base_url)
        env.setenv("OPENAI_API_KEY", "k")
        regrade_run(out, tasks=sample)
    assert server.requests == []  # every verdict came from the judge cache
    after = read_transcript(out, task.id)
    assert [e for e in after.events if e.kind != "judge"] == [e for e in before.events if e.kind != "judge"]
    cached = [e for e in after.events if isinstance(e, JudgeEvent) and e.verdict.judge == f"openai:{JUDGE}"]
    assert cached and all(e.verdict.cached and e.calls == [] and e.prompt for e in cached)
    regraded = next(r for r in ResultsStore(out).load()[0] if r.task_id == task.id)
    assert [e.verdict for e in after.events if isinstance(e, JudgeEvent)] == regraded.grade.verdicts


SLOW_TASKS = 6


@pytest.mark.slow
def test_sigkill_then_resume_keeps_each_transcript_whole_and_once(tmp_path):
    root = tmp_path / "tasks"
    for i in range(SLOW_TASKS):
        write_task(root, f"t{i}")
    out = tmp_path / "run"
    with OpenAIServer(responder(VisionModel(), delay_s=0.1)) as server:
        args = ["run", "--tasks", root, "--model", f"openai:{AGENT}", "--out", out, "--concurrency", "2"]
        process = start_vtb(*args, env=openai_env(server.base_url), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
        results = out / "results.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (not results.exists() or len(results.read_text().splitlines()) < 2):
            time.sleep(0.02)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        finished = [json.loads(line)["task_id"] for line in results.read_text().splitlines()]
        assert 2 <= len(finished) < SLOW_TASKS, "the run should have been killed part way"
        kept = {task_id: transcript_file(out, task_id).read_bytes() for task_id in finished}
        resumed = vtb(*args, "--resume", env=openai_env(server.base_url), timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert {task_id: transcript_file(out, task_id).read_bytes() for task_id in finished} == kept
    assert sorted(p.name for p in (out / TRANSCRIPTS_DIR).iterdir()) == sorted(
        transcript_file(out, f"t{i}").name for i in range(SLOW_TASKS))
    for i in range(SLOW_TASKS):
        transcript = read_transcript(out, f"t{i}")
        kinds = [e.kind for e in transcript.events]
        assert kinds == ["model", "tool", "model", "judge", "judge"], (f"t{i}", kinds)  # one attempt, no more


CROP = ("from PIL import Image\nim = Image.open('image_0.png')\n"
        "im.crop((340, 260, 400, 300)).resize((240, 160)).save('transformed_image_0.png')")
AGENT_MODULE = f'''
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from vtb_agents.models.scripted import ScriptedChatModel

def build(tools, *, system_prompt, middleware):
    model = ScriptedChatModel(replies=[
        AIMessage("", tool_calls=[{{"name": "python_image_processing", "args": {{"code": {CROP!r}}}, "id": "c1"}}]),
        AIMessage("The number in the corner is 42."),
    ])
    return create_agent(model, tools, system_prompt=system_prompt, middleware=middleware)
'''


def transcript_cli(run: Path, task_id: str, *options: str):
    return CliRunner().invoke(app, ["transcript", str(run), task_id, *options])


def test_vtb_transcript_shows_a_users_own_agent(task_root, tmp_path, monkeypatch):
    (tmp_path / "user_agent_t.py").write_text(AGENT_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "run"
    run_suite(load_tasks(task_root), RunConfig(model="agent:user_agent_t:build"), out)
    shown = transcript_cli(out, "t-corner", "--json")
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.output)
    assert set(data) == {"format_version", "task_id", "events"} and data["task_id"] == "t-corner"
    assert [(e["kind"], e["step"]) for e in data["events"]] == [
        ("model", "model"), ("tool", "tools"), ("model", "model"), ("judge", "judge"), ("judge", "judge")]
    first, tool_event, second = data["events"][:3]
    tool = tool_event["call"]
    assert first["messages"][0]["role"] == "system" and len(first["images"]) == 1
    # the second request shows the crop the tool saved (ShowToolImages), by the hash of the bytes sent
    assert second["images"][0] == first["images"][0] and len(second["images"]) == 2
    assert second["images"][1] == {"sha256": tool["images"][0]["ref"]}
    assert tool["name"] == "python_image_processing" and tool["args"] == {"code": CROP} and tool["error"] is None
    assert tool["turn"] == 0 and tool["round"] == 0 and tool["ok"] is True  # the result's record of the call
    result = ResultsStore(out).load()[0][0]
    assert tool == result.episode.tool_calls[0].model_dump(mode="json")
    text = transcript_cli(out, "t-corner")
    assert text.exit_code == 0, text.output
    assert "#2 tool · tools · turn 1 · python_image_processing" in text.output
    unwrapped = re.sub(r"\n\s*", "", text.output)  # a long path wraps at the terminal's width
    assert str(artifacts_dir(out) / tool["images"][0]["ref"][:2]) in unwrapped
    assert "reply: The number in the corner is 42." in text.output


def test_vtb_transcript_of_an_evaluate_run_shows_zoom_steps(task_root, tmp_path):
    def zoom(body):
        if may_call_tools(body):
            return "The number is 42."
        if any("Zoomed views" in t for m in body["messages"] for t in texts(m)):
            return '{"regions": []}'
        return json.dumps({"regions": [{"source": "image_0.png", "box": [0.8, 0.8, 1, 1], "confidence": 0.9}]})

    with OpenAIServer(zoom) as server:
        model = ChatOpenAI(model="zoomer", base_url=server.base_url, api_key="k")
        evaluation = vtb_agents.evaluate("zoom", tasks=str(task_root), model=model, out=tmp_path / "run")
    assert evaluation.tool_metrics.strategy_image_ops == {"crop": 1} and evaluation.tool_metrics.calls == 0
    data = json.loads(transcript_cli(tmp_path / "run", "t-corner", "--json").output)
    assert [(e["kind"], e["step"]) for e in data["events"]] == [
        ("model", "zoom.propose"), ("step", "zoom.propose"), ("step", "zoom.views"), ("model", "zoom.refine"),
        ("step", "zoom.refine"), ("model", "model"), ("judge", "judge"), ("judge", "judge")]
    views = data["events"][2]
    assert views["image_op"] == "crop" and views["images"][0]["name"] == "zoom_t1_0.png"
    assert views["data"]["views"][0]["box"] == [0.8, 0.8, 1.0, 1.0]
    # the refine request sends the view: its bytes (as sent) are the view's, stored once
    assert views["images"][0]["ref"] in [i["sha256"] for i in data["events"][3]["images"]]
    assert len(server.requests) == 3
    text = transcript_cli(tmp_path / "run", "t-corner").output
    assert "#3 step · zoom.views · turn 1" in text and "[image (crop)] zoom_t1_0.png" in text


def test_vtb_transcript_names_what_is_missing(task_root, tmp_path):
    missing = transcript_cli(tmp_path / "nowhere", "t-corner")
    assert missing.exit_code == 2 and "no such run directory" in missing.output
    vtb_agents.evaluate("react", tasks=str(task_root), out=tmp_path / "run")
    unknown = transcript_cli(tmp_path / "run", "t-corne")
    assert unknown.exit_code == 2
    assert "task 't-corne' is not in run" in unknown.output and "did you mean 't-corner'?" in unknown.output
    other_epoch = transcript_cli(tmp_path / "run", "t-corner", "--epoch", "2")
    assert other_epoch.exit_code == 2 and "no transcript for epoch 2" in other_epoch.output


def test_a_failed_tool_call_and_a_failed_model_call_carry_their_errors(task_root, artifacts):
    from langchain_core.messages import AIMessage

    from vtb_agents.episodes.driver import run_episode
    from vtb_agents.episodes.recorder import TranscriptRecorder
    from vtb_agents.models.scripted import ScriptedChatModel
    from vtb_agents.sandbox import open_sandbox
    from vtb_agents.tools import select_tools

    task = load_tasks(task_root)[0]
    replies = iter([AIMessage("", tool_calls=[{"name": "python_image_processing", "id": "c1",
                                                "args": {"code": "raise ValueError('boom')"}}]),
                    AIMessage("", tool_calls=[{"name": "calculator", "id": "c2", "args": {"expression": "1/0"}}])])

    def script(messages):
        reply = next(replies, None)
        if reply is None:
            raise RuntimeError("provider down")  # not retried: one attempt
        return reply

    recorder = TranscriptRecorder(artifacts)
    with open_sandbox("local") as sandbox, pytest.raises(RuntimeError, match="provider down"):
        run_episode(task, ScriptedChatModel(script=script), select_tools(), sandbox=sandbox, artifacts=artifacts,
                    model_name="m", recorder=recorder)
    events = recorder.transcript(task.id).events
    assert [(e.kind, e.step) for e in events] == [("model", "model"), ("tool", "vision_tools"), ("model", "model"),
                                                  ("tool", "general_tools"), ("model", "model")]
    code, calc, failed = events[1], events[3], events[4]
    assert isinstance(code, ToolEvent) and "ValueError: boom" in code.call.error and code.call.id == "c1"
    assert not code.call.ok and code.call.turn == 0 and code.call.round is None  # no turn record: the recorder's
    assert isinstance(calc, ToolEvent) and calc.call.error is not None and "division" in calc.call.output.lower()
    assert isinstance(failed, ModelEvent) and failed.response is None
    assert failed.error == "RuntimeError: provider down"


def test_a_call_that_never_ended_says_so(artifacts):
    from uuid import uuid4

    from langchain_core.messages import HumanMessage

    from vtb_agents.episodes.recorder import UNFINISHED, TranscriptRecorder

    recorder = TranscriptRecorder(artifacts)
    recorder.on_chat_model_start({}, [[HumanMessage("hi")]], run_id=uuid4(), metadata={"vtb_turn": 0})
    (event,) = recorder.transcript("t").events
    assert isinstance(event, ModelEvent) and event.error == UNFINISHED and event.turn == 0 and event.step == "model"


def test_each_epoch_has_its_own_transcript(task_root, tmp_path):
    vtb_agents.evaluate("react", tasks=str(task_root), out=tmp_path / "run", epochs=2)
    assert sorted(p.name for p in (tmp_path / "run" / TRANSCRIPTS_DIR).iterdir()) == sorted(
        transcript_file(tmp_path / "run", "t-corner", epoch).name for epoch in (1, 2))
    for epoch in ("1", "2"):
        shown = transcript_cli(tmp_path / "run", "t-corner", "--json", "--epoch", epoch)
        assert shown.exit_code == 0, shown.output
        assert [e["kind"] for e in json.loads(shown.output)["events"]] == ["model", "tool", "model", "judge", "judge"]
    third = transcript_cli(tmp_path / "run", "t-corner", "--epoch", "3")
    assert third.exit_code == 2 and "no transcript for epoch 3" in third.output
