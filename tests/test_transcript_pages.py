"""Task pages and the annotate page show the whole transcript, in a real headless Chromium (Playwright,
system chromium): runs of a few sample tasks over a local OpenAI-compatible server with `--strategy plan`
and `--strategy marks` (real graphs, real sandbox). On each task page every image loads, the strategy's
steps are shown (the plan's text; the marked images), there is one model call per model event of the
transcript, a failed tool call is highlighted, and each verdict (with its explanation, judge model and
judge prompt) sits under the answer it judged; report.html still filters and searches; the annotate page
shows the same steps and tool calls."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.openai_server import OpenAIServer
from support.scripted_vision import VisionModel
from support.servers import serving
from test_transcripts import AGENT, JUDGE, PLAN, VERDICT, opening, responder

from vtb_agents.annotate.server import AnnotationSession, make_server
from vtb_agents.report import write_report
from vtb_agents.report.prepare import ReportPreparer
from vtb_agents.rundir.layout import task_page_file
from vtb_agents.rundir.store import ResultsStore
from vtb_agents.rundir.transcripts import read_transcript, write_transcript
from vtb_agents.runner.executors import LocalExecutor
from vtb_agents.runner.run import RunConfig, run_suite
from vtb_agents.tasks import load_tasks
from vtb_agents.transcript import JudgeEvent, ModelEvent, StepEvent, ToolEvent

CHROMIUM = Path("/usr/bin/chromium")
playwright_api = pytest.importorskip("playwright.sync_api")
pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs the system chromium (make installs it)")
BOOM = "raise ValueError('boom <b>from</b> the model code')"
TASKS = 3
IMAGES_LOADED = "images => images.map(i => i.complete && i.naturalWidth > 0)"


def failing_first_call(respond, prompt: str):
    """``respond``, whose tool calls run code that raises on the task opening with ``prompt``."""
    def reply(body):
        answer = respond(body)
        if isinstance(answer, dict) and body["model"] == AGENT and opening(body["messages"]) == prompt:
            return {"tool_calls": [{"name": "python_image_processing", "arguments": {"code": BOOM}}]}
        return answer
    return reply


@pytest.fixture(scope="module")
def tasks():
    """Three sample tasks of different categories, one of them with several turns."""
    sample = load_tasks("sample")
    chosen = [next(t for t in sample if len(t.turns) > 1)]
    for task in sample:
        if len(chosen) < TASKS and task.category not in {t.category for t in chosen}:
            chosen.append(task)
    return chosen


@pytest.fixture(scope="module", params=["plan", "marks"])
def run(request, tasks, tmp_path_factory):
    """(strategy, run directory, id of the task whose tool call fails) of a run of ``tasks``, with its report."""
    out = tmp_path_factory.mktemp(f"pages-{request.param}") / "run"
    failing = tasks[1]
    with OpenAIServer(failing_first_call(responder(VisionModel()), failing.turns[0].prompt)) as server, \
            pytest.MonkeyPatch.context() as env:
        env.setenv("OPENAI_BASE_URL", server.base_url)
        env.setenv("OPENAI_API_KEY", "k")
        summary = run_suite(tasks, RunConfig(model=f"openai:{AGENT}", judge=f"openai:{JUDGE}",
                                             strategy=request.param), out, executor=LocalExecutor(3))
    assert summary.complete is True
    write_report(out, tasks=tasks)
    return request.param, out, failing.id


@pytest.fixture(scope="module")
def chromium(run):
    """One headless Chromium for the tests of a run. It depends on ``run`` so that it is closed before the next
    run is made: Playwright's sync API keeps its event loop marked running in this thread, where the runner's
    ``asyncio.run`` would refuse to start."""
    with playwright_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield launched
        launched.close()


@pytest.fixture
def browser(chromium):
    """A fresh browser context of its own for each test (no page, cookie or storage of another test)."""
    context = chromium.new_context(viewport={"width": 1280, "height": 800})
    yield context
    context.close()


@pytest.mark.slow
def test_a_task_page_shows_the_whole_transcript(run, tasks, browser):
    strategy, out, failing = run
    page = browser.new_page()
    for task in tasks:
        transcript = read_transcript(out, task.id)
        page.goto(task_page_file(out, task.id).as_uri())
        loaded = page.eval_on_selector_all("img", IMAGES_LOADED)
        assert len(loaded) > 0 and all(loaded), task.id  # no page references a missing file
        models = [e for e in transcript.events if isinstance(e, ModelEvent)]
        assert page.locator(".model-call").count() == len(models) > 0
        assert page.locator(".model-call code").all_text_contents() == [e.step for e in models]
        tools = [e for e in transcript.events if isinstance(e, ToolEvent)]
        assert page.locator(".call").count() == len(tools)
        steps = [e for e in transcript.events if isinstance(e, StepEvent)]
        shown = page.locator(".step")
        assert shown.count() == len(steps) > 0
        if strategy == "plan":
            assert shown.locator(".step-text").all_text_contents() == [PLAN] * len(task.turns)
        else:  # the marked images, each loaded, under the marks step
            marked = sum(len(s.images) for s in steps)
            assert marked == sum(len(turn.images) for turn in task.turns)
            assert shown.locator("img").count() == marked
            assert all(shown.locator("img").evaluate_all(IMAGES_LOADED))
            names = shown.locator("figcaption").all_text_contents()
            assert all(name.startswith("marked_image_") for name in names)
        # a model call's request is collapsed, its response open
        first = page.locator(".model-call").first
        assert first.locator("details.request").get_attribute("open") is None
        assert first.locator(".reply").is_visible()
        judged = [e for e in transcript.events if isinstance(e, JudgeEvent)]
        for index in range(len(task.turns)):  # each verdict right under the answer of its turn
            turn = page.locator(".turn").nth(index)
            mine = [e for e in judged if e.turn == index]
            rows = turn.locator(".verdicts tbody tr")
            assert rows.count() == len(mine) > 0
            classes = [rows.nth(i).get_attribute("class") for i in range(len(mine))]
            assert classes == [e.verdict.status for e in mine]
            assert turn.locator(".answer").count() == 1
            llm = [i for i, e in enumerate(mine) if e.calls]
            for i in llm:
                row = rows.nth(i)
                assert VERDICT["justification"] in row.text_content() and f"openai:{JUDGE}" in row.text_content()
                details = row.locator("details.judge-call")
                details.locator("summary").click()
                assert details.locator("pre").first.text_content() == mine[i].prompt
                assert json.loads(details.locator("pre.raw").text_content()) == VERDICT
    page.goto(task_page_file(out, failing).as_uri())
    failed = page.locator(".call.failed")
    assert failed.count() == 1 and "ValueError: boom <b>from</b> the model code" in failed.text_content()
    assert failed.evaluate("e => getComputedStyle(e).borderLeftColor") == "rgb(180, 35, 24)"
    assert failed.locator("b").count() == 0  # the model's text is escaped


@pytest.mark.slow
def test_report_html_filters_and_searches(run, tasks, browser):
    _, out, _ = run
    page = browser.new_page()
    page.goto((out / "report.html").as_uri())
    rows = "#task-table tbody tr:not([hidden]) td:first-child"
    ids = sorted(t.id for t in tasks)
    assert page.eval_on_selector_all(rows, "cells => cells.map(c => c.textContent)") == ids
    page.select_option("#f-category", tasks[0].category)
    assert page.eval_on_selector_all(rows, "cells => cells.map(c => c.textContent)") == [tasks[0].id]
    page.select_option("#f-category", "")
    page.fill("#q", tasks[2].id.upper())
    assert page.eval_on_selector_all(rows, "cells => cells.map(c => c.textContent)") == [tasks[2].id]
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "class=\"model-call" not in report and PLAN not in report  # nothing of the transcripts in report.html


@pytest.mark.slow
def test_the_annotate_page_shows_the_strategy_steps_and_tool_calls(run, tasks, browser, tmp_path):
    strategy, out, failing = run
    with serving(make_server(AnnotationSession.open(out, tmp_path / "labels.jsonl", tasks=tasks))) as server:
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/")
        page.wait_for_selector(".rubric.current")
        for task in tasks:
            transcript = read_transcript(out, task.id)
            box = page.locator(f'[id="task-{task.id}"]')
            steps = [e for e in transcript.events if isinstance(e, StepEvent)]
            tools = [e for e in transcript.events if isinstance(e, ToolEvent)]
            assert box.locator(".steps .step").count() == len(steps) > 0
            assert box.locator(".steps .call").count() == len(tools)
            if strategy == "plan":
                assert box.locator(".steps .step .step-text").all_text_contents() == [PLAN] * len(task.turns)
            widths = []
            for image in box.locator("img").all():  # the task's own images load lazily: scrolled to first
                image.scroll_into_view_if_needed()
                widths.append(image.evaluate("i => i.decode().then(() => i.naturalWidth)"))
            assert len(widths) > 0 and all(width > 0 for width in widths), task.id
            assert box.locator(".verdicts").count() == 0  # the labeller never sees the judge's verdicts
        assert page.locator(f'[id="task-{failing}"] .steps .call.failed').count() == 1


@pytest.mark.slow
def test_the_preparer_makes_the_transcripts_thumbnails_during_a_run(run, tasks, tmp_path):
    """ReportPreparer (the run's background head start) makes a thumbnail of every image of a transcript:
    the images sent to the model, the tools' images and the strategy's own."""
    _, out, _ = run
    copy = tmp_path / "run"
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns("report*", "tasks"))
    with ReportPreparer(copy, tasks) as preparer:
        for result in ResultsStore(copy).load()[0]:
            preparer.add(result)
    events = [event for task in tasks for event in read_transcript(copy, task.id).events]
    wanted = {image.sha256 for event in events if isinstance(event, ModelEvent) for image in event.images}
    wanted |= {image.ref for event in events if isinstance(event, StepEvent) for image in event.images}
    wanted |= {image.ref for event in events if isinstance(event, ToolEvent) for image in event.call.images}
    made = {path.stem for path in (copy / "report_files" / "thumbs").glob("*.jpg")}
    assert len(wanted) > len(tasks) and wanted <= made


@pytest.mark.slow
def test_reasoning_and_a_failed_model_call_are_shown(run, tasks, browser, tmp_path):
    """A reply's reasoning text is shown with the reply; a model call that failed is highlighted in red
    with its error (the transcript of a real run, given a reasoning text and a failed last call)."""
    _, out, _ = run
    copy = tmp_path / "run"
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns("report*", "tasks"))
    task = tasks[0]
    transcript = read_transcript(copy, task.id)
    models = [e for e in transcript.events if isinstance(e, ModelEvent)]
    assert models[0].response is not None
    models[0].response.reasoning = "First I <i>look</i> at the image."
    models[-1].response, models[-1].error = None, "APIConnectionError: <b>connection</b> reset"
    write_transcript(copy, transcript)
    write_report(copy, tasks=tasks)
    page = browser.new_page()
    page.goto(task_page_file(copy, task.id).as_uri())
    calls = page.locator(".model-call")
    assert calls.first.locator(".reasoning .text").text_content() == "First I <i>look</i> at the image."
    failed = page.locator(".model-call.failed")
    assert failed.count() == 1 and failed.locator(".error-line").text_content() == \
        "APIConnectionError: <b>connection</b> reset"
    assert failed.evaluate("e => getComputedStyle(e).borderLeftColor") == "rgb(180, 35, 24)"
    assert calls.nth(calls.count() - 1).get_attribute("class") == "model-call failed"
