"""The settings of a recorded run that its readers show or reuse, from ``run.json``'s config.

The one place a reader reaches into the recorded ``RunConfig``: reports, ``vtb compare``,
``vtb grade`` and the analyses use :class:`RunSettings` attributes, so that the recorded form can
change in one place.
"""

from __future__ import annotations

from dataclasses import dataclass

from vtb_agents.results import strategy_name
from vtb_agents.rundir.records import RunRecord


@dataclass(frozen=True)
class RunSettings:
    """What a run was: its model, strategy (named by :func:`~vtb_agents.results.strategy_name`), judge,
    task source, critical rule, sandbox, ablations and episode settings."""

    model: str
    strategy: str
    judge: str
    tasks: str
    critical_rule: str
    sandbox: str
    no_tools: bool
    no_vision_tool: bool
    prompt_level: str
    history: str
    max_tool_rounds: int
    max_image_side: int
    code_timeout_s: float
    tags: tuple[str, ...]


def run_settings(record: RunRecord) -> RunSettings:
    """The settings ``record`` (``run.json``) holds; a KeyError names a setting it lacks."""
    config = record.config
    episode = config["episode"]
    return RunSettings(model=config["model"], strategy=strategy_name(config["model"], config["strategy"]),
                       judge=config["judge"], tasks=config["tasks"], critical_rule=config["critical_rule"],
                       sandbox=config["sandbox"], no_tools=config["no_tools"],
                       no_vision_tool=config["no_vision_tool"], prompt_level=episode["prompt_level"],
                       history=episode["history"], max_tool_rounds=episode["max_tool_rounds"],
                       max_image_side=episode["max_image_side"], code_timeout_s=episode["code_timeout_s"],
                       tags=tuple(episode["tags"]))


def with_grading(record: RunRecord, judge: str, critical_rule: str) -> RunRecord:
    """``record`` with another judge spec and critical rule (``vtb grade`` records the ones it used)."""
    return record.model_copy(update={"config": {**record.config, "judge": judge, "critical_rule": critical_rule}})
