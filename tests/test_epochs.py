"""``vtb run --epochs K``: independent episodes per task, resumable per (task, epoch), and the clustered
standard errors, 95% intervals and pass@k / pass^k of ``summary.json``.

Every expected number is written out from first principles in the comments beside it (task means,
sample variance with n - 1, stderr = s / sqrt(n), Student's t from a printed table), never recomputed
with the code under test.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
from conftest import write_task
from support.cli import start_vtb, vtb
from support.openai_server import OpenAIServer
from typer.testing import CliRunner

import vtb_agents
from vtb_agents.report import write_report
from vtb_agents.analysis.alignment import alignment_report
from vtb_agents.analysis.cost import RunPrices
from vtb_agents.analysis.difficulty import open_runs
from vtb_agents.analysis.metrics import summarize
from vtb_agents.annotate.server import AnnotationSession
from vtb_agents.cli import app
from vtb_agents.analysis.uncertainty import t_quantile
from vtb_agents.judges.cache import JudgeCache
from vtb_agents.results import Episode, TaskGrade, TaskResult, TurnRecord
from vtb_agents.rundir.errors import RunError
from vtb_agents.rundir.records import RunSummary
from vtb_agents.rundir.store import latest_results
from vtb_agents.runner.regrade import regrade_run
from vtb_agents.tasks import load_tasks

CHROMIUM = Path("/usr/bin/chromium")
T_975 = {2: 4.302653, 3: 3.182446, 5: 2.570582}
"""Student's t quantile t(0.975, df), as printed in any t table (to six decimals)."""


def line(task_id: str, epoch: int, *, passed: bool | None, score: float | None = None, outcome: str = "answered",
         category: str = "region_switch") -> TaskResult:
    """A result line with a literal grade (ungraded when ``passed`` is None)."""
    graded = passed is not None
    grade = TaskGrade(passed=passed, score=(score if score is not None else float(passed)) if graded else None,
                      graded=graded)
    episode = Episode(task_id=task_id, model="m", outcome=outcome, status="completed" if graded else "error",
                      turns=[TurnRecord(index=0, answer="a", status="answered")])
    return TaskResult(task_id=task_id, epoch=epoch, category=category, category_raw=category, domain="finance",
                      domain_raw="finance", turncase="single", model="m", episode=episode, grade=grade,
                      duration_s=1.0, outcome=outcome)


def test_t_quantile_is_the_tables():
    assert {df: round(t_quantile(0.975, df), 6) for df in T_975} == T_975


def test_two_epochs_average_per_task_then_over_tasks():
    results = [
        line("a", 1, passed=True, score=1.0), line("a", 2, passed=True, score=0.8),     # pass 1,   score 0.9
        line("b", 1, passed=True, score=0.6), line("b", 2, passed=False, score=0.4),    # pass 0.5, score 0.5
        line("c", 1, passed=False, score=0.2), line("c", 2, passed=False, score=0.0),   # pass 0,   score 0.1
        line("d", 1, passed=False, score=0.3), line("d", 2, passed=None, outcome="provider_error"),  # epoch 1 only
    ]
    summary = summarize(results, judge_name="rule", prices=RunPrices(), expected=4, epochs=2)
    # APR: task means 1, 0.5, 0, 0 -> mean 0.375; deviations .625 .125 -.375 -.375, squares sum
    # .390625 + .015625 + .140625 + .140625 = .6875; s^2 = .6875 / 3 = .229167; s = .478714;
    # stderr = .478714 / 2 = .239357; t(0.975, 3) = 3.182446: half width .761740 -> [-.386740, 1.136740],
    # clipped to [0, 1]
    assert (summary["apr"], summary["apr_stderr"], summary["apr_ci95"]) == (0.375, 0.239357, [0.0, 1.0])
    # ARS: task means 0.9, 0.5, 0.1, 0.3 -> mean 0.45; deviations .45 .05 -.35 -.15, squares sum
    # .2025 + .0025 + .1225 + .0225 = .35; s^2 = .116667; s = .341565; stderr = .170783;
    # half width 3.182446 * .170783 = .543506 -> [0, .993506] (the lower end clipped)
    assert (summary["ars"], summary["ars_stderr"], summary["ars_ci95"]) == (0.45, 0.170783, [0.0, 0.993506])
    # pass@k over tasks whose 2 epochs are graded (a, b, c): a and b passed at least once, a in both
    assert (summary["pass_at_k"], summary["pass_hat_k"]) == (0.666667, 0.333333)
    assert (summary["tasks"], summary["graded"], summary["epochs"], summary["missing"]) == (4, 4, 2, 0)
    assert summary["complete"] is False  # d's second epoch is ungraded by an infrastructure failure
    assert summary["infrastructure_errors"] == {"count": 1, "task_ids": ["d"]}
    group = summary["by_category"]["region_switch"]
    assert {key: group[key] for key in ("n", "graded", "apr", "apr_stderr", "pass_at_k")} == {
        "n": 4, "graded": 4, "apr": 0.375, "apr_stderr": 0.239357, "pass_at_k": 0.666667}
    RunSummary.model_validate(summary)  # the typed reader takes every new key


def test_small_groups_have_no_interval_and_one_epoch_no_pass_at_k():
    results = [line("a", 1, passed=True), line("b", 1, passed=False, category="temporal"),
               line("c", 1, passed=True, category="temporal")]
    summary = summarize(results, judge_name="rule", prices=RunPrices(), expected=3)
    assert "pass_at_k" not in summary and "pass_hat_k" not in summary["by_category"]["temporal"]
    alone = summary["by_category"]["region_switch"]  # one task: no spread to measure
    assert (alone["apr"], alone["apr_stderr"], alone["apr_ci95"], alone["ars_ci95"]) == (1.0, None, None, None)
    pair = summary["by_category"]["temporal"]
    # passes 0, 1: mean .5, s^2 = (.25 + .25) / 1 = .5, s = .707107, stderr = .707107 / sqrt 2 = .5;
    # t(0.975, 1) = 12.706205: [-5.85, 6.85] clipped to [0, 1]
    assert (pair["apr_stderr"], pair["apr_ci95"]) == (0.5, [0.0, 1.0])
    same = summarize([line("a", 1, passed=True), line("b", 1, passed=True)], judge_name="rule", prices=RunPrices())
    assert (same["apr_stderr"], same["apr_ci95"]) == (0.0, [1.0, 1.0])  # no spread: a zero-width interval


def test_results_are_kept_per_task_and_epoch():
    failed = line("a", 2, passed=None, outcome="provider_error")
    retried = line("a", 2, passed=False)
    duplicate = line("a", 1, passed=False)
    kept = latest_results([line("a", 1, passed=True), failed, duplicate, retried], source="test")
    assert [(r.task_id, r.epoch, r.grade.passed) for r in kept] == [("a", 1, True), ("a", 2, False)]


def test_epoch_one_keeps_the_judge_cache_key_of_a_run_without_epochs():
    assert JudgeCache.key("j", "p", 1) == JudgeCache.key("j", "p")
    assert len({JudgeCache.key("j", "p", epoch) for epoch in (1, 2, 3)}) == 3


# -- real runs: replay model, local sandbox, an LLM judge on a local OpenAI-compatible server --------------

VERDICTS = {  # the critical rubric's verdict in epoch 1 and epoch 2, per task
    "t0": ("met", "met"), "t1": ("met", "met"), "t2": ("met", "not_met"),
    "t3": ("not_met", "met"), "t4": ("not_met", "not_met"), "t5": ("not_met", "not_met"),
}


@pytest.fixture(scope="module")
def judged_tasks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six tasks whose rubrics an LLM judge decides: r1 critical (weight 5), r2 minor (weight 1)."""
    root = tmp_path_factory.mktemp("judged") / "tasks"
    for task_id in VERDICTS:
        folder = write_task(root, task_id)
        task = json.loads((folder / "task.json").read_text())
        turn = task["turns"][0]
        turn["prompt"] = f"[{task_id}] {turn['prompt']}"
        turn["rubrics"] = {"r1": {"description": "Says 42", "weight": 5, "critical": "yes"},
                           "r2": {"description": "Is concise", "weight": 1, "critical": "no"}}
        (folder / "task.json").write_text(json.dumps(task))
    return root


class EpochJudge:
    """A judge server whose verdicts on r1 of a task follow :data:`VERDICTS`: the n-th request for a
    task's r1 gets the n-th verdict (epochs run in order, one task at a time); r2 is always met."""

    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def __call__(self, request: dict) -> str:
        prompt = request["messages"][-1]["content"]
        task_id = prompt.split("[", 1)[1].split("]", 1)[0]
        if "## Criterion\nSays 42" not in prompt:
            return json.dumps({"verdict": "met", "justification": "short"})
        epoch = self.seen.get(task_id, 0)
        self.seen[task_id] = epoch + 1
        return json.dumps({"verdict": VERDICTS[task_id][epoch], "justification": f"epoch {epoch + 1}"})


def judged_run(tasks: Path, out: Path, **options: object) -> tuple[vtb_agents.Evaluation, OpenAIServer]:
    """A replay run of ``tasks`` judged by an :class:`EpochJudge` server, and the server."""
    with OpenAIServer(EpochJudge()) as server, pytest.MonkeyPatch.context() as env:
        env.setenv("OPENAI_BASE_URL", server.base_url)
        env.setenv("OPENAI_API_KEY", "test-key")
        run = vtb_agents.evaluate("react", tasks=load_tasks(tasks), model="replay", judge="openai:judge-1", out=out,
                                  **options)
    return run, server


@pytest.fixture(scope="module")
def two_epochs(judged_tasks: Path,
               tmp_path_factory: pytest.TempPathFactory) -> tuple[vtb_agents.Evaluation, OpenAIServer]:
    """The judged tasks run for two epochs."""
    return judged_run(judged_tasks, tmp_path_factory.mktemp("epochs") / "run", epochs=2)


def test_two_epochs_with_verdicts_that_differ_give_the_hand_computed_intervals(two_epochs):
    run, server = two_epochs
    assert len(server.requests) == 6 * 2 * 2  # every rubric of every epoch judged: epochs share no verdict
    assert sorted((r.task_id, r.epoch) for r in run.results) == [(t, e) for t in VERDICTS for e in (1, 2)]
    passes = {(r.task_id, r.epoch): r.grade.passed for r in run.results}
    assert passes == {(t, e + 1): v[e] == "met" for t, v in VERDICTS.items() for e in (0, 1)}
    # APR: task means (share of epochs passed) 1, 1, .5, .5, 0, 0 -> mean .5; deviations .5 .5 0 0 -.5 -.5,
    # squares sum 1; s^2 = 1 / 5 = .2; stderr = sqrt(.2) / sqrt(6) = sqrt(1/30) = .182574;
    # t(0.975, 5) = 2.570582: half width .469322 -> [.030678, .969322]
    assert (run.apr, run.apr_stderr, run.apr_ci95) == (0.5, 0.182574, [0.030678, 0.969322])
    # ARS: an epoch scores 6/6 with r1 met, 1/6 without; task means 1, 1, 7/12, 7/12, 1/6, 1/6 -> mean 7/12
    # = .583333; deviations 5/12 5/12 0 0 -5/12 -5/12, squares sum 100/144 = .694444; s^2 = .138889;
    # stderr = sqrt(.138889 / 6) = .152145; half width 2.570582 * .152145 = .391101 -> [.192232, .974435]
    assert (run.ars, run.ars_stderr, run.ars_ci95) == (0.583333, 0.152145, [0.192232, 0.974435])
    # pass@2: t0 t1 t2 t3 passed at least once (4/6); pass^2: t0 t1 passed both times (2/6)
    assert (run.pass_at_k, run.pass_hat_k, run.epochs, run.tasks, run.complete) == (0.666667, 0.333333, 2, 6, True)
    group = run.by_category["region_switch"]  # every task is in it: the same figures
    assert (group.n, group.apr_stderr, group.apr_ci95, group.ars_ci95, group.pass_hat_k) == (
        6, 0.182574, [0.030678, 0.969322], [0.192232, 0.974435], 0.333333)
    assert run.run_dir is not None
    with sqlite3.connect(run.run_dir / "checkpoints.sqlite") as db:
        threads = {row[0] for row in db.execute("SELECT DISTINCT thread_id FROM checkpoints")}
    assert threads == {*VERDICTS, *(f"{t}#epoch2" for t in VERDICTS)}  # an own thread per episode


def test_a_regrade_takes_each_epochs_own_cached_verdicts(two_epochs, judged_tasks, tmp_path):
    run, _ = two_epochs
    assert run.run_dir is not None
    copy = tmp_path / "run"
    shutil.copytree(run.run_dir, copy)
    with OpenAIServer(lambda request: 500) as server, pytest.MonkeyPatch.context() as env:
        env.setenv("OPENAI_BASE_URL", server.base_url)
        env.setenv("OPENAI_API_KEY", "test-key")
        summary = regrade_run(copy, tasks=load_tasks(judged_tasks))
    assert server.requests == []  # all 24 verdicts from the cache, each epoch its own
    assert (summary.judge.cache_hits, summary.judge.calls) == (24, 0)
    assert (summary.apr, summary.apr_ci95, summary.pass_hat_k) == (0.5, [0.030678, 0.969322], 0.333333)


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs the system chromium (make installs it)")
@pytest.mark.browser
def test_the_report_shows_the_intervals_and_an_error_bar_in_chromium(two_epochs):
    run, _ = two_epochs
    assert run.run_dir is not None
    page_file = write_report(run.run_dir)
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(page_file.as_uri())
            overall = page.locator("table", has=page.locator("th", has_text="APR 95% CI")).first
            header = overall.locator("th").all_inner_texts()
            assert header == ["", "n", "graded", "APR", "APR 95% CI", "ARS", "ARS 95% CI", "pass@k", "pass^k"]
            assert overall.locator("tbody tr").first.locator("td").all_inner_texts() == [
                "overall", "6", "6", "50.0%", "3.1–96.9", "58.3%", "19.2–97.4", "66.7%", "33.3%"]
            bar, whisker = page.locator("svg rect.bar").first, page.locator("svg path.errorbar")
            assert whisker.count() == 1 and whisker.is_visible()
            # the y axis spans 0..118 % over 200 px: the bar (50 %) is 84.7 px high and the whisker runs
            # from 3.07 % to 96.93 % (the geometry as Chromium lays it out, strokes left out)
            box = "e => { const b = e.getBBox(); return [b.y, b.height]; }"
            (bar_y, bar_height), (whisker_y, whisker_height) = bar.evaluate(box), whisker.evaluate(box)
            axis = bar_y + bar_height
            assert bar_height == pytest.approx(50 / 118 * 200, abs=0.05)
            assert whisker_height == pytest.approx((96.9322 - 3.0678) / 118 * 200, abs=0.05)
            assert axis - (whisker_y + whisker_height) == pytest.approx(3.0678 / 118 * 200, abs=0.05)
        finally:
            browser.close()


PAPER_KEYS = {"tasks", "graded", "ungraded", "apr", "ars", "complete", "missing", "infrastructure_errors", "outcomes",
              "by_category", "by_domain", "by_turncase", "tool_metrics", "judge", "critical_disagreements",
              "episodes", "usage", "cost", "prompt_cache", "model", "strategy", "critical_rule", "region_iou",
              "rate_limits"}
"""The keys of ``summary.json`` before epochs (``prompt_cache`` and ``rate_limits`` since:
docs/concepts/prompt-caching.md, docs/how-to/cost-and-rate-limits.md)."""
NEW_KEYS = {"epochs", "apr_stderr", "apr_ci95", "ars_stderr", "ars_ci95"}


def test_one_epoch_keeps_the_summary_and_threads_and_adds_only_the_intervals(judged_tasks, tmp_path):
    run, _ = judged_run(judged_tasks, tmp_path / "run")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert set(summary) == PAPER_KEYS | NEW_KEYS
    assert set(summary["by_category"]["region_switch"]) == {"n", "graded", "apr", "ars"} | NEW_KEYS - {"epochs"}
    # epoch 1's verdicts: t0 t1 t2 pass, t3 t4 t5 fail; ARS (1 + 1 + 1 + 1/6 * 3) / 6 = 3.5 / 6
    assert (summary["tasks"], summary["graded"], summary["apr"], summary["ars"], summary["epochs"]) == (
        6, 6, 0.5, 0.583333, 1)
    # passes 1 1 1 0 0 0: s^2 = 6 * .25 / 5 = .3, stderr = sqrt(.3 / 6) = sqrt(.05) = .223607
    assert summary["apr_stderr"] == 0.223607
    assert all(r.epoch == 1 for r in run.results)
    assert all(json.loads(raw)["epoch"] == 1 for raw in (tmp_path / "run" / "results.jsonl").read_text().splitlines())
    with sqlite3.connect(tmp_path / "run" / "checkpoints.sqlite") as db:
        threads = {row[0] for row in db.execute("SELECT DISTINCT thread_id FROM checkpoints")}
    assert threads == set(VERDICTS)  # one epoch: a task's thread is its id, as before epochs


SLOW_AGENT = '''
import time
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda

def build(tools):
    def answer(state):
        time.sleep(0.4)
        return {"messages": [*state["messages"], AIMessage("The number is 42.")]}
    return RunnableLambda(answer)
'''


@pytest.mark.slow
def test_a_kill_mid_epoch_and_resume_run_every_task_and_epoch_once(tmp_path):
    root = tmp_path / "tasks"
    for i in range(4):
        write_task(root, f"t{i}")
    (tmp_path / "slow_agent.py").write_text(SLOW_AGENT)
    out = tmp_path / "run"
    args = ["run", "--tasks", root, "--model", "agent:slow_agent:build", "--epochs", "2", "--concurrency", "2",
            "--out", out]
    process = start_vtb(*args, path=[tmp_path], columns=200, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results = out / "results.jsonl"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and (not results.exists() or len(results.read_bytes().splitlines()) < 5):
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)  # epoch 1 written, epoch 2 part way
    process.wait(timeout=30)
    written = [json.loads(raw) for raw in results.read_bytes().splitlines() if raw.endswith(b"}")]
    assert 5 <= len(written) < 8, "the run should have been killed during epoch 2"
    assert {(w["task_id"], w["epoch"]) for w in written} >= {(f"t{i}", 1) for i in range(4)}
    finished = vtb(*args, "--resume", path=[tmp_path], columns=200, timeout=180)
    assert finished.returncode == 0, finished.stderr
    pairs = [(line["task_id"], line["epoch"]) for line in map(json.loads, results.read_text().splitlines())]
    assert sorted(pairs) == [(f"t{i}", e) for i in range(4) for e in (1, 2)]  # each once: nothing lost or doubled
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["tasks"], summary["epochs"], summary["missing"], summary["complete"]) == (4, 2, 0, True)
    # every episode passes: task means 1 1 1 1, no spread
    assert (summary["apr"], summary["apr_stderr"], summary["apr_ci95"]) == (1.0, 0.0, [1.0, 1.0])
    assert (summary["pass_at_k"], summary["pass_hat_k"]) == (1.0, 1.0)
    assert "APR 95% CI" in finished.stdout and "pass^k" in finished.stdout
    assert "100.0–100.0" in finished.stdout  # the overall row's interval
    assert os.path.exists(out / "report.html")


def test_commands_that_read_one_result_per_task_refuse_a_run_with_epochs(task_root, tmp_path):
    run = vtb_agents.evaluate("react", tasks=load_tasks(task_root), model="replay", out=tmp_path / "run", epochs=2)
    assert [(r.task_id, r.epoch, r.grade.passed) for r in run.results] == [("t-corner", 1, True), ("t-corner", 2, True)]
    message = f"{tmp_path / 'run'}: {{}} reads one result per task, and this run has 2 epochs per task"
    with pytest.raises(RunError) as refused:
        open_runs([tmp_path / "run"])
    assert str(refused.value).startswith(message.format("the difficulty filter"))
    (tmp_path / "labels.jsonl").write_text("")
    with pytest.raises(RunError) as refused:
        alignment_report(tmp_path / "run", tmp_path / "labels.jsonl")
    assert str(refused.value).startswith(message.format("judge alignment"))
    with pytest.raises(RunError) as refused:
        AnnotationSession.open(tmp_path / "run", tmp_path / "labels.jsonl")
    assert str(refused.value).startswith(message.format("vtb annotate"))
    done = CliRunner().invoke(app, ["run", "--tasks", str(task_root), "--epochs", "2", "--langsmith-experiment", "x",
                                    "--out", str(tmp_path / "ls")])
    assert done.exit_code == 2  # a usage error, before anything runs
    assert "--epochs runs in the run directory only" in done.output
