"""What a run opens and closes, in one place: :func:`open_plan`.

A run is resolved first (:mod:`vtb_agents.runner.plan`: its specs decoded and its objects built,
so that a bad spec raises ValueError before any file is touched); the files it writes open when
:func:`open_plan`'s block is entered (the artifact store, the checkpointer, the verdict cache, the
model cache) and close when the block ends, whatever happens in it. The runner, the process and
Ray workers, the LangSmith experiment and the Studio graphs all run tasks on the
:class:`RunResources` it yields.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph.state import CompiledStateGraph

from vtb_agents.artifacts import ArtifactStore
from vtb_agents.config import RunConfig
from vtb_agents.episodes.reference_store import reference_store
from vtb_agents.episodes.regions import ReferenceRegionCache
from vtb_agents.graphs.categories import build_category_graph
from vtb_agents.graphs.resumers import Resumer
from vtb_agents.judges import RubricJudge
from vtb_agents.judges.batch import defer_verdicts
from vtb_agents.judges.cache import CachedJudge, JudgeCache
from vtb_agents.models.cache import ModelCache
from vtb_agents.rundir.read import record_if_any
from vtb_agents.runner.plan import ModelFactory, RunPlan, SandboxOpener
from vtb_agents.strategies import EpisodeContext, Strategy

@dataclass(frozen=True)
class RunResources:
    """What every task of a run shares, complete from creation (built by :func:`open_plan`).

    ``open_sandbox()`` opens a fresh sandbox of the run's kind for one episode; ``artifacts`` and
    ``checkpointer`` are None where a caller keeps its own (the Studio server); ``model_cache`` is the
    run's model-call cache (``--model-cache``), None without one. ``run_dir`` is where each task's
    transcript is written (None: not written).
    """

    judge: RubricJudge
    strategy: Strategy
    tools: list[BaseTool]
    open_sandbox: SandboxOpener
    models: ModelFactory | None = None
    resumer: Resumer | None = None
    artifacts: ArtifactStore | None = None
    checkpointer: SqliteSaver | None = None
    model_cache: ModelCache | None = None
    run_dir: Path | None = None
    graphs: dict[str, CompiledStateGraph[Any, EpisodeContext, Any, Any]] = field(default_factory=dict, compare=False,
                                                                                 repr=False)
    reference_regions: ReferenceRegionCache = field(default_factory=lambda: ReferenceRegionCache(reference_store()),
                                                    compare=False, repr=False)

    def graph(self, category: str) -> CompiledStateGraph[Any, EpisodeContext, Any, Any]:
        """The category's graph around the run's strategy, with its checkpointer, compiled once per run."""
        if category not in self.graphs:  # a memo of compiled graphs, not a setting
            self.graphs[category] = build_category_graph(category, self.strategy, checkpointer=self.checkpointer)
        return self.graphs[category]


@contextmanager
def open_judge(judge: RubricJudge, cache: Path | None, grading: str | None = None) -> Iterator[RubricJudge]:
    """``judge`` behind a verdict cache at ``cache`` (a judge that calls no model needs none), closed on
    exit; ``grading`` is the grading pass paying for its calls (:mod:`vtb_agents.judges.cache`)."""
    if cache is None or not judge.calls_model:
        yield judge
        return
    store = JudgeCache(cache)
    try:
        yield CachedJudge(judge, store, grading=grading)
    finally:
        store.close()


@contextmanager
def open_model_cache(config: RunConfig, run_id: str | None = None) -> Iterator[ModelCache | None]:
    """The run's model-call cache (``model_cache``, read only with ``model_cache_only``), closed on exit;
    ``run_id``: the run paying for the calls it makes (:mod:`vtb_agents.models.cache`)."""
    if config.model_cache is None:
        yield None
        return
    cache = ModelCache(Path(config.model_cache), only=config.model_cache_only, run_id=run_id)
    try:
        yield cache
    finally:
        cache.close()


@contextmanager
def open_checkpoints(path: Path) -> Iterator[SqliteSaver]:
    """A SQLite checkpointer at ``path`` (one thread per task), closed at the end."""
    connection = sqlite3.connect(path, check_same_thread=False)
    # WAL without a sync per step: checkpoints serve inspection and interrupts, while results are
    # made durable on their own (results.jsonl is fsynced), so a lost last step costs nothing.
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    try:
        yield SqliteSaver(connection)
    finally:
        connection.close()


@contextmanager
def open_plan(plan: RunPlan, *, artifacts: Path | None = None, checkpoints: Path | None = None,
              judge_cache: Path | None = None, run_dir: Path | None = None) -> Iterator[RunResources]:
    """The resources of a run of ``plan``, closed when the block ends: on entering, the artifact
    store at ``artifacts``, the checkpointer at ``checkpoints`` and the verdict cache at
    ``judge_cache`` open (each only if given), and the config's model cache; tasks' transcripts
    are written into ``run_dir`` (if given), whose record says who pays for the calls (read on
    entering: a new run writes it first)."""
    record = record_if_any(run_dir)
    with ExitStack() as stack:
        judge = stack.enter_context(open_judge(plan.judge, judge_cache, record.grading_id if record else None))
        yield RunResources(
            judge=defer_verdicts(judge) if plan.records.defers_verdicts else judge,
            strategy=plan.strategy, tools=plan.tools, open_sandbox=plan.open_sandbox, models=plan.models,
            resumer=plan.resumer, artifacts=ArtifactStore(artifacts) if artifacts is not None else None,
            checkpointer=stack.enter_context(open_checkpoints(checkpoints)) if checkpoints is not None else None,
            model_cache=stack.enter_context(open_model_cache(plan.config, record.run_id if record else None)),
            run_dir=run_dir)
