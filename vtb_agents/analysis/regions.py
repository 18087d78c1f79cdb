"""Looked at the right place: IoU of the model's crops with the reference's, per turn and per run.

An addition to the paper's metrics (docs/concepts/region-iou.md). Per turn whose reference
trajectory crops a task image, ``best_crop_iou`` is the best intersection over union of any crop
shown to the model with any reference crop of the same image (0.0 when the model cropped nothing;
None when the reference crops nothing). Boxes are in the original image's pixels, right and bottom
exclusive, so a box's area is ``(x1 - x0) * (y1 - y0)``. Over a run, ``region_iou`` gives how many
turns were measured, the share that "looked" (``best_crop_iou >= 0.5``, the usual detection
threshold), and the turn pass rate of the turns that looked and of those that did not. The pass is
the turn's own (``TurnGrade.passed``: every critical rubric of that turn met), since VTB grades each
turn's rubrics; turns whose pass is undecided are left out of the pass rates.
"""

from __future__ import annotations

from collections import defaultdict
from statistics import fmean
from typing import Any, Sequence

from vtb_agents.results import Episode, ImageRegion, TaskResult

LOOKED_IOU = 0.5
"""A turn "looked at the right place" when its best crop IoU is at least this."""

Box = tuple[float, float, float, float]


def box_iou(a: Box, b: Box) -> float:
    """Intersection over union of two boxes ``(x0, y0, x1, y1)``; 0.0 when they do not overlap.

    >>> box_iou((0, 0, 10, 10), (5, 0, 15, 10))
    0.3333333333333333
    """
    inter = max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def best_crop_iou(shown: Sequence[ImageRegion], reference: Sequence[ImageRegion] | None) -> float | None:
    """The best IoU of any ``shown`` crop with any ``reference`` crop of the same image: None when
    the reference crops nothing (or was not measured), 0.0 when nothing shown matches its images."""
    if not reference:
        return None
    return max((box_iou(s.box, r.box) for s in shown for r in reference if s.image == r.image), default=0.0)


def score_regions(episode: Episode, reference: Sequence[Sequence[ImageRegion]]) -> None:
    """Record each turn's reference crops and ``best_crop_iou`` (``reference[t]``: turn t's crops). A
    turn where nothing shown matches (0.0) but some of the model's images could not be located
    (``not_located``) is unmeasured (None, "not located"), not scored 0.0: those images may be crops."""
    for turn in episode.turns:
        if turn.index < len(reference):
            turn.reference_regions = list(reference[turn.index])
            best = best_crop_iou(turn.regions, turn.reference_regions)
            turn.best_crop_iou = None if best == 0.0 and turn.not_located else best


def _rate(values: list[float]) -> float | None:
    return round(fmean(values), 6) if values else None


def _block(turns: list[tuple[float, bool | None]]) -> dict[str, Any]:
    """The four figures over ``(best_crop_iou, turn passed)`` pairs."""
    looked = [passed for iou, passed in turns if iou >= LOOKED_IOU]
    not_looked = [passed for iou, passed in turns if iou < LOOKED_IOU]
    return {
        "turns": len(turns),
        "share_iou_ge_0_5": _rate([1.0 if iou >= LOOKED_IOU else 0.0 for iou, _ in turns]),
        "pass_rate_when_looked": _rate([1.0 if p else 0.0 for p in looked if p is not None]),
        "pass_rate_when_not": _rate([1.0 if p else 0.0 for p in not_looked if p is not None]),
    }


def region_iou(results: list[TaskResult]) -> dict[str, Any]:
    """``summary.json``'s ``region_iou``: the four figures over every measured turn, how many turns
    were left unmeasured because the model's images could not be located (``not_located``), and
    ``by_category`` (docs/concepts/region-iou.md)."""
    everything: list[tuple[float, bool | None]] = []
    by_category: dict[str, list[tuple[float, bool | None]]] = defaultdict(list)
    unlocated: dict[str, int] = defaultdict(int)
    for result in results:
        passed = {g.turn: g.passed for g in result.grade.by_turn} if result.grade.graded else {}
        for turn in result.episode.turns:
            if turn.best_crop_iou is not None:
                pair = (turn.best_crop_iou, passed.get(turn.index))
                everything.append(pair)
                by_category[result.category].append(pair)
            elif turn.unlocated:
                unlocated[result.category] += 1
    names = sorted(set(by_category) | set(unlocated))
    return {**_block(everything), "not_located": sum(unlocated.values()),
            "by_category": {name: {**_block(by_category[name]), "not_located": unlocated[name]} for name in names}}
