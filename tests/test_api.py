"""The Python API: evaluate, load_tasks and task_tools, and the docs' examples run as written."""

from __future__ import annotations

import ast
import asyncio
import json
import re
from pathlib import Path

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import START, StateGraph
from support.docs_blocks import page_blocks
from support.openai_server import OpenAIServer
from support.scripted_vision import VisionModel
from typer.testing import CliRunner

import vtb_agents
from vtb_agents.cli import app
from vtb_agents.graphs.prompts import system_prompt
from vtb_agents.judges import Judgement
from vtb_agents.models.scripted import ScriptedChatModel
from vtb_agents.report import write_report
from vtb_agents.report.markup import esc
from vtb_agents.rundir.errors import RunError
from vtb_agents.config import RunConfig
from vtb_agents.runner.plan import RunObjects
from vtb_agents.runner.run import run_suite
from vtb_agents.rundir.layout import task_page_file
from vtb_agents.strategies import EpisodeContext, Strategy, TurnInput, TurnOutput, TurnState

API_PAGE = "docs/tutorials/evaluate-your-agent.md"  # the tutorial's python blocks, run here as written
CONFIG_PAGE = "docs/reference/configuration.md"


@pytest.mark.slow
def test_evaluate_runs_the_sample_suite_offline(tmp_path):
    summary = vtb_agents.evaluate("react", tasks="sample", model="replay", judge="rule", out=tmp_path / "run",
                                  concurrency=2)
    assert summary.apr == 1.0 and summary.ars == 1.0 and summary.tasks == 20 and summary.graded == 20
    assert summary.by_category["temporal"].n == 3 and summary.run_dir == tmp_path / "run"
    assert (tmp_path / "run" / "results.jsonl").exists() and summary.strategy == "react"
    # the report as `vtb run` and `vtb report` write it: the task table and a page per task
    assert summary.report == tmp_path / "run" / "report.html"
    written = summary.report.read_text(encoding="utf-8")
    assert written.count('<tr data-category="') == 20
    pages = {p.name: p.read_text(encoding="utf-8") for p in (tmp_path / "run" / "tasks").glob("*.html")}
    assert sorted(pages) == sorted(task_page_file(Path(), r.task_id).name for r in summary.results)
    first = summary.results[0]
    assert esc(first.episode.turns[0].answer) in pages[task_page_file(Path(), first.task_id).name]
    assert write_report(tmp_path / "run").read_text(encoding="utf-8") == written


def test_evaluate_takes_an_agent_factory_and_options(tmp_path):
    model = ScriptedChatModel(script=lambda messages: AIMessage("The number is 42."))

    def build(tools, *, system_prompt, middleware):
        return create_agent(model, tools, system_prompt=system_prompt, middleware=middleware)

    task = vtb_agents.load_tasks("sample", task_id="rs-finance-invoice")
    summary = vtb_agents.evaluate(agent=build, tasks=task, out=tmp_path / "run", prompt_level="low")
    assert summary.tasks == 1 and summary.strategy.startswith("object:test_api.") and summary.strategy.endswith("build")
    assert model.calls[0][0].content == system_prompt("low")
    with pytest.raises(TypeError, match="pass your own agent as agent="):
        vtb_agents.evaluate(build, tasks=task, out=tmp_path / "positional")
    with pytest.raises(TypeError, match="unknown option"):
        vtb_agents.evaluate("react", out=tmp_path / "other", max_rounds=3)


@pytest.mark.slow
def test_the_docs_python_api_example_runs(tmp_path, monkeypatch, capsys):
    code = page_blocks(API_PAGE, "python")[0].code
    monkeypatch.chdir(tmp_path)
    exec(compile(code, API_PAGE, "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("1.0 1.0 1.0 ")
    assert '"stdout": "(' in printed[1] and '"ok": true' in printed[1]


def test_the_docs_run_config_example_reads_a_run_back(tmp_path, monkeypatch, capsys):
    """Configuration's example reads the settings of a run in ``runs/latest`` back."""
    vtb_agents.evaluate("react", tasks=vtb_agents.load_tasks("sample", task_id="rs-finance-invoice"), model="replay",
                        out=tmp_path / "runs" / "latest", max_tool_rounds=7)
    monkeypatch.chdir(tmp_path)
    exec(compile(page_blocks(CONFIG_PAGE, "python")[0].code, CONFIG_PAGE, "exec"), {})
    assert capsys.readouterr().out.split() == ["replay", "rule", "7"]


# --- Objects where specs go: chat models, a judge, tools, an agent graph, and the async twin -------------

SAMPLE_IDS = ["rs-generalist-street", "te-generalist-map"]  # one rubric without a check: the judge decides it
VERDICT = {"verdict": "met", "justification": "The answer states it."}


def vision_and_judge(vision):
    """The agent model's turns (``vision``) and, for structured-output requests, the judge's verdict."""
    def respond(body):
        return json.dumps(VERDICT) if "response_format" in body else vision(body)
    return respond


def comparable(evaluation):
    """A summary without what names the run's objects (model, judge, strategy) or its folder."""
    summary = evaluation.model_dump(mode="json", exclude={"run_dir", "results", "model", "strategy", "report"})
    summary["judge"] = {k: v for k, v in summary["judge"].items() if k != "model"}
    return summary


@pytest.fixture(scope="module")
def spec_run(tmp_path_factory):
    """The reference run: model and judge given by spec strings, through OPENAI_BASE_URL."""
    out = tmp_path_factory.mktemp("spec") / "run"
    with OpenAIServer(vision_and_judge(VisionModel())) as server, pytest.MonkeyPatch.context() as env:
        env.setenv("OPENAI_BASE_URL", server.base_url)
        env.setenv("OPENAI_API_KEY", "k")
        summary = vtb_agents.evaluate("react", tasks=sample_tasks(), model="openai:gpt-4o", judge="openai:gpt-4o",
                                      out=out)
    return summary


def chat(server, name="gpt-4o"):
    return ChatOpenAI(model=name, base_url=server.base_url, api_key="k", temperature=0)


def sample_tasks():
    return [t for t in vtb_agents.load_tasks("sample") if t.id in SAMPLE_IDS]


@pytest.mark.slow
def test_chat_model_objects_give_the_spec_runs_summary(spec_run, tmp_path):
    with OpenAIServer(vision_and_judge(VisionModel())) as server:
        summary = vtb_agents.evaluate("react", tasks=sample_tasks(), model=chat(server), judge=chat(server),
                                      out=tmp_path / "run")
    judged = [b for b in server.requests if "response_format" in b]
    assert judged and len(judged) == summary.judge.calls == spec_run.judge.calls > 0
    assert comparable(summary) == comparable(spec_run)
    assert summary.apr == spec_run.apr and summary.outcomes == spec_run.outcomes == {"answered": 2}
    assert summary.tool_metrics.by_tool == {"python_image_processing": 3}
    assert summary.usage.model.calls == spec_run.usage.model.calls > 0 and summary.cost.total is not None
    assert summary.cost == spec_run.cost  # the object's model name finds the gpt-4o preset's prices
    assert [r.task_id for r in summary.results] == SAMPLE_IDS and summary.results[0].usage.model.calls > 0
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["config"]["model"] == run["config"]["judge"] == "object:ChatOpenAI(model=gpt-4o)"


@pytest.mark.slow
def test_aevaluate_inside_a_running_loop_gives_the_same_summary(spec_run, tmp_path):
    with OpenAIServer(vision_and_judge(VisionModel())) as server, \
            OpenAIServer(vision_and_judge(VisionModel())) as other:
        async def notebook_cell():
            asyncio.get_running_loop()  # a loop runs here, as in Jupyter
            awaited = await vtb_agents.aevaluate(tasks=sample_tasks(), model=chat(server), judge=chat(server),
                                                 out=tmp_path / "async")
            blocking = vtb_agents.evaluate(tasks=sample_tasks(), model=chat(other), judge=chat(other),
                                           out=tmp_path / "sync-in-loop")
            return awaited, blocking

        awaited, blocking = asyncio.run(notebook_cell())
    assert comparable(awaited) == comparable(blocking) == comparable(spec_run)
    assert isinstance(awaited, vtb_agents.Evaluation) and awaited.run_dir == tmp_path / "async"
    assert awaited.report == tmp_path / "async" / "report.html" and awaited.report.exists()


class RecordingJudge:
    """A judge object: says every rubric is met and keeps what it was asked."""

    name = "recording"
    calls_model = True

    def __init__(self):
        self.asked = []

    def judge(self, *, task, turn, rubric, answer):
        self.asked.append((task.id, turn, rubric.id, answer))
        return Judgement("met", "recorded")


@tool
def lookup_code(word: str) -> str:
    """Look up the secret code of a word."""
    CALLED.append(word)
    return f"code-of-{word}"


CALLED: list[str] = []


def calls_lookup_then_answers(body):
    if body["messages"][-1]["role"] == "tool":
        return "Final answer: " + body["messages"][-1]["content"]
    return {"tool_calls": [{"name": "lookup_code", "arguments": {"word": "invoice"}}]}


def test_a_judge_object_and_an_extra_tool_are_used(tmp_path):
    CALLED.clear()
    judge = RecordingJudge()
    task = vtb_agents.load_tasks("sample", task_id="rs-generalist-street")
    with OpenAIServer(calls_lookup_then_answers) as server:
        summary = vtb_agents.evaluate(tasks=task, model=chat(server), judge=judge, tools=[lookup_code],
                                      out=tmp_path / "run")
    offered = [t["function"]["name"] for t in server.requests[0]["tools"]]
    assert "lookup_code" in offered and "python_image_processing" in offered
    assert CALLED == ["invoice"] and summary.tool_metrics.by_tool == {"lookup_code": 1}
    assert judge.asked and all(answer == "Final answer: code-of-invoice" for *_, answer in judge.asked)
    assert summary.judge.calls == len(judge.asked)
    verdicts = [v for v in summary.results[0].grade.verdicts if v.judge == "recording"]
    assert len(verdicts) == len(judge.asked) and all(v.status == "met" for v in verdicts)
    config = json.loads((tmp_path / "run" / "run.json").read_text())["config"]
    assert config["judge"] == "object:RecordingJudge(name=recording)"
    assert config["extra_tools"] == ["object:StructuredTool(name=lookup_code)"]


def test_a_compiled_create_agent_graph_as_agent(tmp_path, caplog):
    CALLED.clear()
    task = vtb_agents.load_tasks("sample", task_id="rs-finance-invoice")
    with OpenAIServer(calls_lookup_then_answers) as server:
        graph = create_agent(chat(server), [lookup_code])
        # a ready graph cannot be given the episode's tools: it runs where the run's tools are its own
        summary = vtb_agents.evaluate(agent=graph, tasks=task, out=tmp_path / "run", max_tool_rounds=3,
                                      tools=[lookup_code], no_tools=True)
    first = server.requests[0]["messages"]
    assert first[0] == {"role": "system", "content": system_prompt("high")}  # the prompt level reaches it
    assert [t["function"]["name"] for t in server.requests[0]["tools"]] == ["lookup_code"]
    assert CALLED == ["invoice"] and summary.results[0].episode.turns[0].answer == "Final answer: code-of-invoice"
    assert summary.strategy.startswith("object:CompiledStateGraph(") and summary.outcomes == {"answered": 1}
    assert summary.results[0].episode.settings.tools == ["lookup_code"]  # what the agent had, as recorded
    assert "middleware" not in caplog.text  # no per-task warning about a factory it is not


def test_a_compiled_graph_without_the_runs_tools_is_refused_naming_them(tmp_path):
    task = vtb_agents.load_tasks("sample", task_id="rs-finance-invoice")
    graph = create_agent(ScriptedChatModel(script=lambda messages: AIMessage("42")), [lookup_code])
    with pytest.raises(RuntimeError) as refused:
        vtb_agents.evaluate(agent=graph, tasks=task, out=tmp_path / "run")
    message = str(refused.value)
    assert message.startswith("agent 'object:CompiledStateGraph(")
    assert ("lacks the run's tools browser_get_page_text, calculator, historical_weather, python_image_processing, "
            "python_interpreter, web_search") in message
    assert "has tools the run does not offer: lookup_code" in message and "Pass a factory instead" in message
    assert not (tmp_path / "run").exists()  # refused before anything was written
    bare = create_agent(ScriptedChatModel(script=lambda messages: AIMessage("42")), [])
    with pytest.raises(RuntimeError, match="lacks the run's tools browser_get_page_text, calculator"):
        vtb_agents.evaluate(agent=bare, tasks=task, out=tmp_path / "bare")
    assert not (tmp_path / "bare").exists()
    done = vtb_agents.evaluate(agent=bare, tasks=task, out=tmp_path / "none", no_tools=True)  # no tools: it fits
    assert done.outcomes == {"answered": 1} and done.results[0].episode.settings.tools == []


def test_an_object_run_resumes_from_python_only(tmp_path):
    task = vtb_agents.load_tasks("sample", task_id="rs-finance-invoice")
    with OpenAIServer(lambda body: "42") as server:
        model = chat(server)
        first = vtb_agents.evaluate(tasks=task, model=model, out=tmp_path / "run")
        asked = len(server.requests)
        again = vtb_agents.evaluate(tasks=task, model=model, out=tmp_path / "run", resume=True)
        assert len(server.requests) == asked  # nothing left to run
        result = CliRunner().invoke(app, ["run", "--task-id", "rs-finance-invoice", "--model", "openai:gpt-4o",
                                          "--out", str(tmp_path / "run"), "--resume"],
                                    env={"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "k"})
    assert comparable(again) == comparable(first)
    assert result.exit_code != 0
    assert "was run from Python with objects (model: object:ChatOpenAI(model=gpt-4o))" in result.output
    with pytest.raises(ValueError, match="names a Python object a run was given"):
        vtb_agents.evaluate(tasks=task, model="object:ChatOpenAI(model=gpt-4o)", out=tmp_path / "other")


def test_bad_object_arguments_are_refused_before_the_run(tmp_path):
    task = vtb_agents.load_tasks("sample", task_id="rs-finance-invoice")
    graph = create_agent(ScriptedChatModel(script=lambda messages: AIMessage("42")), [])
    with pytest.raises(ValueError, match="agent= brings its own model"):
        vtb_agents.evaluate(agent=graph, model="openai:gpt-4o", tasks=task, out=tmp_path / "a")
    with pytest.raises(ValueError, match="cannot be combined with strategy 'zoom'"):
        vtb_agents.evaluate("zoom", agent=graph, tasks=task, out=tmp_path / "b")
    with pytest.raises(ValueError, match="tool name\\(s\\) calculator given twice"):
        mine = tool("calculator", description="mine")(lambda expression: "1")
        vtb_agents.evaluate(tasks=task, tools=[mine], out=tmp_path / "c")
    with pytest.raises(TypeError, match="judge must be a spec, a chat model or a judge object"):
        vtb_agents.evaluate(tasks=task, judge=object(), out=tmp_path / "d")
    assert not any((tmp_path / name).exists() for name in "abcd")


def test_objects_cannot_reach_remote_workers(tmp_path):
    class Remote:
        in_process = False

        def run(self, tasks, job, sink, stop):
            raise AssertionError("never reached")

    task = vtb_agents.load_tasks("sample", task_id="rs-finance-invoice")
    with pytest.raises(RunError, match="objects from Python .* cannot reach remote workers"):
        run_suite(task, RunConfig(), tmp_path / "run", executor=Remote(),
                  objects=RunObjects(judge=RecordingJudge()))
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_the_docs_notebook_cell_runs_as_written(tmp_path, monkeypatch, capsys):
    """The tutorial's notebook cell, top-level ``await`` and all, as IPython runs a cell."""
    cell = page_blocks(API_PAGE, "python")[1].code
    assert "await vtb_agents.aevaluate(" in cell
    monkeypatch.chdir(tmp_path)
    with OpenAIServer(vision_and_judge(VisionModel())) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        code = compile(cell, API_PAGE, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        asyncio.run(eval(code, {}))  # noqa: S307 (the docs' own code)
    printed = capsys.readouterr().out.splitlines()
    apr, ars, outcomes, cost = re.fullmatch(r"(\S+) (\S+) (\{.*\}) (\S+)", printed[0]).groups()
    assert apr == "0.0" and float(ars) > 0 and outcomes == "{'answered': 4}" and float(cost) > 0  # "42" is wrong
    task_id, outcome, tokens = printed[1].split()
    assert (task_id, outcome) == ("rs-chemistry-bench", "answered") and int(tokens) > 0
    assert all("unit_price" in [t["function"]["name"] for t in body["tools"]]
               for body in server.requests if "response_format" not in body)
    assert any("response_format" in body and body["model"] == "o4-mini" for body in server.requests)


def test_no_vtb_command_is_printed_for_an_object_run():
    from vtb_agents.cli.hints import HintError, config_flags

    for config in (RunConfig(model="object:ChatOpenAI(model=m)"), RunConfig(extra_tools=("object:T(name=t)",))):
        with pytest.raises(HintError, match="is a Python object"):
            config_flags(config)


def direct_strategy():
    """A strategy object: one model call per turn, no tools (the strategy contract's own example)."""
    def answer(state, runtime):
        ctx = runtime.context
        reply = ctx.model.invoke([SystemMessage(ctx.system_prompt), *ctx.materialize(state["messages"])])
        return {"messages": [reply], "status": "answered"}

    def build():
        graph = StateGraph(TurnState, context_schema=EpisodeContext, input_schema=TurnInput, output_schema=TurnOutput)
        graph.add_node("answer", answer)
        graph.add_edge(START, "answer")
        return graph.compile(name="direct")

    return Strategy(name="direct", summary="one model call, no tools", build=build)


def test_a_strategy_object_with_a_model_object(tmp_path):
    task = vtb_agents.load_tasks("sample", task_id="rs-finance-invoice")
    with OpenAIServer(lambda body: "The total is 42.") as server:
        summary = vtb_agents.evaluate(direct_strategy(), tasks=task, model=chat(server), out=tmp_path / "run")
    assert len(server.requests) == 1 and "tools" not in server.requests[0]  # one call, no tools: "direct" ran
    assert summary.strategy == "object:Strategy(name=direct)" and summary.results[0].strategy == summary.strategy
    assert summary.results[0].episode.turns[0].answer == "The total is 42." and summary.usage.model.calls == 1
