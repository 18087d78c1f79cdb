"""The one episode driver: a task's turns, clarification, history and time limit, for every strategy."""

from vtb_agents.episodes.driver import run_episode

__all__ = ["run_episode"]
