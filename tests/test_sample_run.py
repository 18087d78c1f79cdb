"""The bundled suite end to end: the replay agent passes every task; wrong answers fail."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage
from support.openai_server import OpenAIServer
from support.scripted_vision import VisionModel
from typer.testing import CliRunner

from vtb_agents.cli import app
from vtb_agents.episodes.driver import run_episode
from vtb_agents.judges import RuleJudge
from vtb_agents.judges.graph import grade_episode
from vtb_agents.models.scripted import ScriptedChatModel
from vtb_agents.rundir.records import RunSummary
from vtb_agents.rundir.store import ResultsStore
from vtb_agents.runner.run import RunConfig, run_suite
from vtb_agents.sandbox import open_sandbox
from vtb_agents.tasks import load_tasks
from vtb_agents.tools import select_tools


@pytest.fixture(scope="module")
def sample():
    return load_tasks("sample")


@pytest.fixture(scope="module")
def replay_run(sample, tmp_path_factory):
    out = tmp_path_factory.mktemp("sample-run")
    return out, run_suite(sample, RunConfig(model="replay"), out)


@pytest.mark.slow
def test_replay_passes_every_sample_task(replay_run, sample):
    out, summary = replay_run
    results, _ = ResultsStore(out).load()
    assert [r.task_id for r in results] == [t.id for t in sample]
    failed = [(r.task_id, r.grade.reason, [v.justification for v in r.grade.verdicts if v.status != "met"])
              for r in results if not r.grade.passed]
    assert failed == []
    assert summary.tasks == summary.graded == len(sample) and summary.apr == 1.0 and summary.ars == 1.0
    assert set(summary.by_category) == {"region_switch", "hybrid_tool", "follow_up", "temporal", "progressive"}
    assert summary.tool_metrics.proactivity == 1.0 and summary.tool_metrics.success_rate == 1.0
    # Offline, through the shipped cassette: every one of the six tools is exercised.
    assert set(summary.tool_metrics.by_tool) == {
        "python_image_processing", "python_interpreter", "calculator", "web_search", "browser_get_page_text",
        "historical_weather"}
    assert summary.tool_metrics.image_ops["cropping"] > 0
    assert summary.critical_disagreements == 1
    assert summary == RunSummary.model_validate(json.loads((out / "summary.json").read_text())).model_copy(
        update={"run_dir": out})  # what run_suite returns is summary.json, typed


@pytest.mark.slow
def test_replay_uses_the_category_graphs_and_resumes_follow_ups(replay_run):
    out, _ = replay_run
    results = {r.task_id: r for r in ResultsStore(out).load()[0]}
    follow_up = results["fu-generalist-shelf"].episode
    assert follow_up.settings.graph == "follow_up"
    assert [t.status for t in follow_up.turns] == ["asked_user", "answered", "answered"]
    assert results["te-physics-gauge"].episode.settings.graph == "temporal"


# Turns whose reference code crops nothing the sandbox tracks (no code, or only a calculator): the rest of
# the 40 turns of the suite are measured.
UNMEASURED = {("fu-generalist-shelf", 0), ("fu-medical-labs", 0), ("pr-biology-plates", 1), ("pr-finance-ledger", 2),
              ("pr-maths-plot", 1)}


@pytest.mark.slow
def test_replay_looks_exactly_where_the_reference_looked(replay_run):
    out, summary = replay_run
    results = {r.task_id: r for r in ResultsStore(out).load()[0]}
    ious = {(r.task_id, t.index): t.best_crop_iou for r in results.values() for t in r.episode.turns}
    assert len(ious) == 40 and {k for k, v in ious.items() if v is None} == UNMEASURED
    # replay runs the reference code itself: every crop it shows is a reference crop, IoU 1.0
    assert {v for k, v in ious.items() if k not in UNMEASURED} == {1.0}
    invoice = results["rs-finance-invoice"].episode.turns[0]
    assert [r.box for r in invoice.reference_regions or []] == [r.box for r in invoice.regions] == [
        (1090, 165, 1230, 194), (890, 688, 1242, 742), (370, 1043, 701, 1091)]
    # the second reference step crops img[550:624, 1442:1558] with OpenCV: not tracked, located from its
    # pixels at exactly that box (the replay's own copy too: IoU 1.0 above)
    chemistry = results["rs-chemistry-bench"].episode.turns[0]
    assert [(r.box, r.located) for r in chemistry.reference_regions or []] == [
        ((31, 519, 159, 648), False), ((1442, 550, 1558, 624), True)]
    assert [r.box for r in chemistry.regions] == [(31, 519, 159, 648), (1442, 550, 1558, 624)]
    assert summary.region_iou.turns == 35 and summary.region_iou.share_iou_ge_0_5 == 1.0
    assert summary.region_iou.pass_rate_when_looked == 1.0 and summary.region_iou.pass_rate_when_not is None


def wrong(task):
    return ScriptedChatModel(script=lambda messages: AIMessage("I cannot tell; my best guess is 0."))


@pytest.mark.parametrize("task_id", ["rs-finance-invoice", "ht-medical-dosage", "te-physics-gauge", "pr-maths-plot"])
def test_rule_judge_fails_a_wrong_answer(sample, task_id, artifacts):
    task = next(t for t in sample if t.id == task_id)
    with open_sandbox("local") as sandbox:
        episode = run_episode(task, wrong(task), select_tools(), sandbox=sandbox, artifacts=artifacts,
                              model_name="wrong")
    grade = grade_episode(task, episode, RuleJudge())
    assert grade.graded and grade.passed is False and grade.score < 0.5
    critical = [v for v in grade.verdicts if v.critical]
    assert critical and any(v.status == "not_met" for v in critical)
    assert all(v.justification for v in critical)


@pytest.fixture(scope="module")
def scripted_run(sample, tmp_path_factory):
    """`vtb run` on the whole sample suite with a scripted vision model behind ChatOpenAI."""
    out = tmp_path_factory.mktemp("scripted") / "run"
    env = {"OPENAI_API_KEY": "k"}
    openings = frozenset(t.turns[0].prompt for t in sample if t.category == "follow_up")
    with OpenAIServer(VisionModel(ask_first=True, ask_on=openings)) as server:
        env["OPENAI_BASE_URL"] = server.base_url
        result = CliRunner().invoke(app, ["run", "--tasks", "sample", "--model", "openai:vision-test",
                                          "--out", str(out), "--concurrency", "4"], env=env)
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.slow
def test_vtb_run_drives_every_category_graph_with_a_scripted_model(scripted_run, sample):
    results = {r.task_id: r for r in ResultsStore(scripted_run).load()[0]}
    assert set(results) == {t.id for t in sample}
    for task in sample:
        episode = results[task.id].episode
        assert episode.status == "completed" and episode.settings.graph == task.category
        assert len(episode.turns) == len(task.turns)
        assert episode.tool_calls and {c.name for c in episode.tool_calls} == {"python_image_processing"}
        assert all(call.ok for call in episode.tool_calls)
    follow_ups = [r.episode for r in results.values() if r.category == "follow_up"]
    assert follow_ups and all(e.turns[0].status == "asked_user" for e in follow_ups)
    summary = json.loads((scripted_run / "summary.json").read_text())
    assert set(summary["by_category"]) == {"region_switch", "hybrid_tool", "follow_up", "temporal", "progressive"}
    assert summary["apr"] == 0.0  # "Final answer: 42." answers no sample task
    assert (scripted_run / "report.html").exists()


@pytest.mark.slow
def test_analysis_commands_on_a_sample_run(scripted_run, tmp_path):
    classification = json.dumps({"category": "visual_perception", "explanation": "It misread the image."})
    with OpenAIServer(lambda body: classification) as server:
        errors = CliRunner().invoke(app, ["analyze", "errors", str(scripted_run), "--model", "openai:classifier"],
                                    env={"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "k"})
    assert errors.exit_code == 0, errors.output
    failures = json.loads((scripted_run / "failures.json").read_text())
    graded_failed = [r for r in ResultsStore(scripted_run).load()[0] if r.grade.graded and not r.grade.passed]
    assert len(server.requests) == len(graded_failed) and failures["counts"]["visual_perception"] == len(graded_failed)
    # Human labels that agree with the run on every verdict but one.
    result = ResultsStore(scripted_run).load()[0][0]
    verdicts = [v for v in result.grade.verdicts if v.status in ("met", "not_met")]
    flip = {"met": "not_met", "not_met": "met"}
    lines = [{"task_id": result.task_id, "turn": v.turn + 1, "rubric_id": v.rubric_id,
              "label": flip[v.status] if i == 0 else v.status} for i, v in enumerate(verdicts)]
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    alignment = CliRunner().invoke(app, ["analyze", "alignment", str(scripted_run), "--labels",
                                         str(tmp_path / "labels.jsonl"), "--json"])
    assert alignment.exit_code == 0, alignment.output
    report = json.loads(alignment.output)
    assert report["n"] == len(verdicts) and report["agreement"] == pytest.approx((len(verdicts) - 1) / len(verdicts))
