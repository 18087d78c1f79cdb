"""report.html's task table and the task pages in a real headless Chromium (Playwright, system chromium),
on a run made by the real runner (replay model, real sandbox): the report opens on the table; the
filters and the search give the right rows; a row's link opens its page, where every image loads, a
click shows an image at full size and a failed tool call is highlighted. And a report of 1,204 tasks
stays small: rows only, the task details on their pages."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from support.big_run import ANSWER_MARK, big_run
from support.browser import CHROMIUM, offline_context
from test_report import XSS, magenta_task

import vtb_agents
from vtb_agents.report import write_report
from vtb_agents.rundir.layout import task_page_file
from vtb_agents.runner.run import RunConfig, run_suite
from vtb_agents.tasks import load_tasks

playwright_api = pytest.importorskip("playwright.sync_api")
browser_only = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs the system chromium (make installs it)")
BOOM = "ValueError: boom from the model's code"
CROP = ("from PIL import Image\nim = Image.open('image_0.png')\n"
        "im.crop((340, 260, 400, 300)).resize((240, 160)).save('transformed_image_0.png')\nprint('ok')")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """Four tasks: t-pass (region_switch, passes), t-fail (hybrid_tool, a failed tool call, then fails),
    t-zebra (region_switch, a prompt about zebras, passes), t-ungraded (a critical rubric nobody can judge)."""
    root = tmp_path_factory.mktemp("page-tasks")
    magenta_task(root, "t-pass")
    base = json.loads((root / "t-pass" / "task.json").read_text())["turns"][0]
    boom = "raise ValueError(\"boom from the model's code\")"
    failing = [{"tool": "python_image_processing", "args": {"code": boom}},
               {"tool": "python_image_processing", "args": {"code": CROP}}]
    magenta_task(root, "t-fail", category="Hybrid Tool Reasoning", domain="medical", turns=[{
        **base, "trajectory": failing, "golden_answer": f"{XSS} It is 47, says the quokka."}])
    magenta_task(root, "t-zebra", turns=[{**base, "prompt": "How many zebra stripes? Read the corner."}])
    magenta_task(root, "t-ungraded", domain="sports",
                 turns=[{**base, "rubrics": {"r1": {"description": "Explains the reading", "weight": 5}}}])
    out = tmp_path_factory.mktemp("page-runs") / "run"
    run_suite(load_tasks(root), RunConfig(model="replay", tasks=str(root)), out)
    write_report(out)
    return out


def visible_ids(page) -> list[str]:
    return page.eval_on_selector_all("#task-table tbody tr:not([hidden]) td:first-child",
                                     "cells => cells.map(c => c.textContent)")


@pytest.fixture
def browser():
    with offline_context() as context:
        yield context


@pytest.mark.slow
@browser_only
def test_report_opens_on_the_task_table_and_filters_and_searches(run_dir, browser):
    page = browser.new_page()
    page.goto((run_dir / "report.html").as_uri())
    assert page.eval_on_selector("h2", "h => h.closest('section').id") == "tasks"  # the first section: the table
    top = page.locator("#task-table").bounding_box()
    assert top is not None and top["y"] < 400  # in the first screen, not below charts
    assert visible_ids(page) == ["t-fail", "t-pass", "t-ungraded", "t-zebra"]  # by id
    assert page.text_content("#shown") == "4 of 4 tasks"
    assert page.locator("#task-table tbody tr").nth(1).locator("td").all_text_contents() == \
        ["t-pass", "region_switch", "finance", "pass", "answered", "1.00", "1", "1", "1.00", "unknown"]

    page.select_option("#f-category", "hybrid_tool")
    assert visible_ids(page) == ["t-fail"]
    page.select_option("#f-category", "")
    page.select_option("#f-result", "pass")
    assert visible_ids(page) == ["t-pass", "t-zebra"]
    page.select_option("#f-result", "fail")
    assert visible_ids(page) == ["t-fail"]
    page.select_option("#f-result", "")
    page.select_option("#f-outcome", "unjudged")
    assert visible_ids(page) == ["t-ungraded"]
    page.select_option("#f-outcome", "answered")
    page.select_option("#f-category", "region_switch")  # filters combine
    assert visible_ids(page) == ["t-pass", "t-zebra"]
    page.select_option("#f-outcome", "")
    page.select_option("#f-category", "")

    page.fill("#q", "T-UNG")  # by id, any case
    assert visible_ids(page) == ["t-ungraded"]
    page.fill("#q", "zebra stripes")  # a prompt's text (t-zebra's id says "zebra", not "stripes")
    page.wait_for_function("document.querySelector('#shown').textContent === '1 of 4 tasks'")
    assert visible_ids(page) == ["t-zebra"]
    page.fill("#q", "QUOKKA")  # an answer's text
    assert visible_ids(page) == ["t-fail"]
    page.fill("#q", "nothing says this")
    assert visible_ids(page) == [] and page.is_visible("#no-rows")
    page.fill("#q", "")
    assert len(visible_ids(page)) == 4

    page.click("#task-table th:nth-child(6)")  # sort by score, ascending: the unknown score last
    assert visible_ids(page)[0] == "t-fail" and visible_ids(page)[-1] == "t-ungraded"


@pytest.mark.slow
@browser_only
def test_a_rows_link_opens_its_task_page_with_every_image_and_the_failed_call(run_dir, browser):
    page = browser.new_page()
    page.goto((run_dir / "report.html").as_uri())
    page.click("#task-table a:text-is('t-fail')")
    page.wait_for_load_state("load")
    assert page.url == task_page_file(run_dir, "t-fail").as_uri()
    sizes = page.eval_on_selector_all("img", "images => images.map(i => [i.complete, i.naturalWidth])")
    assert len(sizes) == 5 and all(done and width > 0 for done, width in sizes)  # 4 and where it looked
    assert page.locator(".where img").count() == 1
    assert page.locator(".model-call img").count() == 2  # the task's image and the crop, each also as sent
    failed = page.locator(".call.failed")
    assert failed.count() == 1 and BOOM in failed.text_content()
    colour = failed.evaluate("e => getComputedStyle(e).borderLeftColor")
    assert colour == "rgb(180, 35, 24)" and page.locator(".call:not(.failed)").count() == 1
    answer = page.locator(".turn .answer")
    assert answer.text_content() == f"{XSS} It is 47, says the quokka."  # escaped: shown as text
    verdicts = page.locator(".turn .verdicts tbody tr")  # right under the answer they judged
    assert verdicts.count() == 2 and verdicts.first.get_attribute("class") == "not_met"
    page.click("figure a.zoom >> nth=0")  # thumbnail → the full-size image over the page
    page.wait_for_function("document.querySelector('.lightbox img') && document.querySelector('.lightbox img')"
                           ".complete")
    assert page.eval_on_selector(".lightbox img", "i => [i.naturalWidth, i.naturalHeight]") == [400, 300]
    page.keyboard.press("Escape")
    assert page.locator(".lightbox").count() == 0
    page.click("text=← report")
    assert page.url == (run_dir / "report.html").as_uri()


@pytest.mark.slow
@browser_only
def test_every_task_page_loads_every_image(run_dir, browser):
    page = browser.new_page()
    for task_id, images in (("t-pass", 5), ("t-zebra", 5), ("t-ungraded", 5)):  # each image also as sent, and
        # the task image under "where it looked"
        page.goto(task_page_file(run_dir, task_id).as_uri())
        sizes = page.eval_on_selector_all("img", "images => images.map(i => [i.complete, i.naturalWidth])")
        assert len(sizes) == images and all(done and width > 0 for done, width in sizes), task_id
        assert page.locator(".call.failed").count() == 0


def test_a_report_of_1204_tasks_carries_rows_only(run_dir, tmp_path):
    sizes = {}
    for n in (4, 1204):
        tasks = big_run(run_dir, tmp_path / f"big-{n}", n)
        report = write_report(tmp_path / f"big-{n}", tasks=tasks).read_text(encoding="utf-8")
        sizes[n] = len(report.encode())
        assert report.count('<tr data-category="') == n and ANSWER_MARK not in report  # no task detail inlined
        assert "<details" not in report and "<img" not in report
        pages = sorted((tmp_path / f"big-{n}" / "tasks").glob("*.html"))
        assert len(pages) == n and pages[0].read_text(encoding="utf-8").count(ANSWER_MARK) > 10
        index = (tmp_path / f"big-{n}" / "report_files" / "search.js").read_text(encoding="utf-8")
        assert index.count(ANSWER_MARK) >= n * 50  # the answers' text is searchable, from its own file
    per_task = (sizes[1204] - sizes[4]) / 1200
    assert per_task < 600, f"{per_task:.0f} bytes per task in report.html"
    assert sizes[1204] < 800_000


def test_a_new_report_drops_pages_of_tasks_it_no_longer_has(run_dir, tmp_path):
    tasks = big_run(run_dir, tmp_path / "run", 6)
    write_report(tmp_path / "run", tasks=tasks)
    assert len(list((tmp_path / "run" / "tasks").glob("*.html"))) == 6
    write_report(tmp_path / "run", tasks=tasks[:2])  # the report of a run shows every result: still 6 pages
    assert len(list((tmp_path / "run" / "tasks").glob("*.html"))) == 6
    stale = tmp_path / "run" / "tasks" / "gone-0000000000.html"
    stale.write_text("old")
    write_report(tmp_path / "run", tasks=tasks)
    names = sorted(p.name for p in (tmp_path / "run" / "tasks").glob("*.html"))
    assert len(names) == 6 and stale.name not in names
    assert all(re.fullmatch(r"copy-0000\d-t-[a-z]+-[0-9a-f]{10}\.html", name) for name in names)


def test_a_run_with_epochs_has_a_row_and_a_page_per_task_and_epoch(tmp_path):
    root = tmp_path / "tasks"
    magenta_task(root, "t-one")
    run = vtb_agents.evaluate(tasks=load_tasks(root), out=tmp_path / "run", epochs=2)
    report = run.report.read_text(encoding="utf-8")
    header = re.search(r"<thead><tr>(.*?)</tr></thead>", report.split('id="task-table"')[1])
    assert header is not None and re.findall(r">([^<]+)</th>", header.group(1))[:3] == ["task", "epoch", "category"]
    links = re.findall(r'<td><a href="(tasks/[^"]+)">t-one</a></td><td class="n">(\d)</td>', report)
    assert links == [(task_page_file(Path(), "t-one", epoch).as_posix(), str(epoch)) for epoch in (1, 2)]
    second = task_page_file(run.run_dir, "t-one", 2).read_text(encoding="utf-8")
    assert "strategy react · epoch 2</p>" in second
