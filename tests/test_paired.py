"""Paired comparison of runs (`vtb compare`, docs/tutorials/compare-runs.md): flips, the exact McNemar p,
paired bootstrap intervals, cost of the paired tasks, unpaired tasks listed; on real runs of the bundled
sample suite against a local OpenAI-compatible server whose scripted answers differ per run, and in
compare.html in headless Chromium."""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

import pytest
from rich.console import Console

from support.openai_server import OpenAIServer
from test_presets import vtb
from vtb_agents.analysis.cost import RunPrices
from vtb_agents.analysis.paired import (BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, RunResults, compare_pair,
                                        mcnemar_exact_p, paired_bootstrap_ci, tally_tasks)
from vtb_agents.analysis.pareto import CostPoint, pareto_front
from vtb_agents.api import evaluate, load_tasks
from vtb_agents.report import compare_runs, write_comparison_page
from vtb_agents.report.paired import page_href
from vtb_agents.report.plots import pareto_svg
from vtb_agents.results import Episode, TaskGrade, TaskResult
from vtb_agents.rundir.layout import task_page_file

CHROMIUM = Path("/usr/bin/chromium")
WRONG = "I cannot tell."
SINGLE = ["ht-biology-growth-curve", "ht-engineering-circuit", "ht-finance-stockchart", "ht-generalist-power-station",
          "ht-medical-dosage", "ht-sports-race-weather", "rs-chemistry-bench", "rs-finance-invoice",
          "rs-generalist-street", "rs-sports-scoreboard"]
"""The sample suite's single-turn tasks (one model call each with a direct answer): T0..T9 below."""
EXTRA = "fu-medical-labs"
# Run A (T0..T9) answers T0..T5 wrongly; run B (T0..T9) answers T5 and T6 wrongly and gets HTTP 401 on T7
# (a provider error: ungraded); run C (T1..T9 and EXTRA) answers T1..T6 and EXTRA wrongly.
PLAN = {
    "A": {"tasks": SINGLE, "wrong": set(SINGLE[:6]), "error": set(), "prompt_tokens": 10},
    "B": {"tasks": SINGLE, "wrong": {SINGLE[5], SINGLE[6]}, "error": {SINGLE[7]}, "prompt_tokens": 20},
    "C": {"tasks": SINGLE[1:] + [EXTRA], "wrong": set(SINGLE[1:7]) | {EXTRA}, "error": set(), "prompt_tokens": 30},
}
GPT4O = {"input": 2.5, "output": 10.0}
"""The gpt-4o preset's list prices (USD per million tokens); every reply reports 5 completion tokens."""


class Scripted:
    """The model of one run: the golden answer of the turn whose prompt the last user message holds,
    ``WRONG`` for the run's wrong tasks, HTTP 401 for its error tasks; counts model calls per task."""

    def __init__(self, plan: dict, prompts: dict[str, tuple[str, str]]) -> None:
        self.plan, self.prompts, self.calls, self.lock = plan, prompts, Counter[str](), threading.Lock()

    def __call__(self, body: dict) -> object:
        user = [m for m in body["messages"] if m["role"] == "user"][-1]
        text = user["content"] if isinstance(user["content"], str) else " ".join(
            block.get("text", "") for block in user["content"] if block.get("type") == "text")
        task_id, golden = next(found for prompt, found in self.prompts.items() if prompt in text)
        with self.lock:
            self.calls[task_id] += 1
        if task_id in self.plan["error"]:
            return 401
        usage = {"prompt_tokens": self.plan["prompt_tokens"], "completion_tokens": 5,
                 "total_tokens": self.plan["prompt_tokens"] + 5}
        return {"content": WRONG if task_id in self.plan["wrong"] else golden, "usage": usage}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[Path, Scripted]]:
    """Runs A, B and C of ``PLAN``: the real runner on the sample suite, gpt-4o served locally, rule judge."""
    root = tmp_path_factory.mktemp("paired") / "runs"
    tasks = {t.id: t for t in load_tasks("sample")}
    prompts = {turn.prompt: (t.id, turn.golden_answer) for t in tasks.values() for turn in t.turns}
    made: dict[str, tuple[Path, Scripted]] = {}
    for name, plan in PLAN.items():
        model = Scripted(plan, prompts)
        with OpenAIServer(model) as server, pytest.MonkeyPatch.context() as env:
            env.setenv("OPENAI_BASE_URL", server.base_url)
            env.setenv("OPENAI_API_KEY", "k")
            evaluate(tasks=[tasks[t] for t in plan["tasks"]], model="gpt-4o", judge="rule", out=root / name,
                     concurrency=2)
        made[name] = (root / name, model)
    return made


def test_mcnemar_p_is_the_exact_two_sided_binomial():
    # 5 flips one way, 1 the other: 2 * P(X <= 1) for X ~ Bin(6, 1/2) = 2 * (C(6,0) + C(6,1)) / 2^6
    assert mcnemar_exact_p(5, 1) == pytest.approx(2 * (1 + 6) / 2**6) == pytest.approx(0.21875)
    assert mcnemar_exact_p(1, 5) == pytest.approx(0.21875)
    assert mcnemar_exact_p(0, 10) == pytest.approx(2 * 1 / 2**10)  # 0.001953125
    assert mcnemar_exact_p(2, 2) == 1.0  # 2 * P(X <= 2) for Bin(4, 1/2) = 2 * 11/16 > 1: capped
    assert mcnemar_exact_p(0, 0) == 1.0  # no discordant task: no evidence of a difference


def test_bootstrap_interval_is_the_percentile_interval_of_resampled_paired_means():
    # Two pairs with differences 0 and 1: a resample's mean difference is 0, 1/2 or 1 with
    # probabilities 1/4, 1/2, 1/4, so the 2.5th and 97.5th percentiles are 0 and 1.
    assert paired_bootstrap_ci([0.0, 0.0], [0.0, 1.0]) == (0.0, 1.0)
    assert paired_bootstrap_ci([0.2, 0.4, 0.9], [0.7, 0.9, 1.4]) == (0.5, 0.5)  # every difference is 0.5
    assert paired_bootstrap_ci([1.0], [0.0]) is None  # one pair: no interval
    a, b = [1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1], [1, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 1]
    first = paired_bootstrap_ci(a, b)
    assert first == paired_bootstrap_ci(a, b)  # the fixed seed: the same interval every time
    assert first is not None and first[0] < (sum(b) - sum(a)) / len(a) < first[1]
    assert (BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED) == (10_000, 0)  # as the docs give them


def _result(task_id: str, passed: bool | None, epoch: int = 1) -> TaskResult:
    """A result line of ``task_id`` (epoch ``epoch``): passed (score 1), failed (score 0.25) or ungraded (None)."""
    grade = (TaskGrade(score=1.0 if passed else 0.25, passed=passed, graded=True) if passed is not None
             else TaskGrade(reason="judge error"))
    return TaskResult(task_id=task_id, epoch=epoch, category="region_switch", category_raw="Region Switch Q&A",
                      domain="finance", domain_raw="finance", turncase="single", model="m",
                      episode=Episode(task_id=task_id, model="m"), grade=grade, duration_s=1.0,
                      outcome=None if passed is not None else "judge_error")


def test_epochs_are_pooled_by_mean_for_the_bootstrap_and_by_strict_majority_for_mcnemar():
    a = [_result("t1", True, 1), _result("t1", False, 2), _result("t2", True, 1), _result("t2", True, 2),
         _result("t3", False, 1), _result("t3", False, 2), _result("t4", True, 1), _result("t4", None, 2)]
    b = [_result("t1", True, 1), _result("t1", True, 2), _result("t2", True, 1), _result("t2", False, 2),
         _result("t3", False, 1), _result("t3", True, 2), _result("t4", True, 1), _result("t4", True, 2)]
    tally = tally_tasks(a)
    assert tally.ungraded == {"t4"}  # one ungraded epoch makes the task ungraded
    assert (tally.graded["t1"].pass_rate, tally.graded["t1"].majority_pass) == (0.5, False)  # a tie is a fail
    assert (tally.graded["t2"].pass_rate, tally.graded["t2"].majority_pass) == (1.0, True)
    assert tally.graded["t1"].score == (1.0 + 0.25) / 2
    pair = compare_pair(RunResults("A", a, RunPrices()), RunResults("B", b, RunPrices()))
    assert (pair.tasks, pair.ungraded_a, pair.ungraded_b) == (3, ["t4"], [])
    # majorities: t1 F -> P (flip to pass), t2 P -> F (a tie: flip to fail), t3 F -> F (a tie)
    assert (pair.flips_to_pass, pair.flips_to_fail, pair.both_pass, pair.both_fail) == (["t1"], ["t2"], 0, 1)
    assert pair.mcnemar_p == 1.0  # 1 vs 1
    # pass rates A 0.5, 1, 0 and B 1, 0.5, 0.5: mean difference (0.5 - 0.5 + 0.5) / 3
    assert pair.delta_apr == round(0.5 / 3, 6)
    # scores A (1+.25)/2, 1, .25 and B 1, (1+.25)/2, (1+.25)/2
    assert pair.delta_ars == round(((1 - 0.625) + (0.625 - 1) + (0.625 - 0.25)) / 3, 6)
    assert (pair.cost_a, pair.delta_cost) == (None, None)  # results without usage: cost unknown, never 0


def test_pareto_front_keeps_the_runs_no_other_is_both_cheaper_and_better():
    points = [CostPoint("cheap", 1.0, 0.4), CostPoint("best", 3.0, 0.8), CostPoint("worse", 2.0, 0.3),
              CostPoint("tie", 3.0, 0.8), CostPoint("pricey", 4.0, 0.8)]
    assert [p.label for p in pareto_front(points)] == ["cheap", "best", "tie"]
    svg = pareto_svg(points)
    assert svg is not None and svg.count('class="front"') == 2 and svg.count('class="point"') == 2  # best+tie share
    assert pareto_svg([]) is None


def test_links_are_relative_below_a_shared_parent_and_absolute_otherwise(tmp_path):
    page = tmp_path / "runs" / "a b" / "tasks" / "t-1.html"
    assert page_href(page, tmp_path / "cmp") == "../runs/a%20b/tasks/t-1.html"
    assert page_href(Path("/srv/runs/a/tasks/t.html"), Path("/home/me")) == "file:///srv/runs/a/tasks/t.html"


def _paired_cost(run: tuple[Path, Scripted], paired: list[str]) -> float:
    """Hand cost of the paired tasks: the run's model calls on them at gpt-4o's prices (the rule judge is free)."""
    plan = PLAN[run[0].name]
    calls = sum(run[1].calls[t] for t in paired)
    return calls * (plan["prompt_tokens"] * GPT4O["input"] + 5 * GPT4O["output"]) / 1e6


@pytest.mark.slow
def test_real_runs_give_the_known_flips_and_exact_p(runs):
    comparison = compare_runs([runs["A"][0], runs["B"][0], runs["C"][0]])
    pairs = {(p.a, p.b): p for p in comparison.paired}
    assert list(pairs) == [("A", "B"), ("A", "C"), ("B", "C")]
    ab = pairs["A", "B"]
    assert ab.flips_to_pass == sorted(SINGLE[:5]) and ab.flips_to_fail == [SINGLE[6]]
    assert (ab.tasks, ab.both_pass, ab.both_fail) == (9, 2, 1)  # T8, T9 pass in both; T5 fails in both
    assert ab.ungraded_b == [SINGLE[7]] and ab.ungraded_a == [] and ab.only_in_a == ab.only_in_b == []
    assert ab.mcnemar_p == pytest.approx(2 * (1 + 6) / 2**6)
    assert ab.delta_apr == round((5 - 1) / 9, 6)
    lo, hi = ab.delta_apr_ci
    assert -1 <= lo < ab.delta_apr < hi <= 1
    lines = {}
    for name in ("A", "B"):
        rows = [json.loads(line) for line in (runs[name][0] / "results.jsonl").read_text().splitlines()]
        lines[name] = {r["task_id"]: r["grade"]["score"] for r in rows}
    paired = [t for t in SINGLE if t != SINGLE[7]]
    assert ab.delta_ars == round(sum(lines["B"][t] - lines["A"][t] for t in paired) / 9, 6)
    assert ab.cost_a == pytest.approx(_paired_cost(runs["A"], paired))
    assert ab.cost_b == pytest.approx(_paired_cost(runs["B"], paired))
    assert ab.delta_cost == pytest.approx(ab.cost_b - ab.cost_a) and ab.delta_cost > 0
    # Different task sets: named, and paired on the common tasks only.
    ac = pairs["A", "C"]
    assert (ac.only_in_a, ac.only_in_b, ac.tasks) == ([SINGLE[0]], [EXTRA], 9)
    assert (ac.flips_to_pass, ac.flips_to_fail) == ([], [SINGLE[6]])  # T1..T5 fail in both, T6 only in C
    assert ac.delta_apr == round(-1 / 9, 6)
    bc = pairs["B", "C"]
    assert (bc.only_in_a, bc.only_in_b, bc.ungraded_a) == ([SINGLE[0]], [EXTRA], [SINGLE[7]])
    assert comparison.to_dict()["coverage"] == {"common": 9, "extra": {"A": [SINGLE[0]], "B": [SINGLE[0]],
                                                                       "C": [EXTRA]}}
    again = {(p.a, p.b): p for p in compare_runs([runs["A"][0], runs["B"][0], runs["C"][0]]).paired}
    assert again["A", "B"].delta_apr_ci == ab.delta_apr_ci and again["A", "B"].delta_ars_ci == ab.delta_ars_ci
    console = Console(record=True, width=80)
    console.print(comparison.to_rich())
    printed = console.export_text()
    assert "5 / 1" in printed and "0.219" in printed and f"{100 * ab.delta_apr:+.1f}" in printed
    assert f"1 task(s) ungraded in B: {SINGLE[7]}" in printed and "never counted as a pass or a fail" in printed


@pytest.mark.slow
def test_vtb_compare_json_end_to_end(runs, tmp_path):
    done = vtb("compare", str(runs["A"][0]), str(runs["B"][0]), str(runs["C"][0]), "--json",
               "--out", str(tmp_path / "compare.html"))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert [row["run"] for row in report["runs"]] == ["A", "B", "C"]
    ab = report["paired"][0]
    assert (ab["a"], ab["b"], ab["flips_to_pass"], ab["flips_to_fail"]) == ("A", "B", sorted(SINGLE[:5]), [SINGLE[6]])
    assert ab["mcnemar_p"] == 0.21875 and ab["ungraded_b"] == [SINGLE[7]]
    assert len(ab["delta_apr_ci"]) == 2 and len(ab["delta_ars_ci"]) == 2 and ab["delta_cost"] > 0
    ac = report["paired"][1]
    assert (ac["only_in_a"], ac["only_in_b"]) == ([SINGLE[0]], [EXTRA])
    assert "the runs cover different task sets" in done.stderr and EXTRA in done.stderr
    assert (tmp_path / "compare.html").is_file()


class FirstCallWrong:
    """A model for ``--epochs 2`` runs: the golden answer, except ``WRONG`` on the first call of each task
    in ``once`` (so one of its two epochs fails) and on every call of each task in ``always``."""

    def __init__(self, once: set[str], always: set[str], prompts: dict[str, tuple[str, str]]) -> None:
        self.once, self.always, self.prompts, self.calls = once, always, prompts, Counter[str]()
        self.lock = threading.Lock()

    def __call__(self, body: dict) -> str:
        user = [m for m in body["messages"] if m["role"] == "user"][-1]
        text = " ".join(block.get("text", "") for block in user["content"] if block.get("type") == "text")
        task_id, golden = next(found for prompt, found in self.prompts.items() if prompt in text)
        with self.lock:
            self.calls[task_id] += 1
            first = self.calls[task_id] == 1
        return WRONG if task_id in self.always or (task_id in self.once and first) else golden


@pytest.mark.slow
def test_runs_with_two_epochs_pool_each_task_before_pairing(tmp_path):
    tasks = {t.id: t for t in load_tasks("sample") if t.id in SINGLE[:4]}
    prompts = {turn.prompt: (t.id, turn.golden_answer) for t in tasks.values() for turn in t.turns}
    t0, t1, t2, t3 = SINGLE[:4]
    # A: t0 passes 1 of 2, t1 2 of 2, t2 0 of 2, t3 2 of 2; B: t0 2 of 2, t1 1 of 2, t2 1 of 2, t3 2 of 2
    plans = {"A": FirstCallWrong({t0}, {t2}, prompts), "B": FirstCallWrong({t1, t2}, set(), prompts)}
    for name, model in plans.items():
        with OpenAIServer(model) as server, pytest.MonkeyPatch.context() as env:
            env.setenv("OPENAI_BASE_URL", server.base_url)
            env.setenv("OPENAI_API_KEY", "k")
            evaluate(tasks=list(tasks.values()), model="gpt-4o", out=tmp_path / name, epochs=2)
        assert sum(model.calls.values()) == 8  # four tasks, two epochs, one call each
    [pair] = compare_runs([tmp_path / "A", tmp_path / "B"]).paired
    # majorities (a tie of 1 of 2 is a fail): A F P F P, B P F F P
    assert (pair.tasks, pair.flips_to_pass, pair.flips_to_fail, pair.both_pass, pair.both_fail) == (
        4, [t0], [t1], 1, 1)
    assert pair.mcnemar_p == 1.0  # 1 against 1: min(1, 2 * (1 + 2) / 2^2)
    # pass rates A .5 1 0 1, B 1 .5 .5 1: mean difference (.5 - .5 + .5 + 0) / 4
    assert pair.delta_apr == 0.125
    html = write_comparison_page(compare_runs([tmp_path / "A", tmp_path / "B"]), tmp_path / "compare.html")
    flip = re.search(rf'<li class="flip to-pass" data-task="{t0}">(.*?)</li>', html.read_text()).group(1)
    links = re.findall(r'<a class="page-(a|b)" href="([^"]+)">([^<]+)</a>', flip)
    assert [(side, text) for side, _, text in links] == [("a", "A epoch 1"), ("a", "A epoch 2"),
                                                         ("b", "B epoch 1"), ("b", "B epoch 2")]
    assert [tmp_path / href for _, href, _ in links] == [task_page_file(tmp_path / run, t0, epoch)
                                                         for run in "AB" for epoch in (1, 2)]
    assert all((tmp_path / href).is_file() for _, href, _ in links)


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs the system chromium (make installs it)")
def test_compare_page_links_flips_to_both_task_pages_and_marks_the_pareto_front(runs, tmp_path):
    playwright_api = pytest.importorskip("playwright.sync_api")
    out = write_comparison_page(compare_runs([runs["A"][0], runs["B"][0], runs["C"][0]]),
                                runs["A"][0].parent / "cmp" / "compare.html")
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        page = browser.new_page()
        page.set_default_timeout(10_000)
        page.goto(out.as_uri())
        section = page.locator("section.pair").first
        assert section.locator("h3").text_content() == "B vs A"
        flips = section.locator("li.flip")
        assert flips.count() == 6
        assert [flips.nth(i).get_attribute("data-task") for i in range(6)] == sorted(SINGLE[:5]) + [SINGLE[6]]
        for i in range(6):
            task_id = flips.nth(i).get_attribute("data-task")
            for side, run in (("a", "A"), ("b", "B")):
                link = flips.nth(i).locator(f"a.page-{side}")
                assert link.count() == 1, f"{task_id}: no link to run {run}'s task page (evaluate() writes them)"
                href = link.get_attribute("href")
                assert href is not None and not href.startswith("file:")  # relative: runs and page share a folder
                target = Path(unquote(urlparse(urljoin(out.as_uri(), href)).path))
                assert target.is_file() and target.parent == runs[run][0] / "tasks"
                assert task_id in target.read_text(encoding="utf-8")
        first = flips.nth(0).locator("a.page-b")
        first.click()
        page.wait_for_load_state()
        assert page.url.startswith(runs["B"][0].as_uri()) and SINGLE[0] in page.content()
        page.go_back()
        chart = page.locator("div.pareto svg")
        assert chart.count() == 1
        # A (10 tasks at 75 µUSD a call, APR 0.4) is on the front; C (10 at 125 µUSD, APR 0.3) is not;
        # B is not plotted: its provider error leaves its cost unknown.
        assert chart.locator("circle.front").count() == 1 and chart.locator("circle.point").count() == 1
        assert chart.locator("circle.front title").text_content() == "A"
        assert "Not plotted (cost or APR unknown): B." in page.content()
        browser.close()
