"""Looked at the right place: IoU and box mapping by hand, the sandbox's region tracking, and the
per-turn and per-run figures of real runs (scripted models, react and zoom) against hand computations."""

from __future__ import annotations

import io
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from PIL import Image

from vtb_agents.analysis.regions import best_crop_iou, box_iou
from vtb_agents.api import evaluate
from vtb_agents.episodes.regions import ReferenceRegionCache
from vtb_agents.models.replay import current_turn
from vtb_agents.models.scripted import ScriptedChatModel
from vtb_agents.results import ImageRegion
from vtb_agents.rundir.read import read_meta
from vtb_agents.sandbox import SandboxError, open_sandbox
from vtb_agents.sandbox.region_tracker import map_box
from vtb_agents.sandbox.regions import parse_region, read_region
from vtb_agents.tasks import load_tasks


def test_iou_of_boxes_by_hand():
    # areas 100 and 100, overlap 5 x 5 = 25: 25 / (100 + 100 - 25) = 1/7
    assert box_iou((0, 0, 10, 10), (5, 5, 15, 15)) == pytest.approx(1 / 7)
    # one inside the other: 4 x 4 = 16 of 100
    assert box_iou((0, 0, 10, 10), (2, 2, 6, 6)) == pytest.approx(0.16)
    assert box_iou((0, 0, 10, 10), (0, 0, 10, 10)) == 1.0
    assert box_iou((0, 0, 10, 10), (10, 0, 20, 10)) == 0.0  # touching edges share no pixel
    assert box_iou((0, 0, 10, 10), (30, 30, 40, 40)) == 0.0


def region(box: tuple[float, float, float, float], image: str = "image_0.png", size=(400, 200)) -> ImageRegion:
    return ImageRegion(image=image, box=box, image_size=size)


def test_best_crop_iou_takes_the_best_pair_of_the_same_image():
    reference = [region((0, 0, 10, 10)), region((100, 100, 110, 110))]
    shown = [region((5, 5, 15, 15)), region((100, 100, 110, 110), image="image_1.png")]
    assert best_crop_iou(shown, reference) == pytest.approx(1 / 7)  # the exact match is of another image
    assert best_crop_iou([], reference) == 0.0  # the model cropped nothing
    assert best_crop_iou(shown, []) is None  # the reference crops nothing
    assert best_crop_iou(shown, None) is None  # not measured


def test_box_mapping_through_a_crop_chain_by_hand():
    # image_0.png is 400 x 200; crop (100, 50, 300, 150) -> a 200 x 100 image showing that box
    first = map_box((0, 0, 400, 200), (400, 200), (100, 50, 300, 150))
    assert first == (100, 50, 300, 150)
    # resized x4 to 800 x 400 (same region, scale 1/4); cropping (400, 200, 800, 400) of it is its
    # bottom-right quarter: x 100 + 400/4 .. 100 + 800/4, y 50 + 200/4 .. 50 + 400/4
    assert map_box(first, (800, 400), (400, 200, 800, 400)) == (200, 100, 300, 150)
    # a box reaching outside the image is clamped to it first; one wholly outside shows nothing
    assert map_box((0, 0, 400, 200), (400, 200), (-10, -10, 50, 50)) == (0, 0, 50, 50)
    assert map_box((0, 0, 400, 200), (400, 200), (500, 0, 600, 10)) is None


def png(size: tuple[int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, "white").save(out, "PNG")
    return out.getvalue()


def test_the_sandbox_records_where_each_saved_image_was_cut_from(tmp_path):
    with open_sandbox("local", tmp_path / "box") as sandbox:
        sandbox.put_file("image_0.png", png((400, 200)))
        result = sandbox.run(
            "from PIL import Image, ImageEnhance, ImageFilter, ImageOps\n"
            "img = Image.open('image_0.png').convert('RGB')\n"
            "c = img.crop((100, 50, 300, 150)).resize((800, 400), Image.LANCZOS)\n"
            "c = ImageEnhance.Contrast(ImageOps.autocontrast(c.filter(ImageFilter.SHARPEN))).enhance(2)\n"
            "c.save('transformed_image_0.png')\n"
            "c.crop((400, 200, 800, 400)).save('transformed_image_1.png')\n"
            "img.resize((200, 100)).save('transformed_image_2.png')\n"
            "c.save('transformed_image_3.jpg')\n")
        assert result.ok, result.error
        # a later call crops a saved crop: its region comes from the file; thumbnail rescales it. The
        # code's own PNG text chunks stay beside the region
        assert sandbox.run("from PIL.PngImagePlugin import PngInfo\n"
                           "e = Image.open('transformed_image_1.png'); e.thumbnail((50, 50))\n"
                           "mine = PngInfo(); mine.add_text('note', 'kept')\n"
                           "e.crop((25, 0, 50, 25)).save('transformed_image_4.png', pnginfo=mine)").ok
        found = {n: read_region(sandbox.get_file(n)) for n in sorted(sandbox.list_files()) if n != "image_0.png"}
        assert Image.open(io.BytesIO(sandbox.get_file("transformed_image_4.png"))).info["note"] == "kept"
    assert found == {
        "transformed_image_0.png": region((100, 50, 300, 150)),
        "transformed_image_1.png": region((200, 100, 300, 150)),
        "transformed_image_2.png": region((0, 0, 400, 200)),  # resized whole: recorded, but no crop
        "transformed_image_3.jpg": None,  # regions travel in PNG files only
        # transformed_image_1 is 400 x 200 showing (200, 100, 300, 150); thumbnail 50 x 25; its right half
        "transformed_image_4.png": region((250, 100, 300, 150)),
    }
    assert [r.is_crop for r in found.values() if r is not None] == [True, True, False, True]


def test_a_forged_region_is_checked_like_any_model_output():
    assert parse_region(json.dumps({"image": "image_0.png", "box": [1, 2, 3, 4], "image_size": [10, 10]})) \
        == region((1, 2, 3, 4), size=(10, 10))
    assert parse_region(json.dumps({"image": "image_0.png", "box": [-5, 2, 30, 4], "image_size": [10, 10]})) \
        == region((0, 2, 10, 4), size=(10, 10))  # clamped to the image
    assert parse_region(json.dumps({"image": "../etc/passwd", "box": [1, 2, 3, 4], "image_size": [10, 10]})) is None
    assert parse_region(json.dumps({"image": "image_0.png", "box": [5, 2, 3, 4], "image_size": [10, 10]})) is None
    assert parse_region('{"image": "image_0.png", "box": [NaN, 2, 3, 4], "image_size": [10, 10]}') is None
    assert parse_region("not json") is None


# --- real runs -------------------------------------------------------------------------------------

SAMPLE = {t.id: t for t in load_tasks("sample")}
CROP = ("from PIL import Image\nimg = Image.open('image_0.png').convert('RGB')\n{body}")
PLANS = {
    # reference crops of image_0.png (1800 x 1350): (40, 30, 340, 166) scoreboard, (1656, 1206, 1798, 1318)
    # player. The model crops the scoreboard's box moved by (150, 68): overlap 150 x 68 = 10200,
    # union 300*136 + 300*136 - 10200 = 71400: IoU 1/7; none with the player. It answers wrongly.
    "rs-sports-scoreboard": (CROP.format(body="img.crop((190, 98, 490, 234)).save('transformed_image_0.png')"),
                             "I cannot tell; my best guess is 0."),
    # reference crops (1090, 165, 1230, 194), (890, 688, 1242, 742), (370, 1043, 701, 1091). The model
    # crops (800, 600, 1300, 800), doubles it to 1000 x 400, and crops (180, 176, 884, 284) of that:
    # (800 + 180/2, 600 + 176/2, 800 + 884/2, 600 + 284/2) = (890, 688, 1242, 742), the total block:
    # IoU 1.0. It answers with the golden answer.
    "rs-finance-invoice": (CROP.format(body="big = img.crop((800, 600, 1300, 800)).resize((1000, 400))\n"
                                            "big.crop((180, 176, 884, 284)).save('transformed_image_0.png')"),
                           None),
    # the reference crops three boxes; the model crops nothing (IoU 0.0) and answers with the golden answer
    "ht-medical-dosage": (None, None),
}


def prompt_of(messages: list[BaseMessage]) -> str:
    opening = next(m for m in messages if isinstance(m, HumanMessage) and m.id == "turn-0")
    return next(b["text"] for b in opening.content if isinstance(b, dict) and b.get("type") == "text")


def plan_script(messages: list[BaseMessage]) -> AIMessage:
    task = next(t for t in SAMPLE.values() if t.turns[0].prompt == prompt_of(messages) and t.id in PLANS)
    code, answer = PLANS[task.id]
    _, calls = current_turn(messages)
    if code is not None and calls == 0:
        return AIMessage("", tool_calls=[{"name": "python_image_processing", "args": {"code": code},
                                          "id": "call_0", "type": "tool_call"}])
    return AIMessage(answer or task.turns[0].golden_answer)


@pytest.fixture(scope="module")
def planned_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("regions") / "run"
    return evaluate(tasks=[SAMPLE[i] for i in PLANS], model=ScriptedChatModel(script=plan_script), out=out), out


def test_each_turn_records_its_best_crop_iou_against_the_reference(planned_run):
    evaluation, _ = planned_run
    turns = {r.task_id: r.episode.turns[0] for r in evaluation.results}
    assert {i: t.best_crop_iou for i, t in turns.items()} == pytest.approx(
        {"rs-sports-scoreboard": 1 / 7, "rs-finance-invoice": 1.0, "ht-medical-dosage": 0.0})
    assert [r.box for r in turns["rs-sports-scoreboard"].regions] == [(190, 98, 490, 234)]
    assert [r.box for r in turns["rs-sports-scoreboard"].reference_regions or []] == [
        (40, 30, 340, 166), (1656, 1206, 1798, 1318)]
    assert [r.box for r in turns["rs-finance-invoice"].regions] == [(890, 688, 1242, 742)]
    assert [r.box for r in turns["rs-finance-invoice"].reference_regions or []] == [
        (1090, 165, 1230, 194), (890, 688, 1242, 742), (370, 1043, 701, 1091)]
    assert turns["ht-medical-dosage"].regions == [] and len(turns["ht-medical-dosage"].reference_regions or []) == 3
    passed = {r.task_id: r.grade.by_turn[0].passed for r in evaluation.results}
    assert passed == {"rs-sports-scoreboard": False, "rs-finance-invoice": True, "ht-medical-dosage": True}


def test_summary_region_iou_equals_the_hand_computation(planned_run):
    evaluation, out = planned_run
    # three measured turns; only the invoice's looked (1.0 >= 0.5; 1/7 and 0.0 did not): share 1/3.
    # Looked: the invoice, passed (1/1). Not looked: scoreboard failed, dosage passed (1/2).
    expected = {"turns": 3, "share_iou_ge_0_5": round(1 / 3, 6), "pass_rate_when_looked": 1.0,
                "pass_rate_when_not": 0.5, "not_located": 0, "by_category": {
                    "hybrid_tool": {"turns": 1, "share_iou_ge_0_5": 0.0, "pass_rate_when_looked": None,
                                    "pass_rate_when_not": 1.0, "not_located": 0},
                    "region_switch": {"turns": 2, "share_iou_ge_0_5": 0.5, "pass_rate_when_looked": 1.0,
                                      "pass_rate_when_not": 0.0, "not_located": 0}}}
    assert json.loads((Path(out) / "summary.json").read_text())["region_iou"] == expected
    assert read_meta(out).summary.region_iou.model_dump() == expected
    assert evaluation.region_iou.by_category["region_switch"].share_iou_ge_0_5 == 0.5


def test_zoom_views_count_by_their_boxes(tmp_path):
    task = SAMPLE["rs-sports-scoreboard"]
    # zoom crops (int(0 * 1800), int(0 * 1350), int(0.25 * 1800), int(0.125 * 1350)) = (0, 0, 450, 168);
    # the reference scoreboard (40, 30, 340, 166) lies inside it: IoU 300*136 / (450*168) = 40800 / 75600
    proposal = json.dumps({"regions": [{"source": "image_0.png", "box": [0, 0, 0.25, 0.125], "confidence": 0.9}]})
    model = ScriptedChatModel(replies=[AIMessage(proposal), AIMessage('{"regions": []}'),
                                       AIMessage(task.turns[0].golden_answer)])
    evaluation = evaluate("zoom", tasks=[task], model=model, out=tmp_path / "run")
    turn = evaluation.results[0].episode.turns[0]
    assert turn.tool_calls == [] and [r.box for r in turn.regions] == [(0, 0, 450, 168)]
    assert turn.best_crop_iou == pytest.approx(40800 / 75600)
    assert evaluation.region_iou.share_iou_ge_0_5 == 1.0 and evaluation.region_iou.pass_rate_when_looked == 1.0


def test_a_sandbox_without_region_tracking_leaves_turns_unmeasured(tmp_path):
    # any kind but "local" (here the local class named as your own backend): no reference sandbox is
    # started, and the turn says "not measured" (None), not "looked nowhere" (0.0)
    task = SAMPLE["rs-finance-invoice"]
    evaluation = evaluate(tasks=[task], model=ScriptedChatModel(script=plan_script), out=tmp_path / "run",
                          sandbox="vtb_agents.sandbox.local:LocalSandbox")
    turn = evaluation.results[0].episode.turns[0]
    assert (turn.reference_regions, turn.best_crop_iou) == (None, None)
    assert evaluation.region_iou.turns == 0 and evaluation.region_iou.share_iou_ge_0_5 is None


def test_copies_finishing_together_run_the_reference_once_and_a_failed_run_passes_to_a_waiter():
    # the first wave of a run of copies asks at once: one sandbox runs the reference, the others wait
    # for it; the first opening fails here (after the others are waiting), so one waiter runs it itself
    task = SAMPLE["rs-sports-scoreboard"]
    cache, opened, lock = ReferenceRegionCache(), [], threading.Lock()

    @contextmanager
    def counting_sandbox():
        with lock:
            opened.append(len(opened))
            first = len(opened) == 1
        if first:
            time.sleep(0.5)
            raise SandboxError("the first sandbox does not start")
        with open_sandbox("local") as sandbox:
            yield sandbox

    start = threading.Barrier(6)

    def ask(_: int) -> object:
        start.wait()
        try:
            return cache.get(task, "local", counting_sandbox, 60.0)
        except SandboxError as exc:
            return str(exc)

    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(ask, range(6)))
    assert len(opened) == 2
    assert answers.count("the first sandbox does not start") == 1
    regions = [a for a in answers if not isinstance(a, str)]
    assert len(regions) == 5 and all(r == regions[0] for r in regions)
    assert [r.box for r in regions[0][0]] == [(40, 30, 340, 166), (1656, 1206, 1798, 1318)]  # see PLANS
