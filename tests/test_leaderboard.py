"""The leaderboard of several models (issue #33, "Many models in one command"), from Python:
``evaluate(model=[...])`` runs every model into its own run directory and returns the leaderboard with
each model's Evaluation; ``leaderboard.json`` carries its format version and is read in one place;
``leaderboard.html`` shows the figures and links each model's report, in a real headless Chromium
(Playwright, the system chromium); run directory names are filesystem-safe slugs of the specs."""

from __future__ import annotations

import json

import pytest
from conftest import write_task
from support.browser import CHROMIUM, offline_context
from langchain_core.messages import AIMessage

import vtb_agents
from vtb_agents.models.scripted import ScriptedChatModel
from vtb_agents.rundir.errors import FormatVersionError, RunError
from vtb_agents.rundir.leaderboard import LEADERBOARD_FORMAT, model_dirs, model_slug, read_leaderboard



@pytest.fixture(scope="module")
def evaluations(tmp_path_factory: pytest.TempPathFactory) -> vtb_agents.Evaluations:
    """``evaluate`` of two models on two tasks: ``replay`` (the reference answers: passes) and a chat
    model object that answers 41 (fails the critical check)."""
    root = tmp_path_factory.mktemp("board-tasks")
    for task_id in ("t-a", "t-b"):
        write_task(root, task_id)
    wrong = ScriptedChatModel(script=lambda messages: AIMessage("Final answer: 41."))
    out = tmp_path_factory.mktemp("board") / "out"
    return vtb_agents.evaluate(tasks=str(root), model=["replay", wrong], judge="rule", out=out)


def test_evaluate_of_several_models_returns_the_leaderboard_and_each_models_evaluation(evaluations):
    board = evaluations
    assert [row.model for row in board.rows][0] == "replay"  # best APR first
    assert len(board.rows) == len(board.runs) == 2 and board.page.name == "leaderboard.html"
    folder = board.page.parent
    assert read_leaderboard(folder / "leaderboard.json").model_dump() == \
        board.model_dump(exclude={"runs", "page"})  # what evaluate returns is what the file holds
    for row in board.rows:
        run = board.runs[row.model]
        summary = json.loads((folder / row.run_dir / "summary.json").read_text())
        assert run.run_dir == folder / row.run_dir and run.report == folder / row.run_dir / "report.html"
        assert (row.apr, row.apr_ci95, row.ars, row.ars_ci95, row.outcomes) == \
            (summary["apr"], summary["apr_ci95"], summary["ars"], summary["ars_ci95"], summary["outcomes"])
        assert len(run.results) == 2
    assert [row.apr for row in board.rows] == [1.0, 0.0]
    assert board.rows[1].model.startswith("object:ScriptedChatModel")


def test_the_leaderboard_file_carries_its_format_version_and_another_is_refused(evaluations, tmp_path):
    source = evaluations.page.parent / "leaderboard.json"
    data = json.loads(source.read_text())
    assert next(iter(data)) == "format_version" and data["format_version"] == LEADERBOARD_FORMAT
    newer = tmp_path / "leaderboard.json"
    newer.write_text(json.dumps({**data, "format_version": LEADERBOARD_FORMAT + 1}))
    with pytest.raises(FormatVersionError, match=f"{newer}: format version {LEADERBOARD_FORMAT + 1}"):
        read_leaderboard(newer)
    newer.write_text(json.dumps({"format_version": LEADERBOARD_FORMAT, "rows": []}))
    with pytest.raises(RunError, match="not a readable leaderboard.json: .*judge"):
        read_leaderboard(newer)


def test_run_directories_are_safe_slugs_of_the_specs_and_clashes_are_refused(tmp_path):
    assert model_slug("openai:gpt-4.1") == "openai-gpt-4.1"
    assert model_slug("agent:my_pkg.agents:build") == "agent-my_pkg.agents-build"
    assert model_slug("../../etc/passwd") == "etc-passwd"  # never a path out of --out
    assert model_slug("object:ChatOpenAI(model=gpt-4o)") == "object-ChatOpenAI-model-gpt-4o"
    with pytest.raises(ValueError, match="no letter or digit"):
        model_slug(":/.")
    assert model_dirs(["replay", "openai:o3"], tmp_path) == {"replay": tmp_path / "replay",
                                                             "openai:o3": tmp_path / "openai-o3"}
    with pytest.raises(ValueError, match="'openai:o3' and --model 'openai/o3' would share the run directory"):
        model_dirs(["openai:o3", "openai/o3"], tmp_path)
    with pytest.raises(ValueError, match="given twice"):
        model_dirs(["replay", "replay"], tmp_path)


@pytest.fixture
def browser():
    pytest.importorskip("playwright.sync_api")
    if not CHROMIUM.exists():
        pytest.skip("needs the system chromium (make installs it)")
    with offline_context() as context:
        yield context


@pytest.mark.slow
def test_the_leaderboard_page_shows_the_figures_and_links_each_models_report_in_chromium(evaluations, browser):
    page = browser.new_page()
    page.goto(evaluations.page.as_uri())
    cells = page.eval_on_selector_all("table.leaderboard tbody tr",
                                      "rows => rows.map(r => [...r.cells].map(c => c.textContent))")
    assert [row[0] for row in cells] == [row.model for row in evaluations.rows]
    replay, wrong = cells
    assert replay[3] == "100.0%" and wrong[3] == "0.0%"  # APR
    for cells_of, row in zip(cells, evaluations.rows):  # cost and cost per pass: unknown where the summary's is None
        assert cells_of[7:9] == ["unknown" if value is None else f"${value:,.4f}"
                                 for value in (row.cost, row.cost_per_pass)]
    assert wrong[8] == "unknown"  # no task passed: no cost per pass, never $0
    assert replay[-1] == "answered 2"
    for index, row in enumerate(evaluations.rows):
        page.goto(evaluations.page.as_uri())
        page.locator("table.leaderboard tbody tr").nth(index).locator("a").click()
        page.wait_for_load_state()
        assert page.url == (evaluations.page.parent / row.run_dir / "report.html").as_uri()
        assert page.locator("#task-table tbody tr").count() == 2  # the model's own report, its two tasks


def test_the_models_of_one_command_share_one_registry_of_budgets_one_verdict_cache_and_one_budget(
        tmp_path, monkeypatch):
    from vtb_agents.config import run_config
    from vtb_agents.runner.many import plan_models

    monkeypatch.setenv("OPENAI_API_KEY", "k")
    out = tmp_path / "out"
    planned = plan_models(run_config(tasks="sample", judge="openai:gpt-4o", token_limit=10), ["replay", "openai:beta"],
                          out)
    replay, beta = planned.plans.values()
    assert replay.limiters.budgets is beta.limiters.budgets  # the judge's account: one budget for both runs
    assert planned.judge_cache == out / "judge_cache.sqlite"
    assert planned.dirs == {"replay": out / "replay", "openai:beta": out / "openai-beta"}
    assert planned.budget.token_limit == 10 and set(planned.budget.spend.by_model) == {"replay", "openai:beta"}
    with pytest.raises(ValueError, match="--cost-limit needs the model's prices, and 'openai:beta' has none"):
        plan_models(run_config(tasks="sample", judge="rule", cost_limit=1.0), ["openai:gpt-4.1", "openai:beta"], out)
    assert not out.exists()  # planned and checked: nothing written
