"""``marks``: Set-of-Mark visual prompting with a numbered grid.

Before the model answers, each of the turn's images is overlaid (with OpenCV, in the sandbox) with
a numbered grid of cells; the marked views and a table of each mark's pixel box are shown, so the
model can refer to regions by number and crop them precisely with the tool loop that follows.
Set-of-Mark prompting (Yang et al., 2023, arXiv 2310.11441), with grid marks instead of a
segmentation model (nothing to download; the same marks for every model).
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from vtb_agents.strategies.base import EpisodeContext, Strategy, TurnGraph, TurnState
from vtb_agents.strategies.react import build_step_then_loop
from vtb_agents.strategies.steps import record_step
from vtb_agents.strategies.views import make_views, turn_images, views_message

GRID = 4
"""Cells per side: 16 marks per image, readable at the model's image resolution."""

MARK_CODE = """
import cv2, json
_marks = {{}}
for _name in {names!r}:
    _im = cv2.imread(_name, cv2.IMREAD_COLOR)
    _h, _w = _im.shape[:2]
    _scale = max(_w, _h) / 1000.0
    for _r in range({grid}):
        for _c in range({grid}):
            _k = _r * {grid} + _c + 1
            _box = (_c * _w // {grid}, _r * _h // {grid}, (_c + 1) * _w // {grid}, (_r + 1) * _h // {grid})
            cv2.rectangle(_im, _box[:2], (_box[2] - 1, _box[3] - 1), (0, 0, 255), max(1, int(2 * _scale)))
            _org = (_box[0] + int(6 * _scale) + 2, _box[1] + int(30 * _scale) + 12)
            cv2.putText(_im, str(_k), _org, cv2.FONT_HERSHEY_SIMPLEX, max(0.5, _scale), (255, 255, 255),
                        max(3, int(6 * _scale)), cv2.LINE_AA)
            cv2.putText(_im, str(_k), _org, cv2.FONT_HERSHEY_SIMPLEX, max(0.5, _scale), (0, 0, 255),
                        max(1, int(2 * _scale)), cv2.LINE_AA)
            _marks.setdefault(_name, {{}})[_k] = _box
    cv2.imwrite("marked_" + _name.rsplit(".", 1)[0] + ".png", _im)
print(json.dumps(_marks))
"""


def mark_table(names: list[str], sizes: dict[str, tuple[int, int]], grid: int = GRID) -> str:
    """Each mark's pixel box ``(x0, y0, x1, y1)`` per image, as the model reads it.

    >>> mark_table(["image_0.png"], {"image_0.png": (400, 200)}, grid=2)
    'image_0.png: 1=(0,0,200,100) 2=(200,0,400,100) 3=(0,100,200,200) 4=(200,100,400,200)'
    """
    lines = []
    for name in names:
        w, h = sizes[name]
        cells = [f"{r * grid + c + 1}=({c * w // grid},{r * h // grid},{(c + 1) * w // grid},{(r + 1) * h // grid})"
                 for r in range(grid) for c in range(grid)]
        lines.append(f"{name}: " + " ".join(cells))
    return "\n".join(lines)


def mark_images(state: TurnState, runtime: Runtime[EpisodeContext], config: RunnableConfig) -> dict[str, Any]:
    """Overlay the numbered grid on the turn's images and show the marked views with the mark table."""
    ctx = runtime.context
    names = turn_images(state["messages"])
    if not names:
        return {}
    views = make_views(ctx, MARK_CODE.format(names=names, grid=GRID))
    originals = {name: tuple(view["size"]) for name in names for view in views
                 if view["name"] == "marked_" + name.rsplit(".", 1)[0] + ".png"}
    table = mark_table(list(originals), originals)
    record_step(config, "marks", text=table, views=views, image_op="mark", data={"grid": GRID})
    text = ("Set-of-Mark views: each image overlaid with numbered marks (grid cells). Refer to regions by "
            "their mark numbers, and crop a mark's box from the original image (not the marked view) to read "
            "details. Mark boxes in pixels (x0, y0, x1, y1):\n" + table)
    return {"messages": [views_message(text, views)]}


def build_marks_graph() -> TurnGraph:
    """mark -> tool loop."""
    return build_step_then_loop("mark", mark_images, name="marks")


marks = Strategy(name="marks", build=build_marks_graph,
                 summary="overlay numbered marks (a grid, drawn with OpenCV) on the images before the tool loop",
                 source="Set-of-Mark prompting (Yang et al., 2023, arXiv 2310.11441)")
