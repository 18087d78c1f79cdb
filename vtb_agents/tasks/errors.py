"""Errors and problems found in task data, each naming the task, turn, field and file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Problem:
    """One finding of validation. ``turn`` is 1-based (as users count turns) or ``None``."""

    severity: Literal["error", "warning"]
    task_id: str
    field: str
    message: str
    turn: int | None = None
    source: str | None = None

    def __str__(self) -> str:
        where = f"task {self.task_id!r}"
        if self.turn is not None:
            where += f", turn {self.turn}"
        where += f", field {self.field!r}"
        text = f"{self.severity}: {where}: {self.message}"
        return f"{text} ({self.source})" if self.source else text


class TaskLoadError(ValueError):
    """Task data that cannot be turned into a :class:`~vtb_agents.tasks.model.Task`."""

    def __init__(self, task_id: str, field: str, message: str, *, turn: int | None = None,
                 source: str | None = None) -> None:
        self.problem = Problem("error", task_id, field, message, turn=turn, source=source)
        super().__init__(str(self.problem))

    @classmethod
    def from_problem(cls, problem: Problem) -> TaskLoadError:
        """The error for a validation ``problem`` (e.g. a task that import refuses to write)."""
        return cls(problem.task_id, problem.field, problem.message, turn=problem.turn, source=problem.source)
