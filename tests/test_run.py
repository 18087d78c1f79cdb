"""The runner end to end: results.jsonl, summary.json, refusing to clobber, resume, errors per task."""

from __future__ import annotations

import json

import pytest
from conftest import write_task
from PIL import Image
from typer.testing import CliRunner

from vtb_agents.cli import app
from vtb_agents.rundir.records import RunSummary
from vtb_agents.rundir.store import ResultsStore
from vtb_agents.runner.run import RunConfig, RunError, run_suite
from vtb_agents.tasks import load_tasks

SUMMARY_KEYS = {"tasks", "apr", "ars", "by_category", "by_domain", "by_turncase", "tool_metrics", "judge"}


@pytest.fixture
def three_tasks(tmp_path):
    root = tmp_path / "tasks"
    for name in ("a", "b", "c"):
        write_task(root, name)
    return load_tasks(root)


def test_run_writes_results_and_summary(three_tasks, tmp_path):
    out = tmp_path / "run"
    summary = run_suite(three_tasks, RunConfig(model="replay"), out)
    written = json.loads((out / "summary.json").read_text())
    assert set(written) >= SUMMARY_KEYS and summary == RunSummary.model_validate(written).model_copy(
        update={"run_dir": out})  # the typed summary.json, with its run directory
    assert summary.tasks == 3 and summary.apr == 1.0 and summary.ars == 1.0
    assert {k: v.model_dump(exclude_none=True) for k, v in summary.by_category.items()} == {"region_switch": {
        "n": 3, "graded": 3, "apr": 1.0, "ars": 1.0,
        "apr_stderr": 0.0, "apr_ci95": [1.0, 1.0], "ars_stderr": 0.0, "ars_ci95": [1.0, 1.0]}}
    assert summary.tool_metrics.by_tool == {"python_image_processing": 3}
    assert summary.tool_metrics.image_ops["cropping"] == 3
    assert summary.judge.model_dump() == {"model": "rule", "calls": 0, "checks": 3, "unjudged": 3, "errors": 0,
                                          "cache_hits": 0, "pending": 0}
    lines = (out / "results.jsonl").read_text().splitlines()
    assert [json.loads(line)["task_id"] for line in lines] == ["a", "b", "c"]
    run = json.loads((out / "run.json").read_text())
    assert run["config"]["model"] == "replay"


def test_existing_run_is_never_clobbered(three_tasks, tmp_path):
    out = tmp_path / "run"
    run_suite(three_tasks[:1], RunConfig(model="replay"), out)
    before = (out / "results.jsonl").read_bytes()
    with pytest.raises(RunError, match="already holds a run: pass --resume"):
        run_suite(three_tasks, RunConfig(model="replay"), out)
    with pytest.raises(RunError, match=r"cannot resume with different settings \(critical_rule\)"):
        run_suite(three_tasks, RunConfig(model="replay", critical_rule="flag"), out, resume=True)
    assert (out / "results.jsonl").read_bytes() == before


def test_resume_skips_finished_tasks_and_cuts_a_partial_line(three_tasks, tmp_path):
    out = tmp_path / "run"
    run_suite(three_tasks[:2], RunConfig(model="replay"), out)
    with (out / "results.jsonl").open("a") as handle:  # what a crash mid-append leaves
        handle.write('{"task_id": "c", "categ')
    seen = []
    summary = run_suite(three_tasks, RunConfig(model="replay"), out, resume=True,
                        progress=lambda result, done, total: seen.append((result.task_id, done, total)))
    assert seen == [("c", 3, 3)]
    results, partial = ResultsStore(out).load()
    assert [r.task_id for r in results] == ["a", "b", "c"] and partial is None
    assert [json.loads(line)["task_id"] for line in (out / "results.jsonl").read_text().splitlines()] == ["a", "b", "c"]
    assert summary.tasks == 3 and summary.apr == 1.0


def test_the_json_lines_are_the_only_results_record(three_tasks, tmp_path):
    out = tmp_path / "run"
    run_suite(three_tasks, RunConfig(model="replay"), out)
    assert not (out / "results.sqlite").exists()
    results, partial = ResultsStore(out).load()
    assert [(r.task_id, r.category, r.grade.passed, r.episode.status) for r in results] == \
        [(t, "region_switch", True, "completed") for t in ("a", "b", "c")] and partial is None


def test_a_corrupt_line_in_the_middle_names_the_line_and_resume_repairs_it(three_tasks, tmp_path):
    out = tmp_path / "run"
    run_suite(three_tasks[:2], RunConfig(model="replay"), out)
    lines = (out / "results.jsonl").read_text().splitlines()
    (out / "results.jsonl").write_text(lines[0] + "\n{oops}\n" + lines[1] + "\n")
    with pytest.raises(ValueError, match="results.jsonl: line 2 is not a valid result.*--resume"):
        ResultsStore(out).load()
    summary = run_suite(three_tasks, RunConfig(model="replay"), out, resume=True)
    assert summary.tasks == 3 and summary.complete
    assert (out / "results.jsonl.corrupt").read_text() == "{oops}\n"
    assert [r.task_id for r in ResultsStore(out).load()[0]] == ["a", "b", "c"]


def test_bad_model_spec_is_refused_before_the_run_directory_is_touched(three_tasks, tmp_path):
    with pytest.raises(ValueError, match="is not 'replay', 'provider:model'"):
        run_suite(three_tasks, RunConfig(model="openai-without-a-colon"), tmp_path / "run")
    with pytest.raises(ValueError, match="needs a user model"):
        run_suite(three_tasks, RunConfig(model="replay", resumer="simulated"), tmp_path / "run")
    assert not (tmp_path / "run").exists()


FAILING_AGENT = """
from langchain_core.runnables import RunnableLambda

def build(tools):
    def fail(state):
        raise ConnectionError("model API unreachable")
    return RunnableLambda(fail)
"""


def test_a_failing_model_is_an_ungraded_task_not_a_crash(three_tasks, tmp_path, monkeypatch):
    (tmp_path / "failing_agent.py").write_text(FAILING_AGENT)
    monkeypatch.syspath_prepend(str(tmp_path))
    summary = run_suite(three_tasks[:2], RunConfig(model="agent:failing_agent:build"), tmp_path / "run")
    results, _ = ResultsStore(tmp_path / "run").load()
    assert all(r.episode.status == "error" and r.episode.error == "ConnectionError: model API unreachable"
               for r in results)
    assert summary.graded == 0 and summary.ungraded == 2 and summary.apr is None
    assert summary.episodes.errors == 2 and summary.judge.errors == 0
    assert all(not r.grade.graded and r.grade.passed is None for r in results)


def test_cli_run_and_task_listing(task_root, tmp_path):
    runner = CliRunner()
    listed = runner.invoke(app, ["tasks", "list", str(task_root), "--json"])
    assert listed.exit_code == 0
    assert json.loads(listed.output) == {"id": "t-corner", "category": "region_switch", "domain": "finance",
                                         "turns": 1, "images": 1, "rubrics": 2}
    shown = runner.invoke(app, ["tasks", "show", "t-corner", "--tasks", str(task_root)])
    assert json.loads(shown.output)["turns"][0]["rubrics"]["r1"]["weight"] == 5
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", "--tasks", str(task_root), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "100.0%" in result.output and (out / "summary.json").exists()
    again = runner.invoke(app, ["run", "--tasks", str(task_root), "--out", str(out)])
    assert again.exit_code == 2 and "already holds a run" in again.output
    bad = runner.invoke(app, ["run", "--tasks", str(task_root), "--out", str(tmp_path / "x"), "--judge", "nope"])
    assert bad.exit_code == 2 and "judge spec 'nope'" in bad.output
    missing = runner.invoke(app, ["run", "--tasks", str(task_root), "--task-id", "zzz", "--out", str(tmp_path / "y")])
    assert missing.exit_code == 2 and "no task(s) zzz" in missing.output


def test_report_images_are_made_during_the_run_and_never_in_a_refused_directory(three_tasks, tmp_path):
    """`vtb run` makes the report's images from its first result on; a run refused by another
    run's directory writes nothing there (the head start begins only once the run owns it)."""
    three_tasks = tmp_path / "tasks"  # the fixture's folder
    runner = CliRunner()
    out = tmp_path / "run"
    first = runner.invoke(app, ["run", "--tasks", str(three_tasks), "--out", str(out)])
    assert first.exit_code == 0, first.output
    files = sorted(p.relative_to(out) for p in (out / "report_files").rglob("*"))
    pages = (out / "report.html").read_text() + "".join(p.read_text() for p in (out / "tasks").glob("*.html"))
    assert files and all(str(f.name) in pages for f in files if f.is_file())
    def contents() -> dict:  # every file but the lock, which the refused run takes to read the directory
        return {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.name != "run.lock"}

    other = tmp_path / "other"  # another suite, with an image the first run's report does not have
    write_task(other, "d")
    Image.new("RGB", (64, 48), "blue").save(other / "d" / "image_0.png")
    before = contents()
    refused = runner.invoke(app, ["run", "--tasks", str(other), "--out", str(out)])
    assert refused.exit_code == 2 and "already holds a run" in refused.output
    assert contents() == before
