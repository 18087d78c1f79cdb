"""A finished run is priced at the prices it recorded (``run.json``'s ``model.prices`` and
``judge.prices``, the plan's at the run's start), never at the presets of the vtb that reads it
(docs/how-to/cost-and-rate-limits.md): a regrade's ``summary.json``, ``report.html`` and ``vtb transcript``
give the run's cost after the presets changed or forgot its model; a regrade (``vtb grade``, with the
run's judge or ``--judge`` another) resolves its judge anew and records that judge's prices, at which
its calls are priced."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import write_task
from support.cli import openai_env, vtb
from support.openai_server import OpenAIServer
from vtb_agents.config import RunConfig
from vtb_agents.models import presets as preset_table
from vtb_agents.rundir.errors import RunError
from vtb_agents.rundir.layout import RUN_FILE
from vtb_agents.rundir.read import read_record
from vtb_agents.runner.plan import plan_records
from vtb_agents.runner.regrade import regrade_run
from vtb_agents.runner.run import run_suite
from vtb_agents.tasks import load_tasks

MODEL, JUDGE, OTHER_JUDGE = "gpt-4o", "o4-mini", "gpt-4.1"
TASK = "priced"
# USD per million tokens at the run's start (the presets): gpt-4o input 2.50, output 10.00; o4-mini input 1.10,
# output 4.40; gpt-4.1 input 2.00, output 8.00. The task has one turn (one model call) and one rubric the
# judge decides (one judge call; the other is a deterministic check).
MODEL_COST = (2000 * 2.50 + 100 * 10.00) / 1e6  # 0.006
JUDGE_COST = (1000 * 1.10 + 50 * 4.40) / 1e6  # 0.00132
OTHER_JUDGE_COST = (1000 * 2.00 + 50 * 8.00) / 1e6  # 0.0024


def respond(body: dict) -> dict:
    """The agent model answers at once (2,000 input tokens, 100 output); a judge finds the rubric met
    (1,000 input, 50 output). No cached tokens."""
    if body["model"] == MODEL:
        return {"content": "The number is 42.",
                "usage": {"prompt_tokens": 2000, "completion_tokens": 100, "total_tokens": 2100}}
    return {"content": json.dumps({"verdict": "met", "justification": "Concise."}),
            "usage": {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050}}


@pytest.fixture(scope="module")
def server() -> OpenAIServer:
    with OpenAIServer(respond) as running:
        yield running


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory, server: OpenAIServer) -> Path:
    """A finished run of gpt-4o judged by o4-mini, through the local server (written once; tests work on copies)."""
    root = tmp_path_factory.mktemp("prices")
    write_task(root / "tasks", TASK)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in openai_env(server.base_url).items():
            patch.setenv(name, value)
        run_suite(load_tasks(str(root / "tasks")), RunConfig(tasks=str(root / "tasks"), model=MODEL, judge=JUDGE),
                  root / "run")
    return root / "run"


@pytest.fixture
def run_dir(finished: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "run"
    shutil.copytree(finished, copy)
    return copy


def cost(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())["cost"]


def changed_presets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The presets of a later vtb: every price ten times what the run paid."""
    later = {name: replace(p, prices=replace(p.prices, **{k: v * 10 for k, v in p.prices.known().items()
                                                         if k != "batch"}))
             for name, p in preset_table.presets().items()}
    monkeypatch.setattr(preset_table, "presets", lambda: later)
    assert preset_table.prices_for(MODEL).input == 25.0  # type: ignore[union-attr]


def test_run_json_records_the_prices_the_run_was_priced_at(finished: Path) -> None:
    record = json.loads((finished / RUN_FILE).read_text())
    assert record["model"]["prices"] == {"input": 2.5, "cached_input": 1.25, "output": 10.0, "batch": 0.5}
    assert record["judge"]["prices"] == {"input": 1.1, "cached_input": 0.275, "output": 4.4, "batch": 0.5}
    assert (cost(finished)["model"], cost(finished)["judge"]) == (MODEL_COST, round(JUDGE_COST, 6))
    assert cost(finished)["total"] == round(MODEL_COST + JUDGE_COST, 6)


def test_a_regrade_after_the_presets_changed_keeps_the_models_recorded_prices(
        run_dir: Path, server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    changed_presets(monkeypatch)
    for name, value in openai_env(server.base_url).items():
        monkeypatch.setenv(name, value)
    regrade_run(run_dir, judge_cache=run_dir / "fresh_judge_cache.sqlite")  # the judge asked again, now
    # summary.json: the model at the run's prices (not ten times them), the judge's new calls at the regrade's
    assert (cost(run_dir)["model"], cost(run_dir)["judge"]) == (MODEL_COST, round(10 * JUDGE_COST, 6))
    record = json.loads((run_dir / RUN_FILE).read_text())
    assert record["model"]["prices"]["input"] == 2.5  # the episodes' calls were made, and priced, at the run
    assert record["judge"]["prices"]["input"] == 11.0  # the regrade's judge calls, at the regrade's prices


def test_a_regrade_with_another_judge_records_that_judges_prices(run_dir: Path, server: OpenAIServer,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in openai_env(server.base_url).items():
        monkeypatch.setenv(name, value)
    regrade_run(run_dir, OTHER_JUDGE)
    record = json.loads((run_dir / RUN_FILE).read_text())
    assert record["judge"]["spec"] == "openai:gpt-4.1"
    assert record["judge"]["prices"] == {"input": 2.0, "cached_input": 0.5, "output": 8.0, "batch": 0.5}
    assert record["model"]["prices"]["input"] == 2.5  # the model's, as the run recorded them
    assert (cost(run_dir)["model"], cost(run_dir)["judge"]) == (MODEL_COST, round(OTHER_JUDGE_COST, 6))


def test_a_resume_after_the_presets_changed_spends_its_budget_at_the_recorded_prices(
        run_dir: Path, server: OpenAIServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The finished task cost $0.00732 at the run's prices, ten times that at the later presets'. A resume
    # with a $0.01 limit runs the task added (at the presets' prices it would stop before it: $0.0732 spent).
    changed_presets(monkeypatch)
    for name, value in openai_env(server.base_url).items():
        monkeypatch.setenv(name, value)
    config = read_record(run_dir).config.model_copy(update={"cost_limit": 0.01})
    assert plan_records(config, run_dir).model.prices.input == 2.5  # type: ignore[union-attr]
    assert plan_records(config, run_dir).judge.model.prices.input == 1.1  # type: ignore[union-attr]
    assert plan_records(config).model.prices.input == 25.0  # type: ignore[union-attr]  # a new run: today's
    more = tmp_path / "more"
    write_task(more, TASK)
    write_task(more, "added")
    summary = run_suite(load_tasks(str(more)), config, run_dir, resume=True)
    assert summary.complete and summary.outcomes == {"answered": 2}, summary.outcomes
    assert cost(run_dir)["model"] == round(2 * MODEL_COST, 6)  # both tasks at the recorded prices
    assert json.loads((run_dir / RUN_FILE).read_text())["model"]["prices"]["input"] == 2.5


def forget_the_presets(run_dir: Path) -> None:
    """Rewrite ``run.json`` as if its model and judge had presets the reading vtb no longer has: specs no
    preset knows, the recorded prices kept."""
    path = run_dir / RUN_FILE
    record = json.loads(path.read_text())
    record["config"]["model"], record["config"]["judge"] = "openai:retired-model", "openai:retired-judge"
    record["model"].update(spec="openai:retired-model", preset=None)
    record["judge"].update(spec="openai:retired-judge", preset=None)
    path.write_text(json.dumps(record))


SHOWN = f"${MODEL_COST + JUDGE_COST:,.4f}"
"""The task's cost as the report and `vtb transcript` show it: $0.0073."""


def test_the_report_prices_a_task_at_the_recorded_prices(run_dir: Path) -> None:
    forget_the_presets(run_dir)
    report = vtb("report", str(run_dir))
    assert report.returncode == 0, report.stderr
    page = (run_dir / "report.html").read_text()
    assert f'data-v="{round(MODEL_COST + JUDGE_COST, 6)}">{SHOWN}</td>' in page


def test_vtb_transcript_prices_a_task_at_the_recorded_prices(run_dir: Path) -> None:
    forget_the_presets(run_dir)
    transcript = vtb("transcript", str(run_dir), TASK, columns=200)
    assert transcript.returncode == 0, transcript.stderr
    assert f"cost {SHOWN}" in transcript.stdout, transcript.stdout


def test_a_recorded_price_of_an_unknown_name_is_refused_naming_it(run_dir: Path) -> None:
    from vtb_agents.analysis.cost import recorded_prices
    from vtb_agents.rundir.read import read_record

    path = run_dir / RUN_FILE
    record = json.loads(path.read_text())
    record["judge"]["prices"]["per_call"] = 0.01
    path.write_text(json.dumps(record))
    with pytest.raises(RunError, match=r"run\.json: judge\.prices has unknown price name\(s\) per_call"):
        recorded_prices(read_record(run_dir))
    transcript = vtb("transcript", str(run_dir), TASK)
    assert transcript.returncode != 0 and "Traceback" not in transcript.stderr
    assert "judge.prices has unknown price name(s) per_call" in transcript.stderr
