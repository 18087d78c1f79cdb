"""The one task filter: tasks by category, id and review status, cut to a limit.

``vtb run``'s ``--category``, ``--task-id``, ``--status`` and ``--limit`` (:mod:`vtb_agents.cli.options`)
and the Python API's :func:`vtb_agents.api.load_tasks` select tasks through it, so that a selection
means the same everywhere. A task that failed to load (a :class:`~vtb_agents.tasks.errors.TaskLoadError`)
passes every filter but the id's, so that validation can name it.

Example:
    >>> from vtb_agents.tasks import load_tasks
    >>> chosen = TaskFilter(categories=frozenset({"temporal"}), limit=1).apply(load_tasks("sample"))
    >>> [task.category for task in chosen]
    ['temporal']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence, TypeVar

from vtb_agents.tasks.errors import TaskLoadError
from vtb_agents.tasks.model import Task

__all__ = ["TaskFilter"]

Item = TypeVar("Item", Task, Task | TaskLoadError)


@dataclass(frozen=True)
class TaskFilter:
    """Which tasks to take: any of ``categories``, of ``task_ids`` and of review ``statuses`` (an empty
    set takes all), then the first ``limit`` of them (None or 0: all)."""

    categories: frozenset[str] = frozenset()
    task_ids: frozenset[str] = frozenset()
    statuses: frozenset[str] = frozenset()
    limit: int | None = None

    def keeps(self, item: Task | TaskLoadError) -> bool:
        """Whether ``item`` passes the filters; a task that failed to load passes all but the id filter."""
        if isinstance(item, TaskLoadError):
            return not self.task_ids or item.problem.task_id in self.task_ids
        return ((not self.categories or item.category in self.categories)
                and (not self.task_ids or item.id in self.task_ids)
                and (not self.statuses or item.review is not None and item.review.status in self.statuses))

    def apply(self, items: Iterable[Item]) -> list[Item]:
        """The items that pass, in their order, cut to ``limit``."""
        kept = [item for item in items if self.keeps(item)]
        return kept[:self.limit] if self.limit else kept

    def missing_ids(self, items: Sequence[Task | TaskLoadError]) -> list[str]:
        """The asked-for task ids that no item has (sorted): a selection that names a task the source lacks."""
        known = {item.problem.task_id if isinstance(item, TaskLoadError) else item.id for item in items}
        return sorted(self.task_ids - known)
