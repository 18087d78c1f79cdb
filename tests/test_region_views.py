"""Where the model looked, shown everywhere (docs/concepts/region-iou.md): two runs of the real `vtb`
CLI (a subprocess) on sample tasks, the replay model and a chat model on a local server that crops with
NumPy slicing; the terminal, report.html, `vtb transcript` and `vtb compare` show the region figures of
summary.json, and each task page draws the reference's and the model's boxes where they are (headless
Chromium: the SVG rectangles in the DOM at the boxes' places over the image)."""

from __future__ import annotations

from functools import partial
import html
import json
import re
from pathlib import Path

import pytest
from support.openai_server import OpenAIServer
from support.cli import openai_env
from support import cli
from support.together import together

from vtb_agents.analysis.regions import box_iou
from vtb_agents.report.markup import pct
from vtb_agents.report.paired import signed_pct
from vtb_agents.rundir.layout import task_page_file
from vtb_agents.rundir.store import ResultsStore
from vtb_agents.tasks import load_tasks

CHROMIUM = Path("/usr/bin/chromium")
SAMPLE = {t.id: t for t in load_tasks("sample")}
# NumPy crops per task: the scoreboard's reference box (40, 30, 340, 166) moved by (150, 68): IoU 1/7;
# the invoice's total block (890, 688, 1242, 742) exactly: IoU 1.0 (another reference box of that turn)
BOXES = {"rs-sports-scoreboard": (190, 98, 490, 234), "rs-finance-invoice": (890, 688, 1242, 742)}
IDS = sorted(BOXES)


def numpy_crop(box: tuple[int, int, int, int]) -> str:
    x0, y0, x1, y1 = box
    return ("import numpy as np\nfrom PIL import Image\na = np.asarray(Image.open('image_0.png').convert('RGB'))\n"
            f"Image.fromarray(a[{y0}:{y1}, {x0}:{x1}]).save('transformed_image_0.png')")


def numpy_model(body: dict) -> object:
    """Crops its task's box with NumPy once, then answers with the golden answer."""
    first = next(m for m in body["messages"] if m["role"] == "user")
    text = first["content"] if isinstance(first["content"], str) else first["content"][0]["text"]
    task = next(SAMPLE[i] for i in IDS if SAMPLE[i].turns[0].prompt in text)
    if not any(m["role"] == "tool" for m in body["messages"]):
        return {"tool_calls": [{"name": "python_image_processing", "arguments": {"code": numpy_crop(BOXES[task.id])}}]}
    return task.turns[0].golden_answer


vtb = partial(cli.vtb, columns=100, timeout=600)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[Path, str]]:
    root = tmp_path_factory.mktemp("region-views")
    selection = [a for task_id in IDS for a in ("--task-id", task_id)]
    with OpenAIServer(numpy_model) as server:  # the two runs side by side, each in a folder of its own
        replay, numpy = together(
            lambda: vtb("run", "--model", "replay", "--judge", "rule", *selection, "--out", str(root / "replay")),
            lambda: vtb("run", "--model", "openai:vision-test", "--judge", "rule", *selection, "--out",
                        str(root / "numpy"), env=openai_env(server.base_url)))
    assert replay.returncode == 0, replay.stderr
    assert numpy.returncode == 0, numpy.stderr
    return {"replay": (root / "replay", replay.stdout), "numpy": (root / "numpy", numpy.stdout)}


def summary_of(run: Path) -> dict:
    return json.loads((run / "summary.json").read_text())["region_iou"]


@pytest.mark.slow
def test_a_numpy_slice_crop_gets_its_real_iou(runs):
    results = {r.task_id: r for r in ResultsStore(runs["numpy"][0]).load()[0]}
    for task_id, box in BOXES.items():
        turn = results[task_id].episode.turns[0]
        expected = max(box_iou(box, r.box) for r in turn.reference_regions or [])
        assert [(r.box, r.located) for r in turn.regions] == [(box, True)]
        assert turn.best_crop_iou == pytest.approx(expected)
    assert results["rs-sports-scoreboard"].episode.turns[0].best_crop_iou == pytest.approx(1 / 7)
    assert results["rs-finance-invoice"].episode.turns[0].best_crop_iou == 1.0
    regions = summary_of(runs["numpy"][0])
    assert (regions["turns"], regions["share_iou_ge_0_5"], regions["not_located"]) == (2, 0.5, 0)


@pytest.mark.slow
def test_the_terminal_and_report_show_the_summarys_region_figures(runs):
    for run, stdout in runs.values():
        regions = summary_of(run)
        table = stdout.split("Looked at the right place", 1)[1]
        overall = next(line for line in table.splitlines() if "│ overall" in line)
        assert [c.strip() for c in overall.split("│")[2:7]] == [
            str(regions["turns"]), pct(regions["share_iou_ge_0_5"]), pct(regions["pass_rate_when_looked"]),
            pct(regions["pass_rate_when_not"]), str(regions["not_located"])]
        report = (run / "report.html").read_text()
        table = report.split('class="regions-table"', 1)[1].split("</table>", 1)[0]
        first = re.search(r"<tr><td>overall</td>(.*?)</tr>", table)
        assert first is not None
        assert [html.unescape(c) for c in re.findall(r"<td>(.*?)</td>", first.group(1))] == [
            str(regions["turns"]), pct(regions["share_iou_ge_0_5"]), pct(regions["pass_rate_when_looked"]),
            pct(regions["pass_rate_when_not"]), str(regions["not_located"])]
        for name, block in regions["by_category"].items():
            assert f"<tr><td>{name}</td><td>{block['turns']}</td><td>{pct(block['share_iou_ge_0_5'])}</td>" in table


@pytest.mark.slow
def test_vtb_transcript_shows_each_turns_iou(runs):
    run = runs["numpy"][0]
    results = {r.task_id: r for r in ResultsStore(run).load()[0]}
    transcripts = together(*(partial(vtb, "transcript", str(run), task_id) for task_id in IDS))
    for task_id, shown in zip(IDS, transcripts, strict=True):
        assert shown.returncode == 0, shown.stderr
        iou = results[task_id].episode.turns[0].best_crop_iou
        assert f"where it looked (best crop IoU; >= 0.5 looked): turn 1 {iou:.2f}" in shown.stdout


@pytest.mark.slow
def test_vtb_compare_shows_the_share_looked_and_its_paired_difference(runs, tmp_path):
    pair = (str(runs["replay"][0]), str(runs["numpy"][0]))
    done, as_json = together(lambda: vtb("compare", *pair, "--out", str(tmp_path / "compare.html")),
                             lambda: vtb("compare", *pair, "--json"))
    assert done.returncode == 0, done.stderr
    replay, numpy = summary_of(runs["replay"][0]), summary_of(runs["numpy"][0])
    lines = done.stdout.splitlines()
    for label, regions in (("replay", replay), ("numpy", numpy)):
        row = next(line for line in lines if line.strip().startswith(label) and pct(regions["share_iou_ge_0_5"]) in line
                   and str(regions["turns"]) in line.split())
        assert row.split()[1:3] == [str(regions["turns"]), pct(regions["share_iou_ge_0_5"])]
    # paired over the two measured turns: replay looked in both (1.0), numpy in one (0.5): -50 points
    delta = signed_pct(numpy["share_iou_ge_0_5"] - replay["share_iou_ge_0_5"])
    assert delta == "-50.0"
    assert any(line.strip().startswith("numpy vs replay") and line.split()[-2:] == ["2", delta] for line in lines)
    data = json.loads(as_json.stdout)
    assert data["paired"][0]["delta_share_looked"] == -0.5 and data["paired"][0]["looked_turns"] == 2
    page = (tmp_path / "compare.html").read_text()
    assert "Δ share looked (pts)" in page and ">-50.0<" in page


playwright_api = pytest.importorskip("playwright.sync_api")


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs the system chromium (make installs it)")
@pytest.mark.browser
def test_each_task_page_draws_the_reference_and_model_boxes_where_they_are(runs):
    run = runs["numpy"][0]
    results = {r.task_id: r for r in ResultsStore(run).load()[0]}
    with playwright_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        page = chromium.new_page(viewport={"width": 1280, "height": 900})
        for task_id in IDS:
            turn = results[task_id].episode.turns[0]
            page.goto(task_page_file(run, task_id).as_uri())
            figure = page.locator(".where figure.regions")
            assert figure.count() == 1
            image = figure.locator("img")
            assert image.evaluate("img => img.complete && img.naturalWidth > 0")
            shown = image.bounding_box()
            width, height = turn.regions[0].image_size
            scale_x, scale_y = shown["width"] / width, shown["height"] / height
            drawn = {"ref": [r.box for r in turn.reference_regions or []], "model": [r.box for r in turn.regions]}
            for kind, boxes in drawn.items():
                groups = figure.locator(f"g.region.{kind}")
                assert groups.count() == len(boxes)
                for i, box in enumerate(boxes):
                    group = groups.nth(i)
                    assert group.get_attribute("data-box") == ",".join(f"{v:g}" for v in box)
                    rect = group.locator("rect").bounding_box()
                    # the rectangle lies over the image where the box is (stroke: a couple of pixels)
                    assert rect["x"] == pytest.approx(shown["x"] + box[0] * scale_x, abs=3)
                    assert rect["y"] == pytest.approx(shown["y"] + box[1] * scale_y, abs=3)
                    assert rect["width"] == pytest.approx((box[2] - box[0]) * scale_x, abs=4)
                    assert rect["height"] == pytest.approx((box[3] - box[1]) * scale_y, abs=4)
            label = figure.locator("g.region.model text").first.text_content()
            assert label == f"IoU {turn.best_crop_iou:.2f} (located)"
            assert page.locator(".where .iou").first.text_content().startswith(
                f"best crop IoU {turn.best_crop_iou:.2f}")
        page.goto((run / "report.html").as_uri())
        for value, expected in (("looked", ["rs-finance-invoice"]), ("did not look", ["rs-sports-scoreboard"]),
                                ("not located", [])):
            page.select_option("#f-looked", value)
            assert page.eval_on_selector_all("#task-table tbody tr:not([hidden]) td:first-child",
                                             "cells => cells.map(c => c.textContent)") == expected
        chromium.close()
