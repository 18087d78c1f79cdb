"""Changing a recorded run's settings: ``vtb grade`` records the judge and critical rule it graded with.

A recorded run's settings are its :class:`~vtb_agents.config.RunConfig` (``run.json``'s ``config``,
typed by :class:`~vtb_agents.rundir.records.RunRecord`): readers use its attributes.
"""

from __future__ import annotations

from vtb_agents.config import CriticalRule
from vtb_agents.rundir.records import RunRecord


def with_grading(record: RunRecord, judge: str, critical_rule: CriticalRule) -> RunRecord:
    """``record`` with another judge spec and critical rule (``vtb grade`` records the ones it used)."""
    config = record.config.model_copy(update={"judge": judge, "critical_rule": critical_rule})
    return record.model_copy(update={"config": config})
