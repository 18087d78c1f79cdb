"""Compatibility shim, kept for one release: moved to :mod:`vtb_agents.models.retry`
(``TaskTimeout`` to :mod:`vtb_agents.models.deadline`)."""

from vtb_agents.models.deadline import TaskTimeout  # noqa: F401
from vtb_agents.models.retry import *  # noqa: F401,F403
