"""The run directory package: its layout, typed records and the one reader of finished runs."""

from __future__ import annotations

import json

import pytest

from vtb_agents.api import RunSummary as ApiRunSummary
from vtb_agents.rundir import layout
from vtb_agents.rundir.errors import RunError
from vtb_agents.config import run_config
from vtb_agents.defaults import strategy_name
from vtb_agents.rundir.read import ReportError, load_run, open_finished_run, read_meta
from vtb_agents.rundir.records import RunRecord, RunSummary, ToolMetrics

from vtb_agents.runner.run import run_suite
from vtb_agents.tasks import load_tasks


@pytest.fixture
def finished_run(task_root, tmp_path):
    out = tmp_path / "run"
    run_suite(load_tasks(task_root), run_config(max_tool_rounds=5, tasks=str(task_root)), out)
    return out


def test_a_run_writes_the_layout_and_typed_records(finished_run):
    for name in (layout.RUN_FILE, layout.RESULTS_FILE, layout.SUMMARY_FILE, layout.ARTIFACTS_DIR,
                 layout.CHECKPOINT_FILE, layout.LOCK_FILE):
        assert (finished_run / name).exists(), name
    assert not (finished_run / "results.sqlite").exists()
    record = RunRecord.model_validate_json((finished_run / layout.RUN_FILE).read_text())
    assert record.config.episode.max_tool_rounds == 5 and record.model and record.started_at
    summary = read_meta(finished_run).summary
    assert ApiRunSummary is RunSummary
    assert summary.tasks == 1 and summary.run_dir == finished_run and summary.by_category["region_switch"].n == 1


def test_both_views_come_from_the_one_reader_and_refuse_a_torn_run(finished_run):
    finished = open_finished_run(finished_run)
    report = load_run(finished_run)
    assert [r.task_id for r in finished.results] == [r.task_id for r in report.results] == ["t-corner"]
    assert finished.run == report.run == RunRecord.model_validate_json((finished_run / layout.RUN_FILE).read_text())
    assert finished.run.model_dump(mode="json") == json.loads((finished_run / layout.RUN_FILE).read_text())
    with (finished_run / layout.RESULTS_FILE).open("a") as handle:  # what a crash mid-append leaves
        handle.write('{"task_id": "x", "cat')
    with pytest.raises(RunError, match="partial line"):
        open_finished_run(finished_run)
    with pytest.raises(ReportError, match="partial line"):
        load_run(finished_run)


def test_summary_is_written_through_its_typed_record(tmp_path):
    from pydantic import ValidationError

    from vtb_agents.rundir.create import write_summary

    summary = {"tasks": 2, "graded": 2, "apr": 0.5, "ars": 0.75, "complete": True,
               "by_category": {"temporal": {"n": 2, "graded": 2, "apr": 0.5, "ars": 0.75}}, "extra_field": 1}
    typed = write_summary(tmp_path, summary)
    assert typed.by_category["temporal"].apr == 0.5 and json.loads((tmp_path / "summary.json").read_text()) == summary
    with pytest.raises(ValidationError):
        write_summary(tmp_path / "bad", {"tasks": "many", "graded": 2, "apr": None, "ars": None})
    assert not (tmp_path / "bad").exists()  # nothing written for a summary that breaks the record


def test_readers_get_typed_records_and_the_recorded_settings(finished_run):
    meta = read_meta(finished_run)
    assert isinstance(meta.run, RunRecord) and isinstance(meta.summary, RunSummary)
    assert isinstance(meta.summary.tool_metrics, ToolMetrics) and meta.summary.tool_metrics.calls >= 1
    assert meta.run.model is not None and meta.run.model.spec == "replay" and meta.run.judge.spec == "rule"
    assert meta.summary.episodes.errors == 0 and meta.summary.usage.tasks_without_usage == 0
    settings = meta.run.config
    assert (settings.model, settings.strategy_spec, settings.judge) == ("replay", "react", "rule")
    assert settings.episode.max_tool_rounds == 5 and not hasattr(meta, "settings")
    assert open_finished_run(finished_run).run.config == settings


def test_a_damaged_record_is_an_error_naming_its_file_and_field(finished_run):
    summary_file = finished_run / layout.SUMMARY_FILE
    summary_file.write_text(json.dumps({**json.loads(summary_file.read_text()), "tool_metrics": {"calls": "many"}}))
    with pytest.raises(ReportError, match=r"summary\.json: not a readable summary\.json.*tool_metrics\.calls"):
        read_meta(finished_run)
    run_file = finished_run / layout.RUN_FILE
    record = json.loads(run_file.read_text())
    del record["config"]["judge"]
    run_file.write_text(json.dumps(record))
    with pytest.raises(RunError, match=r"run\.json: not a readable run\.json: config: .*records no 'judge' setting"):
        open_finished_run(finished_run)
    with pytest.raises(ReportError, match=r"run\.json: not a readable run\.json: config: .*records no 'judge' setting"):
        load_run(finished_run)


def test_one_function_names_a_strategy():
    assert strategy_name("agent:my.mod:make", "react") == "agent:my.mod:make"
    assert strategy_name("openai:gpt-4o", "reflect") == "reflect"
    assert run_config(model="agent:my.mod:make").strategy_spec == "agent:my.mod:make"


def test_grading_reads_the_recorded_judge_and_refuses_an_unknown_rule(finished_run):
    from vtb_agents.runner.regrade import recorded_grading, regrade_run

    assert recorded_grading(finished_run) == (recorded := recorded_grading(str(finished_run)))
    assert (recorded.judge, recorded.critical_rule) == ("rule", "weight")
    run_file = finished_run / layout.RUN_FILE
    record = json.loads(run_file.read_text())
    record["config"]["critical_rule"] = "bogus"
    run_file.write_text(json.dumps(record))
    for grading in (lambda: recorded_grading(finished_run), lambda: regrade_run(finished_run)):
        with pytest.raises(RunError, match=r"run\.json: not a readable run\.json: config\.critical_rule: Input should "
                                           r"be 'weight', 'flag' or 'either'"):
            grading()
    with pytest.raises(RunError, match="no such run directory"):
        recorded_grading(finished_run / "nope")
