"""``zoom``: hierarchical zoom search, then the tool loop.

The model proposes regions of the turn's images that may hold the answer, each with a confidence;
the strategy crops and upscales them in the sandbox and shows the zoomed views; where the model's
confidence in a view stays low it proposes sub-regions of that view, searched one level deeper,
within a bound on depth and on the number of views. The tool loop then answers with the views in
the conversation. Each request for regions is a user message kept in the conversation (the views
and then the request to refine them), so that every request extends the one before
(docs/concepts/prompt-caching.md). ZoomEye (Shen et al., 2024, arXiv 2411.16044: tree search over zoomed views
guided by the model's confidence) and ViCrop (Zhang et al., 2025, arXiv 2502.17422: training-free
cropping of the regions a model attends to), with the model itself as the region proposer.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field, ValidationError

from vtb_agents.models.replay import current_turn
from vtb_agents.models.retry import model_retry_policy
from vtb_agents.strategies.base import EpisodeContext, Strategy, TurnGraph, TurnState
from vtb_agents.strategies.loop import call_model
from vtb_agents.strategies.react import build_step_then_loop
from vtb_agents.strategies.steps import record_step
from vtb_agents.strategies.views import make_views, turn_images, views_message

MAX_DEPTH = 2
"""Levels of zoom below the full image."""
MAX_VIEWS = 8
"""Zoomed views made in one turn at most."""
CONFIDENT = 0.7
"""A view with at least this confidence is not searched deeper."""
ZOOM_SIDE = 1024
"""Longer side of a zoomed view (crops are upscaled to it)."""

PROPOSE_INSTRUCTION = (
    "Do not answer yet and do not call tools. Propose up to 4 regions that may hold what the question "
    "needs, as JSON only: {\"regions\": [{\"source\": \"<file name>\", \"box\": [x0, y0, x1, y1], "
    "\"confidence\": 0.0-1.0}]} where box is in fractions (0 to 1) of that file's width and height, and "
    "confidence is how sure you are that the region holds the answer. Sources are the images: {sources}."
)
REFINE_INSTRUCTION = (
    "Do not answer yet and do not call tools. For the zoomed views just shown, reply with JSON only: "
    "{\"regions\": [...]} as before, proposing sub-regions (boxes in fractions of a view, source = the "
    "view's file name) only inside views where you are not yet confident; {\"regions\": []} when the "
    "views show enough to answer."
)


class Region(BaseModel):
    """A proposed region: a box in fractions of ``source`` (an image or a zoomed view)."""

    source: str
    box: tuple[float, float, float, float]
    confidence: float = 0.0


class Proposal(BaseModel):
    regions: list[Region] = Field(default_factory=list)


@dataclass(frozen=True)
class View:
    """A zoomed view: its file, the image it was cut from, its box there in fractions, its depth."""

    name: str
    image: str
    box: tuple[float, float, float, float]
    depth: int
    confidence: float = 0.0


def parse_regions(text: str) -> list[Region]:
    """The regions in a model reply (the first JSON object in it); none if it holds no valid proposal.

    >>> parse_regions('Here: {"regions": [{"source": "image_0.png", "box": [0, 0, 0.5, 0.5]}]}')[0].box
    (0.0, 0.0, 0.5, 0.5)
    >>> parse_regions("no idea")
    []
    """
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if not match:
        return []
    try:
        return Proposal.model_validate(json.loads(match.group(0))).regions
    except (ValueError, ValidationError):
        return []


def absolute_box(parent: tuple[float, float, float, float], box: tuple[float, float, float, float]
                 ) -> tuple[float, float, float, float]:
    """``box`` (fractions of a view) in fractions of the original image, given the view's ``parent`` box.

    >>> absolute_box((0.5, 0.5, 1.0, 1.0), (0.0, 0.0, 0.5, 0.5))
    (0.5, 0.5, 0.75, 0.75)
    """
    x0, y0, x1, y1 = (min(1.0, max(0.0, v)) for v in box)
    px0, py0, px1, py1 = parent
    w, h = px1 - px0, py1 - py0
    return (px0 + x0 * w, py0 + y0 * h, px0 + max(x0, x1) * w, py0 + max(y0, y1) * h)


def view_name(turn: int, index: int) -> str:
    """The file name of zoomed view ``index`` of ``turn`` (1-based): unique in the episode, so that a
    later turn never shows a different image under an earlier view's name (the sandbox and the
    conversation keep every turn's views)."""
    return f"zoom_t{turn}_{index}.png"


def plan_views(regions: list[Region], known: dict[str, View], images: list[str], made: int, turn: int
               ) -> list[View]:
    """The next views of ``turn`` (1-based) to make: regions of the images, or of views the model was
    not confident in, within the depth and view bounds."""
    views: list[View] = []
    for region in regions:
        parent = known.get(region.source) or (View(region.source, region.source, (0.0, 0.0, 1.0, 1.0), 0)
                                              if region.source in images else None)
        if parent is None or parent.depth >= MAX_DEPTH or made + len(views) >= MAX_VIEWS:
            continue
        if parent.depth > 0 and parent.confidence >= CONFIDENT:
            continue  # confident views are not searched deeper
        box = absolute_box(parent.box, region.box)
        if box[2] - box[0] < 0.01 or box[3] - box[1] < 0.01:
            continue
        views.append(View(view_name(turn, made + len(views)), parent.image, box, parent.depth + 1, region.confidence))
    return views


CROP_CODE = """
from PIL import Image
for _name, _image, _box in {jobs!r}:
    with Image.open(_image) as _im:
        _w, _h = _im.size
        _crop = _im.crop((int(_box[0] * _w), int(_box[1] * _h), max(int(_box[0] * _w) + 1, int(_box[2] * _w)),
                          max(int(_box[1] * _h) + 1, int(_box[3] * _h))))
        _f = {side} / max(_crop.size)
        if _f > 1:
            _crop = _crop.resize((round(_crop.width * _f), round(_crop.height * _f)), Image.LANCZOS)
        _crop.convert("RGB").save(_name)
"""


def zoom_search(state: TurnState, runtime: Runtime[EpisodeContext], config: RunnableConfig) -> dict[str, Any]:
    """Propose, zoom, and refine low-confidence views until confident or out of depth or views."""
    ctx = runtime.context
    images = turn_images(state["messages"])
    if not images:
        return {}
    added: list[AnyMessage] = []
    turn = current_turn(state["messages"])[0] + 1
    known: dict[str, View] = {}
    request = HumanMessage(content=PROPOSE_INSTRUCTION.replace("{sources}", ", ".join(images)))
    step = "zoom.propose"
    while True:
        reply = call_model(ctx, [*state["messages"], *added, request], tools=False, config=config, step=step)
        proposal = AIMessage(content=reply.text)
        regions = parse_regions(reply.text)
        record_step(config, step, text=reply.text, data={"regions": [r.model_dump(mode="json") for r in regions]})
        views = plan_views(regions, known, images, len(known), turn)
        if not views:
            return {"messages": [*added, request, proposal]}
        made = make_views(ctx, CROP_CODE.format(jobs=[(v.name, v.image, v.box) for v in views], side=ZOOM_SIDE))
        known.update({v.name: v for v in views})
        captions = "\n".join(f"{v.name}: {v.image} box {tuple(round(x, 3) for x in v.box)} (depth {v.depth})"
                             for v in views)
        record_step(config, "zoom.views", text=captions, views=made, image_op="crop",
                    data={"views": [{"name": v.name, "image": v.image, "box": list(v.box), "depth": v.depth,
                                     "confidence": v.confidence} for v in views]})
        step = "zoom.refine"
        shown = views_message("Zoomed views of the proposed regions (boxes in fractions of the image):\n" + captions,
                              made)
        added += [request, proposal]
        request = HumanMessage(content=[*shown.content, {"type": "text", "text": REFINE_INSTRUCTION}])


def build_zoom_graph() -> TurnGraph:
    """zoom search -> tool loop."""
    return build_step_then_loop("zoom", zoom_search, name="zoom", retry_policy=model_retry_policy())


zoom = Strategy(name="zoom", build=build_zoom_graph,
                summary="propose regions, zoom into them in the sandbox and search deeper where unsure, then answer",
                source="ZoomEye (Shen et al., 2024, arXiv 2411.16044); ViCrop (Zhang et al., 2025, arXiv 2502.17422)")
