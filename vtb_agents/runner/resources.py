"""Everything a run needs, opened and closed in one place: :func:`open_resources`.

The runner, the Ray workers, the LangSmith experiment and the Studio graphs all get their
strategy, model factory, judge (behind its verdict cache), sandbox opener, network tools,
artifact store, checkpointer and resumer from it. Specs are resolved when it is called
(:func:`resolve_parts`: the run's parts, which the pre-run checks take), so a bad one raises
ValueError before any file is touched; files open when its block is entered (:func:`open_parts`)
and close when the block ends, whatever happens in it.
"""

from __future__ import annotations

import functools
from collections import Counter
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph.state import CompiledStateGraph

from vtb_agents.episodes.regions import ReferenceRegionCache
from vtb_agents.artifacts import ArtifactStore
from vtb_agents.defaults import OBJECT_PREFIX, AgentSpec
from vtb_agents.graphs.categories import build_category_graph
from vtb_agents.graphs.resumers import Resumer, load_resumer
from vtb_agents.judges import RubricJudge, load_judge
from vtb_agents.judges.cache import CachedJudge, JudgeCache
from vtb_agents.models.cache import ModelCache
from vtb_agents.models.limiter import Budgets, Caps, Limiters
from vtb_agents.models.spec import ModelFactory, chat_model, model_factory, refuse_object_name
from vtb_agents.config import RunConfig
from vtb_agents.rundir.read import record_if_any
from vtb_agents.sandbox import backend, open_sandbox, probe_in_background
from vtb_agents.sandbox.base import Sandbox
from vtb_agents.strategies import DEFAULT_STRATEGY, EpisodeContext, Strategy, load_strategy
from vtb_agents.tasks.sources import SAMPLE, SAMPLE_CASSETTE
from vtb_agents.tools import extension_tools, guard_tools, select_tools
from vtb_agents.tools.network import NetworkSettings

SandboxOpener = Callable[[], AbstractContextManager[Sandbox]]


@dataclass(frozen=True)
class RunObjects:
    """Objects a run from Python uses instead of what the config's specs name (the config records
    their names, :func:`~vtb_agents.models.spec.object_name`): a chat model, a judge, a strategy,
    and ``tools`` added to the run's tool set. They live in this process only (no remote workers)."""

    model: BaseChatModel | None = None
    judge: RubricJudge | None = None
    strategy: Strategy | None = None
    tools: tuple[BaseTool, ...] = ()

    def __bool__(self) -> bool:
        return any((self.model, self.judge, self.strategy, self.tools))


NO_OBJECTS = RunObjects()
"""A run of specs only (the CLI's)."""


@dataclass(frozen=True)
class RunResources:
    """What every task of a run shares, complete from creation (built by :func:`open_resources`).

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
    reference_regions: ReferenceRegionCache = field(default_factory=ReferenceRegionCache, compare=False, repr=False)

    def graph(self, category: str) -> CompiledStateGraph[Any, EpisodeContext, Any, Any]:
        """The category's graph around the run's strategy, with its checkpointer, compiled once per run."""
        if category not in self.graphs:  # a memo of compiled graphs, not a setting
            self.graphs[category] = build_category_graph(category, self.strategy, checkpointer=self.checkpointer)
        return self.graphs[category]


def network_settings(config: RunConfig) -> NetworkSettings:
    """Settings of the network tools: live, or recording to / replaying from ``tools_cache``.

    Without a mode, the bundled suite replays its shipped cassette (its web pages and weather
    are authored for the demo, so live answers would not match) and other sources go live.
    """
    mode, cache = config.tools_mode, config.tools_cache
    if mode is None:
        sample = config.tasks == SAMPLE and cache is None
        mode, cache = ("replay", str(SAMPLE_CASSETTE)) if sample else ("live", cache)
    return NetworkSettings(mode=mode, cache_path=Path(cache) if cache else None)


def sandbox_opener(config: RunConfig) -> SandboxOpener:
    """Opens a sandbox of the run's kind: ``sandbox_strict`` refuses anything short of full
    isolation, ``sandbox_network`` lets an E2B sandbox reach the internet (off by default)."""
    options: dict[str, Any] = {"strict": True} if config.sandbox_strict else {}
    if config.sandbox_network:
        options["network"] = True
    backend(config.sandbox)  # your own backend is loaded now: a bad spec fails before any task runs
    return functools.partial(open_sandbox, config.sandbox, **options)


def added_tools(config: RunConfig, objects: RunObjects) -> list[BaseTool]:
    """The tools a run adds to its set, guarded: the tool objects given from Python and those the
    specs of ``extra_tools`` name (``--tool``); a recorded object's name without its object is refused."""
    specs = [spec for spec in config.extra_tools if not spec.startswith(OBJECT_PREFIX)]
    if not objects.tools:
        for spec in config.extra_tools:
            refuse_object_name(spec, "tool")
    return [*guard_tools(list(objects.tools)), *extension_tools(specs)]


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


@dataclass(frozen=True)
class RunParts:
    """The parts of a run resolved from its specs and objects, before any file is opened: what the
    pre-run checks (:mod:`vtb_agents.runner.preflight`) build and check, and what
    :func:`open_parts` hands every task."""

    strategy: Strategy
    judge: RubricJudge
    tools: list[BaseTool]
    open_sandbox: SandboxOpener
    models: ModelFactory | None = None
    resumer: Resumer | None = None


def run_limiters(config: RunConfig) -> Limiters:
    """A run's limiters (one per account and model), capped by ``--rps`` and ``--max-connections``."""
    return Limiters(Caps(requests_per_second=config.requests_per_second, max_connections=config.max_connections))


def resolve_parts(config: RunConfig, objects: RunObjects = NO_OBJECTS, limiters: Budgets | None = None) -> RunParts:
    """The run's parts: ``objects`` from Python, else what the config's specs (strategy, model, judge,
    resumer, user model, tools, sandbox) name, each loaded and built once. A spec that cannot be
    loaded or built raises ValueError naming it and the cause; no file is touched. Model, judge and
    simulated user are paced by ``limiters`` (the run's; default: new ones, :func:`run_limiters`)."""
    limiters = limiters or run_limiters(config)
    if AgentSpec.parse(config.model) is not None and config.strategy != DEFAULT_STRATEGY:
        raise ValueError(f"--model {config.model} is your own agent, which answers the turns itself: "
                         f"it cannot be combined with --strategy {config.strategy}")
    if config.model_cache_only and not Path(str(config.model_cache)).is_file():
        raise ValueError(f"model cache {config.model_cache}: no such file (a cache-only run replays a recorded cache)")
    if config.sandbox == "local":  # probed while the model's libraries load: first tasks need not wait
        probe_in_background()
    strategy = objects.strategy or load_strategy(config.strategy_spec)
    models = (model_factory(config.model, config.requests_per_second, config.request_timeout_s,
                            extra=config.model_kwargs, model=objects.model, limiters=limiters)
              if strategy.needs_model else None)
    user_model = (chat_model(config.user_model, request_timeout_s=config.request_timeout_s, limiters=limiters)
                  if config.user_model else None)
    resumer = load_resumer(config.resumer, user_model)
    judge = objects.judge or load_judge(config.judge, config.request_timeout_s, limiters)
    tools = [*select_tools(no_tools=config.no_tools, no_vision_tool=config.no_vision_tool,
                           network=network_settings(config)), *added_tools(config, objects)]
    open_box = sandbox_opener(config)
    clashes = sorted(name for name, n in Counter(t.name for t in tools).items() if n > 1)
    if clashes:
        raise ValueError(f"tool name(s) {', '.join(clashes)} given twice: rename the tool objects you add")
    return RunParts(strategy=strategy, judge=judge, tools=tools, open_sandbox=open_box, models=models,
                    resumer=resumer)


@contextmanager
def open_parts(parts: RunParts, config: RunConfig, *, artifacts: Path | None = None, checkpoints: Path | None = None,
               judge_cache: Path | None = None, run_dir: Path | None = None) -> Iterator[RunResources]:
    """The resources of a run of ``parts``, closed when the block ends: on entering, the artifact
    store at ``artifacts``, the checkpointer at ``checkpoints`` and the verdict cache at
    ``judge_cache`` open (each only if given), and the config's model cache; tasks' transcripts
    are written into ``run_dir`` (if given), whose record says who pays for the calls (read on
    entering: a new run writes it first)."""
    record = record_if_any(run_dir)
    with ExitStack() as stack:
        yield RunResources(
            judge=stack.enter_context(open_judge(parts.judge, judge_cache, record.grading_id if record else None)),
            strategy=parts.strategy, tools=parts.tools, open_sandbox=parts.open_sandbox, models=parts.models,
            resumer=parts.resumer, artifacts=ArtifactStore(artifacts) if artifacts is not None else None,
            checkpointer=stack.enter_context(open_checkpoints(checkpoints)) if checkpoints is not None else None,
            model_cache=stack.enter_context(open_model_cache(config, record.run_id if record else None)),
            run_dir=run_dir)


def open_resources(config: RunConfig, *, artifacts: Path | None = None, checkpoints: Path | None = None,
                   judge_cache: Path | None = None, objects: RunObjects = NO_OBJECTS,
                   run_dir: Path | None = None,
                   limiters: Budgets | None = None) -> AbstractContextManager[RunResources]:
    """The run's resources, as a context manager that closes them: :func:`resolve_parts` now (a bad
    spec raises ValueError before any file is touched), :func:`open_parts` when the block is entered.
    ``objects`` from Python stand in for the specs of ``config`` that name them; ``limiters`` pace
    the model and judge calls (a worker's: its run's, served by the parent)."""
    return open_parts(resolve_parts(config, objects, limiters), config, artifacts=artifacts, checkpoints=checkpoints,
                      judge_cache=judge_cache, run_dir=run_dir)
