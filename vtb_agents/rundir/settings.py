"""The settings of a recorded run that its readers show or reuse, from ``run.json``'s config.

The one place a reader reaches into the recorded config: reports, ``vtb compare``, ``vtb grade``
and the analyses use :class:`RunSettings` attributes, named and nested as ``RunConfig``'s
(``model``, ``judge``, ``episode.max_tool_rounds``, ``strategy_spec``), so that the recorded form
can change here alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from vtb_agents.defaults import strategy_name
from vtb_agents.rundir.records import RunRecord


@dataclass(frozen=True)
class RecordedEpisode:
    """The episode settings of a recorded run that change its results or that its report shows."""

    max_tool_rounds: int
    prompt_level: str
    history: str
    max_image_side: int
    code_timeout_s: float
    tags: tuple[str, ...]


@dataclass(frozen=True)
class RunSettings:
    """What a recorded run was: model, strategy, judge, task source, critical rule, sandbox, ablations
    and episode settings."""

    model: str
    strategy: str
    judge: str
    tasks: str
    critical_rule: str
    sandbox: str
    no_tools: bool
    no_vision_tool: bool
    episode: RecordedEpisode

    @property
    def strategy_spec(self) -> str:
        """The strategy that answered the run's turns (:func:`~vtb_agents.defaults.strategy_name`)."""
        return strategy_name(self.model, self.strategy)


def run_settings(record: RunRecord) -> RunSettings:
    """The settings ``record`` (``run.json``) holds; a KeyError names a setting it lacks."""
    config, episode = record.config, record.config["episode"]
    return RunSettings(
        model=config["model"], strategy=config["strategy"], judge=config["judge"], tasks=config["tasks"],
        critical_rule=config["critical_rule"], sandbox=config["sandbox"], no_tools=config["no_tools"],
        no_vision_tool=config["no_vision_tool"],
        episode=RecordedEpisode(max_tool_rounds=episode["max_tool_rounds"], prompt_level=episode["prompt_level"],
                                history=episode["history"], max_image_side=episode["max_image_side"],
                                code_timeout_s=episode["code_timeout_s"], tags=tuple(episode["tags"])))


def with_grading(record: RunRecord, judge: str, critical_rule: str) -> RunRecord:
    """``record`` with another judge spec and critical rule (``vtb grade`` records the ones it used)."""
    return record.model_copy(update={"config": {**record.config, "judge": judge, "critical_rule": critical_rule}})
