"""Run a suite: for each task an episode in its own sandbox, a grade, a line in ``results.jsonl``.

The run directory holds ``run.json`` (what was run, how), ``results.jsonl``, ``artifacts/`` and
``summary.json``. Results already written are never rewritten: a run resumes by skipping the task
ids it has, and refuses to mix settings or to overwrite another run.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
import traceback
from collections import Counter
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator, Sequence

from langchain_core.tools import BaseTool
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph.state import CompiledStateGraph

from vtb_agents import __version__
from vtb_agents.analysis.metrics import summarize
from vtb_agents.artifacts import ArtifactStore
from vtb_agents.agents import AGENT_PREFIX, AgentFactory, episode_tools, load_agent_factory, run_agent_episode
from vtb_agents.graphs.categories import graph_builder
from vtb_agents.graphs.episode import EpisodeSettings, run_episode
from vtb_agents.graphs.grading import grade_episode
from vtb_agents.graphs.resumers import Resumer, load_resumer
from vtb_agents.judges import RubricJudge, RuleJudge, load_judge
from vtb_agents.judges.cache import CachedJudge, JudgeCache
from vtb_agents.judges.grade import CriticalRule
from vtb_agents.models.spec import ModelFactory, chat_model, model_factory, model_record
from vtb_agents.models.usage import track_usage
from vtb_agents.results import Episode, TaskResult, TaskUsage
from vtb_agents.runner.executors import Executor, LocalExecutor, RemoteExecutor
from vtb_agents.runner.store import ResultsStore, write_json_atomic
from vtb_agents.tasks.model import Task
from vtb_agents.tasks.sources import SAMPLE, SAMPLE_CASSETTE
from vtb_agents.tools import select_tools
from vtb_agents.tools.network import NetworkSettings
from vtb_agents.tools.sandbox import open_sandbox
from vtb_agents.tools.sandbox.base import Sandbox
from vtb_agents.tracing import install_tracing_from_env

RUN_FILE = "run.json"
SUMMARY_FILE = "summary.json"
JUDGE_CACHE_FILE = "judge_cache.sqlite"
CHECKPOINT_FILE = "checkpoints.sqlite"
PACING_KEYS = frozenset({"requests_per_second"})
"""Settings that change how fast a run goes, not its results: a resume may change them."""


class RunError(RuntimeError):
    """A run that cannot start or continue as asked (names the run directory and the reason)."""


@dataclass(frozen=True)
class RunConfig:
    """What a run is: recorded in ``run.json`` and compared on resume.

    ``model`` is ``replay``, a preset name (``vtb models``), ``provider:model`` or
    ``agent:module:function`` (a user's agent); ``model_kwargs`` are extra chat-model settings.
    """

    model: str
    judge: str = "rule"
    tasks: str = "sample"
    sandbox: str = "local"
    sandbox_strict: bool = False
    critical_rule: CriticalRule = "weight"
    no_tools: bool = False
    no_vision_tool: bool = False
    resumer: str = "scripted"
    user_model: str | None = None
    tools_mode: str | None = None
    tools_cache: str | None = None
    requests_per_second: float | None = None
    model_kwargs: dict[str, Any] | None = None
    episode: EpisodeSettings = field(default_factory=EpisodeSettings)

    def open_sandbox(self) -> ContextManager[Sandbox]:
        """A sandbox of the run's kind; ``sandbox_strict`` refuses anything short of full isolation."""
        return open_sandbox(self.sandbox, **({"strict": True} if self.sandbox_strict else {}))

    def network(self) -> NetworkSettings:
        """Settings of the network tools: live, or recording to / replaying from ``tools_cache``.

        Without a mode, the bundled suite replays its shipped cassette (its web pages and weather
        are authored for the demo, so live answers would not match) and other sources go live.
        """
        mode, cache = self.tools_mode, self.tools_cache
        if mode is None:
            sample = self.tasks == SAMPLE and cache is None
            mode, cache = ("replay", str(SAMPLE_CASSETTE)) if sample else ("live", cache)
        return NetworkSettings(mode=mode, cache_path=Path(cache) if cache else None)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (tuples become lists)."""
        return json.loads(json.dumps(asdict(self)))


ProgressFn = Callable[[TaskResult, int, int], None]


@dataclass
class RunResources:
    """What every task of a run shares: judge, artifact store, checkpointer, model or agent, resumer."""

    judge: RubricJudge
    tools: list[BaseTool] = field(default_factory=list)
    artifacts: ArtifactStore | None = None  # set once the run directory exists
    checkpointer: SqliteSaver | None = None
    models: ModelFactory | None = None
    agent: AgentFactory | None = None
    resumer: Resumer | None = None
    graphs: dict[str, CompiledStateGraph] = field(default_factory=dict)

    def graph(self, category: str) -> CompiledStateGraph:
        """The category's graph over the run's tools and checkpointer, compiled once per run."""
        if category not in self.graphs:
            self.graphs[category] = graph_builder(category)(self.tools, checkpointer=self.checkpointer)
        return self.graphs[category]


def build_resources(config: RunConfig, judge: RubricJudge) -> RunResources:
    """Resolve the run's model or agent and resumer; bad specs raise ValueError before any work."""
    agent = load_agent_factory(config.model) if config.model.startswith(AGENT_PREFIX) else None
    models = None if agent else model_factory(config.model, config.requests_per_second, config.model_kwargs)
    user_model = chat_model(config.user_model) if config.user_model else None
    tools = select_tools(no_tools=config.no_tools, no_vision_tool=config.no_vision_tool, network=config.network())
    return RunResources(judge=judge, tools=tools, models=models, agent=agent,
                        resumer=load_resumer(config.resumer, user_model))


@contextmanager
def checkpoints(out: Path) -> Iterator[SqliteSaver]:
    """The run's SQLite checkpointer (one thread per task), closed at the end."""
    connection = sqlite3.connect(out / CHECKPOINT_FILE, check_same_thread=False)
    # WAL without a sync per step: checkpoints serve inspection and interrupts, while results are
    # made durable on their own (results.jsonl is fsynced), so a lost last step costs nothing.
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    try:
        yield SqliteSaver(connection)
    finally:
        connection.close()


def run_task(task: Task, config: RunConfig, resources: RunResources) -> TaskResult:
    """Run and grade one task. Model, tool or graph failures become an errored episode, not a crash."""
    started = time.perf_counter()
    with track_usage() as model_usage:
        try:
            with config.open_sandbox() as sandbox:
                episode = episode_for_task(task, config, resources, sandbox)
        except Exception as exc:  # recorded per task: one failing task must not end a 1,204-task run
            episode = Episode(task_id=task.id, model=config.model, status="error",
                              error=f"{type(exc).__name__}: {exc}",
                              settings={"traceback": traceback.format_exc(limit=8)})
    with track_usage() as judge_usage:
        grade = grade_episode(task, episode, resources.judge, config.critical_rule)
    return TaskResult(
        task_id=task.id, category=task.category, category_raw=task.category_raw, domain=task.domain,
        domain_raw=task.domain_raw, turncase=task.turncase, model=config.model, episode=episode,
        grade=grade, duration_s=round(time.perf_counter() - started, 4),
        usage=TaskUsage(model=model_usage.total, model_by_turn=model_usage.by_turn, judge=judge_usage.total),
    )


def episode_for_task(task: Task, config: RunConfig, resources: RunResources, sandbox: Sandbox) -> Episode:
    """Run ``task``'s episode in ``sandbox`` with the run's model or agent (errors propagate)."""
    if resources.artifacts is None:
        raise RunError("run resources have no artifact store: open the run directory first")
    if resources.agent is not None:
        tools = [] if config.no_tools else episode_tools(sandbox, resources.artifacts,
                                                         timeout_s=config.episode.code_timeout_s,
                                                         no_vision_tool=config.no_vision_tool, shared=resources.tools)
        return run_agent_episode(task, resources.agent, sandbox=sandbox, artifacts=resources.artifacts,
                                 model_name=config.model, history=config.episode.history, tools=tools,
                                 max_image_side=config.episode.max_image_side,
                                 task_timeout_s=config.episode.task_timeout_s)
    assert resources.models is not None
    if resources.checkpointer is not None:
        resources.checkpointer.delete_thread(task.id)  # a task re-run after a crash starts afresh
    return run_episode(task, resources.models(task), resources.tools, sandbox=sandbox, graph=resources.graph(task.category), artifacts=resources.artifacts,
                       model_name=config.model, settings=config.episode, checkpointer=resources.checkpointer,
                       resumer=resources.resumer)


def model_records(model: str, model_kwargs: dict[str, Any] | None, judge: str) -> dict[str, Any]:
    """The resolved settings of the run's model and judge (presets expanded), kept in ``run.json``."""
    return {"model": model_record(model, model_kwargs), "judge": model_record(judge)}


def with_cache(judge: RubricJudge, cache_path: Path) -> RubricJudge:
    """``judge`` behind a verdict cache at ``cache_path`` (the rule judge needs none)."""
    return judge if isinstance(judge, RuleJudge) else CachedJudge(judge, JudgeCache(cache_path))


def prepare_run_dir(out: Path, config: RunConfig, *, resume: bool) -> list[TaskResult]:
    """Create or reopen ``out``; return the results already there (resume) or refuse to clobber."""
    out.mkdir(parents=True, exist_ok=True)
    store = ResultsStore(out)
    run_file = out / RUN_FILE
    if run_file.exists() or store.path.exists():
        if not resume:
            raise RunError(f"{out} already holds a run: pass --resume to continue it, or choose another --out")
        recorded = json.loads(run_file.read_text(encoding="utf-8")).get("config") if run_file.exists() else None
        if recorded is not None:
            current = config.to_dict()
            changed = sorted(k for k in set(recorded) | set(current)
                             if k not in PACING_KEYS and recorded.get(k) != current.get(k))
            if changed:
                raise RunError(f"{out}: cannot resume with different settings ({', '.join(changed)})")
        done, partial_at = store.load()
        if partial_at is not None:
            store.repair(partial_at)
        return done
    write_json_atomic(run_file, {"config": config.to_dict(), "vtb_agents": __version__,
                                 **model_records(config.model, config.model_kwargs, config.judge),
                                 "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    return []


def run_suite(tasks: Sequence[Task], config: RunConfig, out: Path, *, resume: bool = False,
              progress: ProgressFn | None = None, judge_cache: Path | None = None,
              executor: Executor | RemoteExecutor | None = None, stop: threading.Event | None = None
              ) -> dict[str, Any]:
    """Run every task not yet in ``out``, append each result as it finishes, write ``summary.json``.

    ``executor`` spreads the tasks (default: one at a time here); setting ``stop`` finishes the
    running tasks and writes the summary of what is done (``summary["complete"]`` is then False).
    """
    out = Path(out)
    tracing = install_tracing_from_env()  # LANGSMITH_TRACING=true: every trace goes through an image-safe client
    ids = [t.id for t in tasks]
    duplicates = sorted(i for i, n in Counter(ids).items() if n > 1)
    if duplicates:
        raise RunError(f"duplicate task ids: {', '.join(duplicates)}")
    resources = build_resources(config, load_judge(config.judge))
    done = prepare_run_dir(out, config, resume=resume)  # bad specs have failed before this point
    resources.judge = with_cache(resources.judge, judge_cache or out / JUDGE_CACHE_FILE)
    resources.artifacts = ArtifactStore(out / "artifacts")
    finished = {r.task_id for r in done}
    store = ResultsStore(out)
    results = list(done)

    def sink(result: TaskResult) -> None:
        store.append(result)
        results.append(result)
        if progress:
            progress(result, len(results), len(tasks))

    with checkpoints(out) as saver:
        resources.checkpointer = saver
        todo = [t for t in tasks if t.id not in finished]
        if isinstance(executor, RemoteExecutor):  # workers in other processes rebuild their own resources
            executor.run_remote(todo, config, out, judge_cache or out / JUDGE_CACHE_FILE, sink, stop or threading.Event())
        else:
            (executor or LocalExecutor()).run(todo, lambda task: run_task(task, config, resources), sink,
                                              stop or threading.Event())
    wanted = set(ids)
    kept = [r for r in results if r.task_id in wanted]
    summary = summarize(kept, judge_name=config.judge,
                        extra={"model": config.model, "critical_rule": config.critical_rule,
                               "complete": len(kept) == len(wanted)})
    write_json_atomic(out / SUMMARY_FILE, summary)
    if tracing is not None:
        tracing.flush()
    return summary
