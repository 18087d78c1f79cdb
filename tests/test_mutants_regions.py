"""The region metric by hand at its boundaries (docs/concepts/region-iou.md): IoU of boxes that overlap
in one axis only, of boxes under one pixel, a best IoU of exactly 0.5, a turn past the reference's
turns, an unlocated turn, turns whose pass is undecided and an ungraded task with a measured turn.
Part of ``make mutation`` (docs/development.md): each case tells a plausible slip from the code."""

from __future__ import annotations

import pytest

from support.result_lines import result_line
from vtb_agents.analysis.regions import best_crop_iou, box_iou, region_iou, score_regions
from vtb_agents.results import Episode, ImageRegion, TurnRecord


def region(box: tuple[float, float, float, float], image: str = "image_0.png") -> ImageRegion:
    return ImageRegion(image=image, box=box, image_size=(100, 100))


def turn(index: int, iou: float | None = None, *, regions: list[ImageRegion] | None = None,
         not_located: list[str] | None = None, reference: list[ImageRegion] | None = None) -> TurnRecord:
    return TurnRecord(index=index, answer="a", status="answered", best_crop_iou=iou, regions=regions or [],
                      not_located=not_located or [], reference_regions=reference)


def test_iou_of_boxes_of_different_sizes_by_hand():
    # a: x 1..5, y 2..8 (24 px); b: x 3..10, y 0..4 (28 px); overlap x 3..5, y 2..4 = 4 px: 4 / (24 + 28 - 4)
    assert box_iou((1, 2, 5, 8), (3, 0, 10, 4)) == pytest.approx(1 / 12)
    assert box_iou((3, 0, 10, 4), (1, 2, 5, 8)) == pytest.approx(1 / 12)
    # apart in x only (x overlap -10, y overlap 10) and in both (-10 x -10 would be +100): no pixel shared
    assert box_iou((0, 0, 10, 10), (20, 0, 30, 10)) == 0.0
    assert box_iou((0, 0, 10, 10), (20, 20, 30, 30)) == 0.0
    assert box_iou((0, 0, 10, 10), (0, 20, 10, 30)) == 0.0


def test_iou_of_boxes_under_one_pixel_and_of_empty_boxes():
    # boxes are kept to 1/1000 pixel: two equal half-pixel boxes (union 0.25 px) overlap wholly
    assert box_iou((0, 0, 0.5, 0.5), (0, 0, 0.5, 0.5)) == 1.0
    assert box_iou((0, 0, 0.5, 0.5), (0.25, 0, 0.75, 0.5)) == pytest.approx(0.125 / 0.375)
    assert box_iou((0, 0, 0, 0), (0, 0, 0, 0)) == 0.0  # no area at all: no overlap, not a division by zero


def test_best_crop_iou_is_the_best_pair_and_zero_without_a_shown_crop_of_that_image():
    reference = [region((0, 0, 10, 10)), region((50, 50, 60, 60))]
    shown = [region((0, 0, 10, 20)), region((50, 50, 60, 60), image="image_1.png"), region((50, 50, 60, 65))]
    # (0,0,10,20) vs the first: 100 / 200 = 0.5; (50,50,60,65) vs the second: 100 / 150; an exact match
    # of another image counts not
    assert best_crop_iou(shown, reference) == pytest.approx(2 / 3)
    assert best_crop_iou(shown[:2], reference) == 0.5
    assert best_crop_iou([region((50, 50, 60, 60), image="image_1.png")], reference) == 0.0
    assert best_crop_iou([], reference) == 0.0
    assert best_crop_iou(shown, []) is None and best_crop_iou(shown, None) is None


def test_score_regions_records_each_referenced_turn_and_leaves_an_unlocated_miss_unmeasured():
    reference = [[region((0, 0, 10, 10))], [region((0, 0, 10, 10))], []]
    turns = [turn(0, regions=[region((0, 0, 10, 20))]),  # IoU 0.5
             turn(1, not_located=["crop.png"]),  # nothing shown matches, an image not located: unmeasured
             turn(2, regions=[region((0, 0, 10, 10))]),  # the reference crops nothing this turn: None
             turn(3, regions=[region((0, 0, 10, 10))])]  # past the reference's turns: not scored at all
    episode = Episode(task_id="t", model="m", turns=turns)
    score_regions(episode, reference)
    assert [t.best_crop_iou for t in episode.turns] == [0.5, None, None, None]
    assert [t.reference_regions for t in episode.turns] == [reference[0], reference[1], [], None]
    assert [t.unlocated for t in episode.turns] == [False, True, False, False]


def test_a_turn_that_matched_is_scored_though_another_image_was_not_located():
    reference = [[region((0, 0, 10, 10))], [region((0, 0, 10, 10))]]
    episode = Episode(task_id="t", model="m", turns=[
        turn(0, regions=[region((0, 0, 10, 20))], not_located=["other.png"]),  # 0.5 found: measured
        turn(1, regions=[region((20, 20, 30, 30))])])  # 0.0 with every image located: a measured miss
    score_regions(episode, reference)
    assert [t.best_crop_iou for t in episode.turns] == [0.5, 0.0]


def test_region_iou_counts_an_iou_of_exactly_half_as_looked_and_leaves_undecided_passes_out():
    results = [
        # Chart: turn 0 looked (exactly 0.5) and passed, turn 1 did not look (0.499999) and failed
        result_line("a", score=1.0, passed=True, turns=[turn(0, 0.5), turn(1, 0.499999)],
                    by_turn={0: True, 1: False}),
        # Chart: looked, its turn's pass undecided (None): in the share, not in the pass rates
        result_line("b", score=0.5, passed=None, turns=[turn(0, 0.9)], by_turn={0: None}),
        # Map: an ungraded task with a measured turn: in the share, no pass; and an unlocated turn
        result_line("c", category="Map", outcome="provider_error",
                    turns=[turn(0, 0.75), turn(1, None, not_located=["x.png"], reference=[region((0, 0, 1, 1))])],
                    by_turn={0: True}),
        # Other: only two turns not located
        result_line("d", category="Other", score=0.0, passed=False,
                    turns=[turn(0, None, not_located=["y.png"], reference=[region((0, 0, 1, 1))]),
                           turn(1, None, not_located=["z.png"], reference=[region((0, 0, 1, 1))])], by_turn={0: False}),
    ]
    figures = region_iou(results)
    # measured turns: 0.5 (pass), 0.499999 (fail), 0.9 (undecided), 0.75 (ungraded): 3 of 4 looked
    assert figures["turns"] == 4 and figures["share_iou_ge_0_5"] == 0.75
    assert figures["pass_rate_when_looked"] == 1.0  # of the looked turns only turn a/0 has a pass: passed
    assert figures["pass_rate_when_not"] == 0.0  # a/1 failed
    assert figures["not_located"] == 3
    assert list(figures["by_category"]) == ["Chart Q&A", "Map", "Other"]
    assert figures["by_category"]["Chart Q&A"] == {"turns": 3, "share_iou_ge_0_5": 0.666667,
                                                   "pass_rate_when_looked": 1.0, "pass_rate_when_not": 0.0,
                                                   "not_located": 0}
    assert figures["by_category"]["Map"] == {"turns": 1, "share_iou_ge_0_5": 1.0, "pass_rate_when_looked": None,
                                             "pass_rate_when_not": None, "not_located": 1}
    assert figures["by_category"]["Other"] == {"turns": 0, "share_iou_ge_0_5": None,
                                               "pass_rate_when_looked": None, "pass_rate_when_not": None,
                                               "not_located": 2}


def test_pass_rates_are_shares_of_passed_turns_rounded_to_six_places():
    results = [result_line("a", score=0.5, passed=False, turns=[turn(0, 0.6), turn(1, 0.7), turn(2, 0.8), turn(3, 0.1)],
                           by_turn={0: True, 1: False, 2: True, 3: True})]
    figures = region_iou(results)
    assert figures["pass_rate_when_looked"] == 0.666667  # 2 of 3
    assert figures["pass_rate_when_not"] == 1.0
    assert figures["share_iou_ge_0_5"] == 0.75
    assert region_iou([]) == {"turns": 0, "share_iou_ge_0_5": None, "pass_rate_when_looked": None,
                              "pass_rate_when_not": None, "not_located": 0, "by_category": {}}
