"""Where a turn looked, drawn: the task image with the reference's crops and the model's as SVG boxes
over it, each of the model's labelled with its IoU (docs/concepts/region-iou.md), for the task
pages; and the run's region figures (:func:`region_table`) for ``report.html``.

The SVG shares the image's pixel coordinates (``viewBox`` = the image's size) and lies over the image
(``position: absolute``, same box), so a rectangle's ``x``, ``y``, ``width``, ``height`` attributes are
the region's box in the original image's pixels, whatever size the picture is shown at. Reference boxes
are dashed green (``rect.ref``), the model's solid orange (``rect.model``; ``located`` ones, found from
their pixels, dotted). Everything from a task or the model is escaped.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Sequence

from vtb_agents.analysis.regions import LOOKED_IOU, box_iou
from vtb_agents.report.images import ImageLink, ReportImages
from vtb_agents.report.markup import esc, pct, table
from vtb_agents.results import ImageRegion, TurnRecord
from vtb_agents.rundir.records import RegionIoU, RegionScore
from vtb_agents.tasks.model import Task


def iou_text(turn: TurnRecord | None) -> str:
    """A turn's best crop IoU as shown: ``0.14``, ``not located``, ``no reference crop`` or ``not measured``."""
    if turn is not None and turn.best_crop_iou is not None:
        return f"{turn.best_crop_iou:.2f}"
    if turn is not None and turn.unlocated:
        return "not located"
    return "no reference crop" if turn is not None and turn.reference_regions == [] else "not measured"


def region_iou_of(region: ImageRegion, reference: Sequence[ImageRegion]) -> float:
    """The best IoU of one model region with the reference regions of the same image (0.0 when none)."""
    return max((box_iou(region.box, r.box) for r in reference if r.image == region.image), default=0.0)


def _num(value: float) -> str:
    return f"{value:g}"


def _rect(region: ImageRegion, kind: str, label: str) -> str:
    x0, y0, x1, y1 = region.box
    located = " located" if region.located else ""
    return (f'<g class="region {kind}{located}" data-image="{esc(region.image)}" '
            f'data-box="{_num(x0)},{_num(y0)},{_num(x1)},{_num(y1)}">'
            f'<rect class="{kind}" x="{_num(x0)}" y="{_num(y0)}" width="{_num(x1 - x0)}" height="{_num(y1 - y0)}"/>'
            f'<text class="{kind}" x="{_num(x0)}" y="{_num(y1 if kind == "ref" else y0)}" '
            f'dy="{"1em" if kind == "ref" else "-0.3em"}">{esc(label)}</text></g>')


def _overlay(name: str, size: tuple[int, int], link: ImageLink | None, rects: list[str], *, base: str) -> str:
    width, height = size
    font = max(12, round(max(width, height) / 45))
    picture = (f'<img src="{esc(base + link.full)}" alt="{esc(name)}">' if link is not None and link.full
               else f'<div class="missing">{esc(link.problem if link is not None else "task image not available")}'
                    "</div>")
    return (f'<figure class="regions" data-image="{esc(name)}" data-size="{width},{height}">'
            f'<div class="overlay" style="aspect-ratio: {width} / {height}">{picture}'
            f'<svg viewBox="0 0 {width} {height}" preserveAspectRatio="none" style="font-size:{font}px">'
            f'{"".join(rects)}</svg></div><figcaption>{esc(name)} · {width}×{height}</figcaption></figure>')


def regions_html(turn: TurnRecord, task: Task | None, images: ReportImages, *, base: str) -> str:
    """The turn's "where it looked" block: its best crop IoU, and per task image with a region the image
    with the reference's and the model's boxes drawn (empty when the turn has no region and no measure)."""
    reference = turn.reference_regions or []
    if not reference and not turn.regions and not turn.not_located:
        return ""
    value = iou_text(turn)
    looked = "" if turn.best_crop_iou is None else (" · looked" if turn.best_crop_iou >= LOOKED_IOU else
                                                    " · did not look")
    head = (f'<h4>Where it looked <span class="iou" data-iou="{esc(value)}">best crop IoU {esc(value)}{looked}'
            '</span></h4>')
    notes = []
    if turn.not_located:
        notes.append(f"Not located in the task's images (no tracked region, no pixel match): "
                     f"{', '.join(turn.not_located)}.")
    if turn.reference_regions is None:
        notes.append("The reference was not measured for this turn.")
    by_image: dict[str, list[str]] = defaultdict(list)
    sizes: dict[str, tuple[int, int]] = {}
    for region in reference:
        by_image[region.image].append(_rect(region, "ref", "reference"))
        sizes[region.image] = region.image_size
    for region in turn.regions:
        label = f"IoU {region_iou_of(region, reference):.2f}" + (" (located)" if region.located else "")
        by_image[region.image].append(_rect(region, "model", label))
        sizes[region.image] = region.image_size
    figures = []
    for name in sorted(by_image):
        index = int(name.split("_")[1].split(".")[0])
        link = (images.from_task(task.images[index], name) if task is not None and index < len(task.images)
                else None)
        figures.append(_overlay(name, sizes[name], link, by_image[name], base=base))
    legend = ('<p class="note legend"><span class="key ref"></span> reference crop '
              '<span class="key model"></span> the model\'s crop, labelled with its IoU (dotted: located from '
              "its pixels)</p>")
    note = "".join(f'<p class="note">{esc(n)}</p>' for n in notes)
    return f'<div class="where">{head}{legend if figures else ""}{"".join(figures)}{note}</div>'


def _score_cells(block: RegionScore) -> list[str]:
    return [esc(block.turns), pct(block.share_iou_ge_0_5), pct(block.pass_rate_when_looked),
            pct(block.pass_rate_when_not), esc(block.not_located)]


def region_table(regions: RegionIoU) -> str:
    """``report.html``'s region figures: over all measured turns and per category."""
    rows = [["overall", *_score_cells(regions)],
            *([esc(name), *_score_cells(block)] for name, block in regions.by_category.items())]
    return table(["", "turns measured", "share IoU ≥ 0.5", "pass rate when looked", "pass rate when not",
                  "not located"], rows, cls="regions-table",
                 caption="Looked at the right place: best crop IoU against the reference's crops")
