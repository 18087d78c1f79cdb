"""A strategy step's own artefacts into the task's transcript: plans, critiques, zoom boxes, views.

A step dispatches them as a LangChain custom event (:data:`~vtb_agents.transcript.STEP_EVENT`)
with the run's config; the episode driver's recorder, one of the run's callbacks, puts them in
order among the model and tool calls (:mod:`vtb_agents.episodes.recorder`). Without callbacks
(a turn graph run on its own) nothing is recorded.
"""

from __future__ import annotations

from typing import Any, Sequence

from langchain_core.callbacks import dispatch_custom_event
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ensure_config

from vtb_agents.results import SavedImage
from vtb_agents.transcript import STEP_EVENT, StepEvent


def record_step(config: RunnableConfig | None, step: str, *, text: str | None = None,
                data: dict[str, Any] | None = None, views: Sequence[dict[str, Any]] = (),
                image_op: str | None = None) -> None:
    """Record step ``step``'s artefacts: ``text`` (a plan, a critique), ``data`` (boxes, marks) and
    ``views``, the images it made (``{"name", "ref", "size"}``, stored artifacts) by ``image_op``."""
    config = ensure_config(config)
    if not config.get("callbacks"):
        return  # no run to record into
    images = [SavedImage(name=v["name"], ref=v["ref"], size=v.get("size")) for v in views]
    event = StepEvent(step=step, text=text, data=data or {}, images=images, image_op=image_op if images else None)
    dispatch_custom_event(STEP_EVENT, event, config=config)
