"""Compatibility shim, kept for one release: moved to :mod:`vtb_agents.models.deadline`."""

from vtb_agents.models.deadline import *  # noqa: F401,F403
from vtb_agents.models.deadline import TaskDeadline, TaskTimeout, task_time_limit, with_deadline  # noqa: F401
