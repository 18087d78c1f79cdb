"""The model-call cache (``--model-cache``, ``--model-cache-only``): real ChatOpenAI clients against
local chat-completions servers, real graphs and sandboxes; a replay makes no request at all."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from support.openai_server import OpenAIServer
from PIL import Image
from support.scripted_vision import VisionModel
from typer.testing import CliRunner

import vtb_agents
from vtb_agents.cli import app
from vtb_agents.config import RunConfig
from vtb_agents.models.cache import ModelCache, ModelCacheMiss, task_model_calls
from vtb_agents.models.usage import CACHE_HIT_METADATA_KEY, track_usage
from vtb_agents.rundir.errors import RunError
from vtb_agents.rundir.store import ResultsStore
from vtb_agents.runner.executors import LocalExecutor
from vtb_agents.runner.run import run_suite
from vtb_agents.tasks import load_tasks

ROOT = Path(__file__).resolve().parents[1]
ONE_PER_CATEGORY = ["rs-finance-invoice", "ht-finance-stockchart", "fu-medical-labs", "pr-sports-boxscore",
                    "te-generalist-map"]
NOT_COMPARED = {"cost", "prompt_cache"}
"""Summary fields a replay changes: what it cost (nothing), and what the provider's prompt cache served of
the calls it made (none). ``usage.cache_hits`` too (see below)."""


def judge_verdict(body: dict) -> str:
    return json.dumps({"verdict": "met", "justification": "Matches."})


def refuse(body: dict) -> int:
    return 500  # a replay must never get here: the test counts the requests


def sample(*ids: str) -> list:
    tasks = {t.id: t for t in load_tasks("sample")}
    return [tasks[i] for i in ids]


def answers_and_verdicts(run_dir: Path) -> dict[str, tuple]:
    results, _ = ResultsStore(run_dir).load()
    return {r.task_id: ([(t.answer, t.status, [(c.name, c.args, c.output) for c in t.tool_calls])
                         for t in r.episode.turns],
                        [(v.rubric_id, v.status) for v in r.grade.verdicts], r.grade.passed, r.grade.score, r.outcome)
            for r in results}


def comparable(run_dir: Path) -> dict[str, dict]:
    """The result lines of ``run_dir`` without what a replay changes (docs/how-to/replay-offline.md):
    timings and the usage the cache answered."""
    lines = {}
    for text in (run_dir / "results.jsonl").read_text().splitlines():
        line = json.loads(text)
        del line["duration_s"], line["usage"]["model_from_cache"], line["usage"]["judge_from_cache"]
        for turn in line["episode"]["turns"]:
            for call in turn["tool_calls"]:
                del call["duration_s"]
        lines[line["task_id"]] = line
    return lines


@pytest.mark.slow
def test_a_run_replays_from_its_cache_offline_with_the_same_results(tmp_path, monkeypatch):
    cache = tmp_path / "model_cache.sqlite"
    config = RunConfig(model="openai:vision-test", tasks="sample", model_cache=str(cache))
    tasks = sample(*ONE_PER_CATEGORY)
    asks = VisionModel(ask_first=True, ask_on=frozenset({tasks[2].turns[0].prompt}))  # the follow-up task's question
    with OpenAIServer(asks) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        recorded = run_suite(tasks, config, tmp_path / "recorded", executor=LocalExecutor(2))
    calls = len(server.requests)  # per turn a vision call and an answer; the follow-up task asks first
    assert recorded.usage.model.calls == calls == 15 and recorded.usage.cache_hits == 0
    # The first server is gone; a second one, which fails every request, counts what reaches it.
    with OpenAIServer(refuse) as sentinel:
        monkeypatch.setenv("OPENAI_BASE_URL", sentinel.base_url)  # another endpoint: not part of the key
        replayed = run_suite(tasks, config.model_copy(update={"model_cache_only": True}), tmp_path / "replayed")
    assert sentinel.requests == []
    assert comparable(tmp_path / "replayed") == comparable(tmp_path / "recorded")  # answers, verdicts, tool calls
    assert len(answers_and_verdicts(tmp_path / "replayed")) == len(tasks)
    assert replayed.usage.cache_hits == calls  # every model call answered by the cache
    assert replayed.usage.model == recorded.usage.model  # tokens as the provider reported them
    assert replayed.cost.model == replayed.cost.judge == 0.0  # a cached answer costs nothing
    assert replayed.prompt_cache.model.input_tokens == 0  # no call reached a provider
    assert recorded.prompt_cache.model.input_tokens == recorded.usage.model.input_tokens
    cache_fields = {"cache_hits", "model_from_cache", "judge_from_cache"}
    assert replayed.model_dump(exclude={*NOT_COMPARED, "run_dir", "usage"}) == \
        recorded.model_dump(exclude={*NOT_COMPARED, "run_dir", "usage"})
    assert replayed.usage.model_dump(exclude=cache_fields) == recorded.usage.model_dump(exclude=cache_fields)
    assert recorded.outcomes and recorded.graded == len(tasks)


@pytest.mark.slow
def test_a_changed_request_stops_a_cache_only_run_naming_task_turn_and_step(tmp_path):
    cache, out = tmp_path / "cache.sqlite", tmp_path / "run"
    ids = ["rs-finance-invoice", "te-generalist-map"]
    selection = [a for task_id in ids for a in ("--task-id", task_id)]
    runner = CliRunner()
    with OpenAIServer(VisionModel()) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "k"}
        done = runner.invoke(app, ["run", "--model", "openai:vision-test", *selection, "--model-cache", str(cache),
                                   "--out", str(tmp_path / "recorded")], env=env)
        assert done.exit_code == 0, done.output
        recorded = len(server.requests)
    # The model's own answers as history change turn 2's request of the two-turn task; the one-turn
    # task before it asks what it asked before and is answered from the cache.
    with OpenAIServer(refuse) as sentinel:
        missed = runner.invoke(app, ["run", "--model", "openai:vision-test", *selection, "--history", "model",
                                     "--model-cache", str(cache), "--model-cache-only", "--out", str(out)],
                               env={"OPENAI_BASE_URL": sentinel.base_url, "OPENAI_API_KEY": "k"})
    assert missed.exit_code == 2 and sentinel.requests == []
    message = " ".join(missed.output.split())
    assert "model cache miss: task te-generalist-map, turn 2, step answer/model:" in message
    assert "the run stopped with 1 new result(s) saved" in message
    results, _ = ResultsStore(out).load()
    assert [r.task_id for r in results] == ["rs-finance-invoice"]
    assert answers_and_verdicts(out)["rs-finance-invoice"] == \
        answers_and_verdicts(tmp_path / "recorded")["rs-finance-invoice"]
    # Resumed with the model reachable and the cache no longer the only source, the run completes.
    with OpenAIServer(VisionModel()) as server:
        resumed = runner.invoke(app, ["run", "--model", "openai:vision-test", *selection, "--history", "model",
                                      "--model-cache", str(cache), "--out", str(out), "--resume"],
                                env={"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "k"})
        assert resumed.exit_code == 0, resumed.output
        assert recorded == 6 and len(server.requests) == 2  # turn 2 asks anew; turn 1 came from the cache
    assert [r.task_id for r in ResultsStore(out).load()[0]] == ids


def test_a_cache_only_run_needs_a_recorded_cache(tmp_path):
    done = CliRunner().invoke(app, ["run", "--task-id", "rs-finance-invoice", "--model-cache-only",
                                    "--out", str(tmp_path / "run")])
    assert done.exit_code == 2 and "--model-cache-only needs --model-cache PATH" in " ".join(done.output.split())
    with pytest.raises(ValueError, match="no such file"):
        vtb_agents.evaluate(tasks=sample("rs-finance-invoice"), out=tmp_path / "api", model_cache=str(tmp_path / "x"),
                            model_cache_only=True)


@pytest.mark.slow
def test_your_own_agent_is_replayed_from_the_cache(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))  # examples/ is importable as in the docs' command
    monkeypatch.setenv("VTB_EXAMPLE_MODEL", "openai:vision-test")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    cache = tmp_path / "cache.sqlite"
    config = RunConfig(model="agent:examples.create_agent_example:build", tasks="sample", model_cache=str(cache))
    tasks = sample("rs-finance-invoice", "te-generalist-map")
    with OpenAIServer(VisionModel()) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        run_suite(tasks, config, tmp_path / "recorded")
    assert len(server.requests) == 6  # per turn: a vision call, then the answer
    with OpenAIServer(refuse) as sentinel:
        monkeypatch.setenv("OPENAI_BASE_URL", sentinel.base_url)
        replayed = run_suite(tasks, config.model_copy(update={"model_cache_only": True}), tmp_path / "replayed")
    assert sentinel.requests == [] and replayed.usage.cache_hits == 6
    assert answers_and_verdicts(tmp_path / "replayed") == answers_and_verdicts(tmp_path / "recorded")


@pytest.mark.slow
@pytest.mark.parametrize("streaming", [False, True])
def test_the_python_api_records_and_replays_a_chat_model_object(tmp_path, streaming):
    cache, task = str(tmp_path / "cache.sqlite"), sample("te-generalist-map")
    with OpenAIServer(VisionModel()) as server:
        model = ChatOpenAI(model="vision-test", base_url=server.base_url, api_key="k", temperature=0,
                           streaming=streaming)
        recorded = vtb_agents.evaluate(model=model, tasks=task, out=tmp_path / "recorded", model_cache=cache)
    with OpenAIServer(refuse) as sentinel:
        model = ChatOpenAI(model="vision-test", base_url=sentinel.base_url, api_key="k", temperature=0,
                           streaming=streaming, max_retries=0)
        replayed = vtb_agents.evaluate(model=model, tasks=task, out=tmp_path / "replayed", model_cache=cache,
                                       model_cache_only=True)
    assert sentinel.requests == [] and replayed.usage.cache_hits == len(server.requests) == 4
    assert [t.answer for t in replayed.results[0].episode.turns] == \
        [t.answer for t in recorded.results[0].episode.turns] == ["Final answer: 42."] * 2


def test_a_miss_an_agent_swallows_still_stops_the_run(tmp_path):
    cache = tmp_path / "empty.sqlite"
    ModelCache(cache).close()
    with OpenAIServer(refuse) as sentinel:
        model = ChatOpenAI(model="m", base_url=sentinel.base_url, api_key="k", max_retries=0)

        def forgiving(state: dict) -> dict:
            try:
                reply = model.invoke(state["messages"])
            except Exception:  # an agent that hides its model's failures behind a canned answer
                reply = AIMessage("I could not reach the model.")
            return {"messages": [*state["messages"], reply]}

        with pytest.raises(RunError, match=r"model cache miss: task rs-finance-invoice, turn 1, step answer/agent: "):
            vtb_agents.evaluate(agent=RunnableLambda(forgiving), tasks=sample("rs-finance-invoice"),
                                out=tmp_path / "run", model_cache=str(cache), model_cache_only=True,
                                no_tools=True)  # a ready agent without tools runs where the run offers none
    assert sentinel.requests == [] and ResultsStore(tmp_path / "run").load()[0] == []


def png(color: str) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), color).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two numbers."""
    return a * b


def test_the_key_is_the_request_model_parameters_messages_images_and_tools(tmp_path):
    cache = ModelCache(tmp_path / "cache.sqlite")

    def ask(model: ChatOpenAI, color: str = "red", text: str = "What color?", message_id: str | None = None,
            tools: tuple = ()) -> AIMessage:
        bound = model.bind_tools(list(tools)) if tools else model
        message = HumanMessage([{"type": "text", "text": text},
                                {"type": "image", "base64": png(color), "mime_type": "image/png"}], id=message_id)
        reply = bound.invoke([message])
        assert isinstance(reply, AIMessage)
        return reply

    with OpenAIServer(lambda body: f"answer {len(body['messages'])}") as server, \
            task_model_calls(cache, "t1") as calls, track_usage() as usage:
        base = ChatOpenAI(model="m", base_url=server.base_url, api_key="k", temperature=0)
        first = ask(base)
        assert CACHE_HIT_METADATA_KEY not in first.response_metadata and len(server.requests) == 1
        # the same request through another client (endpoint, timeout, retries) and a message id: a hit
        other = ChatOpenAI(model="m", base_url=server.base_url + "/", api_key="k2", temperature=0, timeout=5,
                           max_retries=7)
        hit = ask(other, message_id="some-id")
        assert hit.text == first.text and len(server.requests) == 1
        assert len(hit.response_metadata[CACHE_HIT_METADATA_KEY]) == 64
        streamed = ask(ChatOpenAI(model="m", base_url=server.base_url, api_key="k", temperature=0, streaming=True))
        assert streamed.text == first.text and len(server.requests) == 1  # delivered otherwise, asked the same
        # each of model, parameter, image bytes, text and tools makes another request
        ask(ChatOpenAI(model="m2", base_url=server.base_url, api_key="k", temperature=0))
        ask(ChatOpenAI(model="m", base_url=server.base_url, api_key="k", temperature=0.5))
        ask(base, color="blue")
        ask(base, text="Which color?")
        ask(base, tools=(add,))
        ask(base, tools=(add, multiply))
        ask(base, tools=(add,))  # the same tools again: a hit
        assert len(server.requests) == 7
    assert calls is not None and calls.hits == 3 and calls.miss is None
    assert usage.total.calls == 10 and usage.from_cache.calls == 3 and usage.from_cache.input_tokens == 30
    cache.close()


def test_a_cache_only_miss_raises_and_is_kept(tmp_path):
    cache = ModelCache(tmp_path / "cache.sqlite", only=True)
    outside = r"^model cache miss: task t9, no turn, step \(outside a graph\): "
    with OpenAIServer(refuse) as server, task_model_calls(cache, "t9") as calls, \
            pytest.raises(ModelCacheMiss, match=outside):
        ChatOpenAI(model="m", base_url=server.base_url, api_key="k", max_retries=0).invoke("hello")
    assert server.requests == [] and calls is not None and calls.miss is not None
    with pytest.raises(ModelCacheMiss):
        calls.raise_miss()
    cache.close()


WRITER = """
import sys
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration
from vtb_agents.models.cache import ModelCache
cache = ModelCache(sys.argv[1])
for i in range(200):
    cache.put(f"process-{i}", "m", [ChatGeneration(message=AIMessage(f"p{i}"))])
cache.close()
"""


def test_threads_and_another_process_share_one_cache_file(tmp_path):
    path = tmp_path / "shared.sqlite"
    cache = ModelCache(path)
    other = subprocess.Popen([sys.executable, "-c", WRITER, str(path)])

    def write(i: int) -> None:
        cache.put(f"thread-{i}", "m", [ChatGeneration(message=AIMessage(f"t{i}"))])

    with ThreadPoolExecutor(max_workers=32) as pool:
        list(pool.map(write, range(320)))
    assert other.wait(timeout=120) == 0
    found = {key: cache.get(key) for key in [*(f"thread-{i}" for i in range(320)),
                                             *(f"process-{i}" for i in range(200))]}
    assert [g.generations[0].text for g in found.values() if g] == \
        [*(f"t{i}" for i in range(320)), *(f"p{i}" for i in range(200))]
    cache.close()


def test_the_llm_judge_is_answered_from_the_cache(tmp_path):
    from vtb_agents.judges.llm import LLMJudge

    task = sample("rs-finance-invoice")[0]
    turn, rubric = task.rubrics[0]
    path = tmp_path / "cache.sqlite"
    with OpenAIServer(judge_verdict) as server, task_model_calls(ModelCache(path), task.id):
        judge = LLMJudge(ChatOpenAI(model="j", base_url=server.base_url, api_key="k"), "openai:j", attempts=1)
        live = judge.judge(task=task, turn=turn, rubric=rubric, answer="INV-20931")
    with OpenAIServer(refuse) as sentinel, task_model_calls(ModelCache(path, only=True), task.id) as calls:
        judge = LLMJudge(ChatOpenAI(model="j", base_url=sentinel.base_url, api_key="k"), "openai:j", attempts=1)
        replayed = judge.judge(task=task, turn=turn, rubric=rubric, answer="INV-20931")
    assert len(server.requests) == 1 and sentinel.requests == [] and calls is not None and calls.hits == 1
    assert replayed == live and live.status == "met"


def test_each_epoch_of_a_task_has_its_own_answers(tmp_path):
    cache = ModelCache(tmp_path / "cache.sqlite")
    replies = iter(["first sample", "second sample"])
    with OpenAIServer(lambda body: next(replies)) as server:
        model = ChatOpenAI(model="m", base_url=server.base_url, api_key="k", temperature=1)
        answers = []
        for epoch in (1, 2, 1, 2):
            with task_model_calls(cache, "t1", epoch):
                answers.append(model.invoke("Pick a number.").text)
    assert answers == ["first sample", "second sample", "first sample", "second sample"]
    assert len(server.requests) == 2
    cache.close()


def test_cached_calls_keep_their_tokens_and_cost_nothing():
    from test_metrics import result

    from vtb_agents.analysis.cost import RunPrices
    from vtb_agents.analysis.metrics import summarize
    from vtb_agents.models.presets import prices_for
    from vtb_agents.results import TaskUsage, TokenUsage

    line = result("A", "c", "d", "single", score=1.0, passed=True, outcome="answered")
    line.usage = TaskUsage(model=TokenUsage(calls=2, input_tokens=1_000_000, output_tokens=100_000),
                           model_from_cache=TokenUsage(calls=1, input_tokens=400_000, output_tokens=40_000),
                           judge=TokenUsage(calls=1, input_tokens=100_000, output_tokens=10_000),
                           judge_from_cache=TokenUsage(calls=1, input_tokens=100_000, output_tokens=10_000))
    summary = summarize([line], judge_name="o4-mini", prices=RunPrices(prices_for("gpt-4o"), prices_for("o4-mini")),
                        extra={"model": "gpt-4o"})
    assert summary["usage"]["model"]["input_tokens"] == 1_000_000 and summary["usage"]["cache_hits"] == 2
    # gpt-4o at 2.50 / 10.00 per million, for the call sent: 600,000 x 2.5 + 60,000 x 10 = 2.1 USD;
    # the judge's one call came from the cache: 0
    assert (summary["cost"]["model"], summary["cost"]["judge"], summary["cost"]["total"]) == (2.1, 0.0, 2.1)
