"""The strategy library: every strategy runs the bundled suite end to end with a scripted model.

The scripted model answers whatever a strategy asks (a plan, region proposals, a review) and
otherwise crops the turn's first image once and answers, so each strategy's own steps are visible in
the conversation and in what the model received.
"""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from typer.testing import CliRunner

from vtb_agents.cli import app
from vtb_agents.models.scripted import ScriptedChatModel
from vtb_agents.rundir.store import ResultsStore
from vtb_agents.runner.executors import LocalExecutor
from vtb_agents.runner.run import RunConfig, run_suite
from vtb_agents.strategies import BUILTIN
from vtb_agents.strategies.marks import mark_table
from vtb_agents.strategies.plan import PLAN_INSTRUCTION
from vtb_agents.strategies.reflect import CRITIQUE_REQUEST
from vtb_agents.strategies.zoom import PROPOSE_INSTRUCTION, REFINE_INSTRUCTION, absolute_box, parse_regions
from vtb_agents.tasks import load_tasks

CROP = "from PIL import Image\nImage.open('image_0.png').crop((0, 0, 60, 40)).save('transformed_image_{n}.png')"


def text_of(message: BaseMessage) -> str:
    return message.text if isinstance(message.content, (str, list)) else ""


def strategy_script(messages: list[BaseMessage]) -> AIMessage:
    """Plays every strategy's model: plans, proposes regions, reviews; crops once per turn; answers."""
    request = text_of(messages[-1]) if isinstance(messages[-1], HumanMessage) else ""  # a step's own request
    if PLAN_INSTRUCTION in request:
        return AIMessage("1. Crop the top-left corner. 2. Read it. 3. Answer.")
    if PROPOSE_INSTRUCTION.split("{")[0] in request:
        return AIMessage('{"regions": [{"source": "image_0.png", "box": [0, 0, 0.5, 0.5], "confidence": 0.4}]}')
    turn_start = max(i for i, m in enumerate(messages) if (m.id or "").startswith("turn-"))
    if REFINE_INSTRUCTION.split("{")[0] in request:
        turn_number = int((messages[turn_start].id or "").removeprefix("turn-")) + 1
        refined = sum(1 for m in messages[turn_start:] if isinstance(m, AIMessage) and '"regions"' in m.text)
        return AIMessage(f'{{"regions": [{{"source": "zoom_t{turn_number}_0.png", "box": [0.5, 0.5, 1, 1], '
                         '"confidence": 0.4}]}' if refined == 1 else
                         f'{{"regions": [{{"source": "zoom_t{turn_number}_1.png", "box": [0, 0, 0.5, 0.5], '
                         '"confidence": 0.1}]}')
    if isinstance(messages[-1], HumanMessage) and messages[-1].text == CRITIQUE_REQUEST:
        return AIMessage("The answer is complete.")
    turn = messages[turn_start:]
    if not any(isinstance(m, ToolMessage) for m in turn) or messages[-1].text.startswith("Revise"):
        calls = sum(1 for m in messages if isinstance(m, AIMessage) and m.tool_calls)
        return AIMessage("", tool_calls=[{"name": "python_image_processing", "id": f"c{calls}",
                                          "args": {"code": CROP.format(n=calls)}}])
    return AIMessage("Final answer: 42.")


@pytest.fixture(scope="module")
def sample():
    return load_tasks("sample")


@pytest.mark.slow
@pytest.mark.parametrize("name", list(BUILTIN))
def test_every_strategy_runs_the_bundled_suite_without_episode_errors(name, sample, tmp_path, monkeypatch):
    from vtb_agents.runner import plan

    model = ScriptedChatModel(script=strategy_script)
    # a provider stand-in
    monkeypatch.setattr(plan, "model_factory", lambda spec, *args, **kwargs: lambda task: model)
    summary = run_suite(sample, RunConfig(model="scripted:strategy", strategy=name, tasks="sample"), tmp_path / "run",
                        executor=LocalExecutor(2))
    results, _ = ResultsStore(tmp_path / "run").load()
    assert len(results) == len(sample) == summary.tasks
    assert [r.task_id for r in results if r.episode.status != "completed"] == []
    assert summary.graded == len(sample) and summary.strategy == name
    assert {r.strategy for r in results} == {name} and {r.episode.settings.strategy for r in results} == {name}
    multi = [r for r in results if r.turncase == "multi-turn"]
    assert multi and all(len(r.episode.turns) == len(next(t for t in sample if t.id == r.task_id).turns)
                         for r in multi)
    assert all(turn.answer for r in results for turn in r.episode.turns)
    sent = [m for call in model.calls for m in call]
    shown = {b.get("text", "").split(" ")[0] for m in sent
             if isinstance(m, HumanMessage) and isinstance(m.content, list)
             for b in m.content if isinstance(b, dict) and b.get("type") == "text"}
    if name == "marks":
        assert "marked_image_0.png" in shown
    if name == "zoom":
        assert {"zoom_t1_0.png", "zoom_t1_1.png"} <= shown  # the unsure view was searched one level deeper
        assert "zoom_t1_2.png" not in shown  # zoom_t1_1 is at the depth bound: not searched deeper
    if name == "plan":
        assert any(isinstance(m, AIMessage) and m.text.startswith("1. Crop") for m in sent)
    if name == "reflect":
        assert any(isinstance(m, AIMessage) and m.text == "The answer is complete." for m in sent)
        assert all(len(turn.tool_calls) == 2 for r in results for turn in r.episode.turns if turn.status == "answered")


def test_compare_shows_runs_of_two_strategies(sample, tmp_path):
    tasks = [t for t in sample if t.id in ("rs-finance-invoice", "pr-maths-plot")]
    for name in ("react", "reflect"):
        run_suite(tasks, RunConfig(model="replay", strategy=name, tasks="sample"), tmp_path / name)
        assert json.loads((tmp_path / name / "run.json").read_text())["config"]["strategy"] == name
    result = CliRunner().invoke(app, ["compare", str(tmp_path / "react"), str(tmp_path / "reflect"),
                                      "--out", str(tmp_path / "compare.html")])
    assert result.exit_code == 0, result.output
    assert "strategy react" in result.output and "strategy reflect" in result.output
    html = (tmp_path / "compare.html").read_text()
    assert "strategy react" in html and "strategy reflect" in html


def test_vtb_strategies_lists_the_library():
    result = CliRunner().invoke(app, ["strategies"])
    assert result.exit_code == 0
    for name in ("react", "zoom", "marks", "plan", "reflect"):
        assert name in result.output


def test_bad_strategy_specs_are_clear_errors(tmp_path):
    result = CliRunner().invoke(app, ["run", "--strategy", "nope", "--out", str(tmp_path / "r")])
    assert result.exit_code != 0 and "unknown strategy 'nope'" in result.output
    result = CliRunner().invoke(app, ["run", "--strategy", "no_such_module:f", "--out", str(tmp_path / "r2")])
    assert result.exit_code != 0 and "cannot load it" in result.output
    result = CliRunner().invoke(app, ["run", "--strategy", "zoom", "--model", "agent:m:f",
                                      "--out", str(tmp_path / "r3")])
    assert result.exit_code != 0 and "cannot be combined with --strategy zoom" in result.output


def test_zoom_geometry_and_parsing():
    assert absolute_box((0.5, 0.0, 1.0, 0.5), (0.5, 0.5, 1.0, 1.0)) == (0.75, 0.25, 1.0, 0.5)
    assert parse_regions('{"regions": [{"source": "image_0.png", "box": [0.1, 0.2, 0.3]}]}') == []
    assert mark_table(["a.png"], {"a.png": (4, 4)}, grid=1) == "a.png: 1=(0,0,4,4)"


def test_confident_views_are_not_searched_deeper():
    from vtb_agents.strategies.zoom import Region, View, plan_views

    known = {"zoom_t1_0.png": View("zoom_t1_0.png", "image_0.png", (0.0, 0.0, 0.5, 0.5), 1, confidence=0.9),
             "zoom_t1_1.png": View("zoom_t1_1.png", "image_0.png", (0.5, 0.5, 1.0, 1.0), 1, confidence=0.2)}
    regions = [Region(source=name, box=(0, 0, 0.5, 0.5)) for name in ("zoom_t1_0.png", "zoom_t1_1.png", "nope.png")]
    (view,) = plan_views(regions, known, ["image_0.png"], made=2, turn=1)
    assert view.name == "zoom_t1_2.png" and view.box == (0.5, 0.5, 0.75, 0.75) and view.depth == 2


def test_the_docs_strategy_runs_as_module_function(sample, tmp_path, monkeypatch):
    from support.docs_blocks import page_blocks

    from vtb_agents.runner import plan

    [block] = [b for b in page_blocks("docs/tutorials/write-a-strategy.md", "python")
               if b.code.startswith("# my_pkg/my_strategy.py")]
    code = block.code
    (tmp_path / "my_pkg").mkdir()
    (tmp_path / "my_pkg" / "__init__.py").write_text("")
    (tmp_path / "my_pkg" / "my_strategy.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))

    def script(messages):
        if "Describe what the images show" in messages[-1].text:
            return AIMessage("A document with a table.")
        return strategy_script(messages)

    model = ScriptedChatModel(script=script)
    monkeypatch.setattr(plan, "model_factory", lambda spec, *args, **kwargs: lambda task: model)
    tasks = [t for t in sample if t.id in ("rs-finance-invoice", "te-generalist-map")]
    summary = run_suite(tasks, RunConfig(model="scripted:x", strategy="my_pkg.my_strategy:strategy"), tmp_path / "run")
    results, _ = ResultsStore(tmp_path / "run").load()
    assert summary.graded == 2 and all(r.episode.status == "completed" for r in results)
    assert {r.strategy for r in results} == {"my_pkg.my_strategy:strategy"}
    assert {r.episode.settings.strategy for r in results} == {"my_pkg.my_strategy:strategy"}
    assert any(isinstance(m, AIMessage) and m.text == "A document with a table." for call in model.calls for m in call)
