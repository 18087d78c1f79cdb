"""The report's charts: hand-written SVG, parsed back as XML to check what they show."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest

from vtb_agents.report.plots import apr_by_category_svg, bar_svg, image_ops_svg, nice_ticks, scatter_svg
from vtb_agents.rundir.records import RunSummary

NS = {"svg": "http://www.w3.org/2000/svg"}


def parse(svg: str | None) -> ET.Element:
    assert svg is not None and svg.startswith("<svg")
    return ET.fromstring(svg)  # well-formed XML, or this raises


def texts(root: ET.Element, cls: str | None = None) -> list[str]:
    return [t.text or "" for t in root.iterfind(".//svg:text", NS) if cls is None or t.get("class") == cls]


def bars(root: ET.Element) -> list[ET.Element]:
    return root.findall(".//svg:rect[@class='bar']", NS)


def test_bar_heights_are_proportional_to_the_values_with_percent_labels_and_notes():
    root = parse(bar_svg(["a", "b", "c"], [0.25, 0.5, 1.0], title="APR by thing", ylabel="APR (%)", percent=True,
                         notes=["n=4", "n=2", "n=1"]))
    rects = bars(root)
    heights = [float(r.get("height", "nan")) for r in rects]
    assert len(rects) == 3
    assert heights[1:] == [pytest.approx(2 * heights[0], abs=0.02), pytest.approx(4 * heights[0], abs=0.02)]
    bottoms = {round(float(r.get("y", "nan")) + float(r.get("height", "nan")), 3) for r in rects}
    assert len(bottoms) == 1  # every bar stands on the x axis
    xs = [float(r.get("x", "nan")) for r in rects]
    assert xs == sorted(xs)  # in the order given
    assert texts(root, "value") == ["25%", "n=4", "50%", "n=2", "100%", "n=1"]
    assert texts(root, "xtick") == ["a", "b", "c"]
    labels = texts(root)
    assert "APR by thing" in labels and "APR (%)" in labels
    assert [t for t in ("0", "20", "40", "60", "80", "100") if t in labels] == ["0", "20", "40", "60", "80", "100"]
    assert len(root.findall(".//svg:line[@class='grid']", NS)) == 6  # one gridline per y tick
    assert root.find("svg:title", NS) is not None and root.find("svg:title", NS).text == "APR by thing"


def test_counts_get_round_ticks_above_the_largest_bar():
    root = parse(bar_svg(["x", "y"], [3, 12], title="counts", ylabel="occurrences"))
    assert texts(root, "value") == ["3", "12"]
    heights = [float(r.get("height", "nan")) for r in bars(root)]
    assert heights[1] == pytest.approx(4 * heights[0], abs=0.02)
    ticks = [float(t) for t in texts(root) if t.replace(".", "").isdigit() and t not in ("3", "12")]
    assert ticks[0] == 0 and max(ticks) >= 12
    assert nice_ticks(12) == [0, 2.5, 5, 7.5, 10, 12.5] and nice_ticks(0) == [0, 0.2, 0.4, 0.6, 0.8, 1.0]


def test_many_bars_get_rotated_labels_and_few_do_not():
    few = parse(bar_svg(list("abcd"), [1, 2, 3, 4], title="t", ylabel="n"))
    many = parse(bar_svg(list("abcde"), [1, 2, 3, 4, 5], title="t", ylabel="n"))
    assert all("transform" not in t.attrib for t in few.iterfind(".//svg:text[@class='xtick']", NS))
    assert all("rotate(" in t.get("transform", "") for t in many.iterfind(".//svg:text[@class='xtick']", NS))


def test_labels_are_escaped():
    evil = "<script>alert(1)</script>"
    svg = bar_svg([evil, "b&c"], [1, 2], title=f"title {evil}", ylabel="y")
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    root = parse(svg)
    assert texts(root, "xtick") == [evil, "b&c"]  # the text itself survives, as text
    assert root.find(".//svg:script", NS) is None
    scatter = scatter_svg([(evil, 0.5, 0.5)], xlabel="x", ylabel="y", title="t")
    assert scatter is not None and "<script>" not in scatter and texts(parse(scatter), "label") == [evil]


def test_scatter_merges_runs_at_one_point_and_starts_axes_at_zero():
    root = parse(scatter_svg([("run-a", 0.5, 0.4), ("run-b", 0.5, 0.4), ("run-c", 1.0, 0.8), ("no-apr", 0.3, None)],
                             xlabel="proactivity (%)", ylabel="APR (%)", title="APR against proactivity",
                             x_percent=True))
    points = root.findall(".//svg:circle[@class='point']", NS)
    assert sorted((p.get("data-x"), p.get("data-y")) for p in points) == [("100", "80"), ("50", "40")]
    assert sorted(texts(root, "label")) == ["run-a, run-b", "run-c"]
    a, c = sorted(points, key=lambda p: float(p.get("data-x", "nan")))
    ax, ay, cx, cy = (float(v) for v in (a.get("cx"), a.get("cy"), c.get("cx"), c.get("cy")))
    assert cx > ax and cy < ay  # further right and higher up
    axis = root.find(".//svg:path", NS)
    assert axis is not None
    corner = re.fullmatch(r"M([\d.]+) [\d.]+V([\d.]+)H[\d.]+", axis.get("d", ""))  # y axis down, then x axis
    assert corner is not None
    left, bottom = float(corner[1]), float(corner[2])  # where both axes are zero
    assert cx - left == pytest.approx(2 * (ax - left), abs=0.03)
    assert bottom - cy == pytest.approx(2 * (bottom - ay), abs=0.03)
    assert "0" in texts(root) and "proactivity (%)" in texts(root)


def test_scatter_volume_axis_from_zero_and_none_without_points():
    root = parse(scatter_svg([("zero", 0.0, 0.1), ("busy", 2.0, 0.5)], xlabel="volume", ylabel="APR", title="t"))
    x_ticks = [float(t) for t in texts(root) if t.replace(".", "").isdigit()]
    assert 0 in x_ticks and 2 in x_ticks
    assert scatter_svg([("a", None, 0.5), ("b", 0.5, None)], xlabel="x", ylabel="y", title="t") is None


def summary_of(**fields: object) -> RunSummary:
    return RunSummary.model_validate({"tasks": 2, "graded": 2, "apr": None, "ars": None, **fields})


def test_summary_charts():
    summary = summary_of(by_category={"follow_up": {"n": 2, "apr": 0.5, "ars": 0.5, "graded": 2},
                                      "temporal": {"n": 1, "apr": None, "ars": None, "graded": 0}},
                         tool_metrics={"image_ops": {"cropping": 4, "resizing": 0, "my_op": 1}})
    apr = parse(apr_by_category_svg(summary))
    assert texts(apr, "xtick") == ["follow_up"] and texts(apr, "value") == ["50%", "n=2"]
    ops = parse(image_ops_svg(summary))
    assert texts(ops, "xtick") == ["cropping", "resizing", "my_op"] and texts(ops, "value") == ["4", "0", "1"]
    assert apr_by_category_svg(summary_of(by_category={})) is None
    assert image_ops_svg(summary_of(tool_metrics={"image_ops": {"cropping": 0}})) is None
