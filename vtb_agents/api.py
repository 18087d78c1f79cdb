"""The Python API for notebooks and scripts, on the same code as the ``vtb`` command.

Example (offline, on the bundled suite):
    >>> import vtb_agents
    >>> summary = vtb_agents.evaluate("react", tasks="sample", model="replay", judge="rule")  # doctest: +SKIP
    >>> summary.apr, summary.run_dir  # doctest: +SKIP
    (1.0, PosixPath('/tmp/vtb-run-...'))

Your own LangChain agent, in five lines:
    >>> from langchain.agents import create_agent
    >>> task = vtb_agents.load_tasks("sample")[0]  # doctest: +SKIP
    >>> with vtb_agents.task_tools(task) as tools:  # doctest: +SKIP
    ...     agent = create_agent("openai:gpt-4o", tools)
    ...     agent.invoke({"messages": [("user", task.turns[0].prompt)]})
"""

from __future__ import annotations

import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from langchain_core.tools import BaseTool

from vtb_agents.artifacts import ArtifactStore, to_png
from vtb_agents.rundir.records import GroupScore, RunSummary

__all__ = ["GroupScore", "RunSummary", "evaluate", "load_tasks", "resolve_strategy", "task_tools"]
from vtb_agents.sandbox import open_sandbox
from vtb_agents.strategies.agent import agent_strategy
from vtb_agents.strategies.base import Strategy
from vtb_agents.tasks.model import Task
from vtb_agents.tasks.sources import load_tasks as load_source
from vtb_agents.tools import bind_episode_tools, select_tools
from vtb_agents.tools.network import NetworkSettings

StrategyLike = str | Strategy | Callable[..., Any]


def load_tasks(source: str | Path = "sample", *, category: str | None = None, task_id: str | None = None,
               limit: int | None = None) -> list[Task]:
    """The tasks of ``source`` (``sample``, a folder, parquet, ``hf:...``), optionally filtered."""
    tasks = [t for t in load_source(source)
             if (category is None or t.category == category) and (task_id is None or t.id == task_id)]
    return tasks[:limit] if limit else tasks


@contextmanager
def task_tools(task: Task | None = None, *, sandbox: str = "local", artifacts_dir: Path | None = None,
               no_vision_tool: bool = False, network: NetworkSettings | None = None) -> Iterator[list[BaseTool]]:
    """The six tools bound to a fresh sandbox holding ``task``'s images (``image_0.png``, ...).

    The sandbox closes when the block ends. Images saved by code calls go to ``artifacts_dir``
    (a temporary folder by default). Network tools call the live services unless ``network`` says
    otherwise (the bundled suite's cassette: ``NetworkSettings(mode="replay", cache_path=...)``).
    """
    with tempfile.TemporaryDirectory(prefix="vtb-tools-") as scratch, open_sandbox(sandbox) as box:
        artifacts = ArtifactStore(artifacts_dir or Path(scratch) / "artifacts")
        named = [(task.image_name(i), image) for i, image in enumerate(task.images)] if task is not None else []
        for name, image in named:
            box.put_file(name, to_png(image.read_bytes()))
        yield bind_episode_tools(select_tools(no_vision_tool=no_vision_tool, network=network), box, artifacts)


def resolve_strategy(strategy_or_agent: StrategyLike) -> Strategy | str:
    """A strategy spec string as it is, a Strategy as it is, and an agent factory behind the adapter."""
    if isinstance(strategy_or_agent, (str, Strategy)):
        return strategy_or_agent
    if callable(strategy_or_agent):
        module = getattr(strategy_or_agent, "__module__", "__main__")
        name = getattr(strategy_or_agent, "__qualname__", type(strategy_or_agent).__name__)
        return agent_strategy(strategy_or_agent, f"agent:{module}:{name}")
    raise TypeError(f"expected a strategy name, a Strategy or an agent factory, got {type(strategy_or_agent).__name__}")


def evaluate(strategy_or_agent: StrategyLike = "react", tasks: str | list[Task] = "sample", model: str = "replay",
             judge: str = "rule", out: str | Path | None = None, *, concurrency: int = 1, resume: bool = False,
             **options: Any) -> RunSummary:
    """Run and grade ``tasks`` with a strategy (name, ``module:function`` or :class:`Strategy`) or your
    own agent factory, write the run directory ``out`` (a new temporary folder by default) and return
    its summary. ``options`` are ``vtb run``'s settings by their Python names (``max_tool_rounds``,
    ``prompt_level``, ``history``, ``no_tools``, ``no_vision_tool``, ``critical_rule``, ...)."""
    from vtb_agents.config import run_config
    from vtb_agents.runner.executors import LocalExecutor
    from vtb_agents.runner.run import run_suite

    task_list = load_tasks(tasks) if isinstance(tasks, (str, Path)) else list(tasks)
    strategy = resolve_strategy(strategy_or_agent)
    config = run_config(model=model, judge=judge, tasks=tasks if isinstance(tasks, str) else "python",
                        strategy=strategy if isinstance(strategy, str) else strategy.name, **options)
    run_dir = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="vtb-run-"))
    summary = run_suite(task_list, config, run_dir, resume=resume, executor=LocalExecutor(concurrency),
                        strategy=None if isinstance(strategy, str) else strategy)
    return RunSummary.model_validate({**summary, "run_dir": run_dir})
