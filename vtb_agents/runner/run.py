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
from vtb_agents.episodes.driver import EpisodeSettings, run_episode
from vtb_agents.graphs.categories import build_category_graph
from vtb_agents.judges.graph import grade_episode
from vtb_agents.graphs.resumers import Resumer, load_resumer
from vtb_agents.judges import RubricJudge, RuleJudge, load_judge
from vtb_agents.judges.cache import CachedJudge, JudgeCache
from vtb_agents.judges.grade import CriticalRule
from vtb_agents.models.spec import ModelFactory, chat_model, model_factory, model_record
from vtb_agents.models.http import DEFAULT_REQUEST_TIMEOUT_S
from vtb_agents.models.usage import track_usage
from vtb_agents.results import Episode, TaskGrade, TaskResult, TaskUsage, task_outcome
from vtb_agents.runner.executors import Executor, LocalExecutor, RemoteExecutor
from vtb_agents.runner.lock import run_dir_lock
from vtb_agents.runner.outcomes import failed_episode
from vtb_agents.runner.saving import ResultSaver, storage_cause
from vtb_agents.runner.store import ResultsStore, latest_results, write_json_atomic
from vtb_agents.strategies import DEFAULT_STRATEGY, Strategy, load_strategy
from vtb_agents.strategies.agent import AGENT_PREFIX
from vtb_agents.tasks.model import Task
from vtb_agents.tasks.sources import SAMPLE, SAMPLE_CASSETTE
from vtb_agents.tools import select_tools
from vtb_agents.tools.network import NetworkSettings
from vtb_agents.sandbox import open_sandbox
from vtb_agents.sandbox.base import Sandbox
from vtb_agents.tracing import install_tracing_from_env

RUN_FILE = "run.json"
SUMMARY_FILE = "summary.json"
JUDGE_CACHE_FILE = "judge_cache.sqlite"
CHECKPOINT_FILE = "checkpoints.sqlite"
PACING_KEYS = frozenset({"requests_per_second", "request_timeout_s"})
"""Settings that change how fast a run goes, not its results: a resume may change them."""
EXIT_INCOMPLETE = 3
"""Exit status of ``vtb run`` / ``vtb grade`` while infrastructure failures leave tasks ungraded."""


class RunError(RuntimeError):
    """A run that cannot start or continue as asked (names the run directory and the reason)."""


@dataclass(frozen=True)
class RunConfig:
    """What a run is: recorded in ``run.json`` and compared on resume.

    ``model`` is ``replay``, a preset name (``vtb models``), ``provider:model`` or
    ``agent:module:function`` (a user's agent, which is then the strategy); ``model_kwargs`` are
    extra chat-model settings; ``strategy`` names the turn policy (:mod:`vtb_agents.strategies`).
    """

    model: str
    strategy: str = DEFAULT_STRATEGY
    judge: str = "rule"
    tasks: str = "sample"
    sandbox: str = "local"
    sandbox_strict: bool = False
    sandbox_network: bool = False
    critical_rule: CriticalRule = "weight"
    no_tools: bool = False
    no_vision_tool: bool = False
    resumer: str = "scripted"
    user_model: str | None = None
    tools_mode: str | None = None
    tools_cache: str | None = None
    requests_per_second: float | None = None
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    model_kwargs: dict[str, Any] | None = None
    episode: EpisodeSettings = field(default_factory=EpisodeSettings)

    def open_sandbox(self) -> ContextManager[Sandbox]:
        """A sandbox of the run's kind; ``sandbox_strict`` refuses anything short of full isolation,
        ``sandbox_network`` lets an E2B sandbox reach the internet (off by default)."""
        options = {"strict": True} if self.sandbox_strict else {}
        return open_sandbox(self.sandbox, **options, **({"network": True} if self.sandbox_network else {}))

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

    @property
    def strategy_spec(self) -> str:
        """The strategy that answers turns: the user's agent for ``agent:`` models, else ``strategy``."""
        return self.model if self.model.startswith(AGENT_PREFIX) else self.strategy

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (tuples become lists)."""
        return json.loads(json.dumps(asdict(self)))


ProgressFn = Callable[[TaskResult, int, int], None]


@dataclass
class RunResources:
    """What every task of a run shares: judge, artifact store, checkpointer, strategy, model, resumer."""

    judge: RubricJudge
    strategy: Strategy
    tools: list[BaseTool] = field(default_factory=list)
    artifacts: ArtifactStore | None = None  # set once the run directory exists
    checkpointer: SqliteSaver | None = None
    models: ModelFactory | None = None
    resumer: Resumer | None = None
    graphs: dict[str, CompiledStateGraph] = field(default_factory=dict)

    def graph(self, category: str) -> CompiledStateGraph:
        """The category's graph around the run's strategy, with its checkpointer, compiled once per run."""
        if category not in self.graphs:
            self.graphs[category] = build_category_graph(category, self.strategy, checkpointer=self.checkpointer)
        return self.graphs[category]


def build_resources(config: RunConfig, judge: RubricJudge, strategy: Strategy | None = None) -> RunResources:
    """Resolve the run's strategy (``strategy`` overrides the spec, for objects from Python), model
    and resumer; bad specs raise ValueError before any work."""
    if config.model.startswith(AGENT_PREFIX) and config.strategy != DEFAULT_STRATEGY:
        raise ValueError(f"--model {config.model} is your own agent, which answers the turns itself: "
                         f"it cannot be combined with --strategy {config.strategy}")
    strategy = strategy or load_strategy(config.strategy_spec)
    models = (model_factory(config.model, config.requests_per_second, config.request_timeout_s,
                            extra=config.model_kwargs) if strategy.needs_model else None)
    user_model = chat_model(config.user_model, request_timeout_s=config.request_timeout_s) if config.user_model else None
    tools = select_tools(no_tools=config.no_tools, no_vision_tool=config.no_vision_tool, network=config.network())
    return RunResources(judge=judge, strategy=strategy, tools=tools, models=models,
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
    """Run and grade one task; its ``outcome`` says how it ended (README "Outcomes").

    A failure is recorded, never raised: the model's own (task timeout, step limit) keeps the
    turns finished before it and is graded, unanswered turns failing their rubrics; an
    infrastructure failure (provider, sandbox, storage, harness) leaves the task ungraded.
    """
    started = time.perf_counter()
    with track_usage() as model_usage:
        try:
            with config.open_sandbox() as sandbox:
                episode = episode_for_task(task, config, resources, sandbox)
            episode.outcome = episode.ended
        except Exception as exc:  # recorded per task: one failing task must not end a 1,204-task run
            if storage_cause(exc) is not None:
                raise  # a full disk is the run's problem, not the task's: the run stops (runner/saving.py)
            episode = failed_episode(task.id, config.model, exc)
    with track_usage() as judge_usage:
        try:
            grade = grade_episode(task, episode, resources.judge, config.critical_rule)
        except Exception as exc:  # a grading failure is this task's, never the run's
            if storage_cause(exc) is not None:
                raise
            grade = TaskGrade(reason=f"grading failed: {type(exc).__name__}: {exc}",
                              critical_rule=config.critical_rule)
    return TaskResult(
        task_id=task.id, category=task.category, category_raw=task.category_raw, domain=task.domain,
        domain_raw=task.domain_raw, turncase=task.turncase, model=config.model, strategy=config.strategy_spec,
        episode=episode, grade=grade, duration_s=round(time.perf_counter() - started, 4),
        outcome=task_outcome(episode, grade),
        usage=TaskUsage(model=model_usage.total, model_by_turn=model_usage.by_turn, judge=judge_usage.total),
    )


def episode_for_task(task: Task, config: RunConfig, resources: RunResources, sandbox: Sandbox) -> Episode:
    """Run ``task``'s episode in ``sandbox`` with the run's strategy (errors propagate)."""
    if resources.artifacts is None:
        raise RunError("run resources have no artifact store: open the run directory first")
    if resources.checkpointer is not None:
        resources.checkpointer.delete_thread(task.id)  # a task re-run after a crash starts afresh
    model = resources.models(task) if resources.models is not None else None
    return run_episode(task, model, resources.tools, sandbox=sandbox, graph=resources.graph(task.category),
                       artifacts=resources.artifacts, model_name=config.model, settings=config.episode,
                       checkpointer=resources.checkpointer, resumer=resources.resumer, strategy=resources.strategy)


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
            current, defaults = config.to_dict(), RunConfig(model=config.model).to_dict()
            changed = sorted(k for k in set(recorded) | set(current)  # settings newer than the run: defaults
                             if k not in PACING_KEYS and recorded.get(k, defaults.get(k)) != current.get(k))
            if changed:
                raise RunError(f"{out}: cannot resume with different settings ({', '.join(changed)})")
        return store.load_for_resume()  # torn lines moved to results.jsonl.corrupt, duplicates dropped
    write_json_atomic(run_file, {"config": config.to_dict(), "vtb_agents": __version__,
                                 **model_records(config.model, config.model_kwargs, config.judge),
                                 "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    return []


def run_suite(tasks: Sequence[Task], config: RunConfig, out: Path, *, resume: bool = False,
              progress: ProgressFn | None = None, judge_cache: Path | None = None,
              executor: Executor | RemoteExecutor | None = None, stop: threading.Event | None = None,
              strategy: Strategy | None = None, retry_errors: bool = False) -> dict[str, Any]:
    """Run every task not yet in ``out``, append each result as it finishes, write ``summary.json``.

    ``executor`` spreads the tasks (default: one at a time here); setting ``stop`` finishes the
    running tasks and writes the summary of what is done. ``retry_errors`` (with ``resume``) runs
    again the tasks an infrastructure failure left ungraded, and only those; their new lines
    supersede the old ones (:func:`~vtb_agents.runner.store.latest_results`). The summary's
    ``complete`` is False while any task is missing or ungraded by an infrastructure failure.
    ``strategy`` is a strategy object from Python (``config.strategy`` records its name); other
    runs resolve ``config.strategy``.
    """
    out = Path(out)
    tracing = install_tracing_from_env()  # LANGSMITH_TRACING=true: every trace goes through an image-safe client
    ids = [t.id for t in tasks]
    duplicates = sorted(i for i, n in Counter(ids).items() if n > 1)
    if duplicates:
        raise RunError(f"duplicate task ids: {', '.join(duplicates)}")
    if strategy is not None and isinstance(executor, RemoteExecutor):
        raise RunError("a strategy object from Python cannot reach remote workers: name it as 'module:function'")
    resources = build_resources(config, load_judge(config.judge, config.request_timeout_s), strategy)
    out.mkdir(parents=True, exist_ok=True)
    stop = stop or threading.Event()
    with run_dir_lock(out, "vtb run"):  # one writer per run directory, for the whole run
        results: list[TaskResult] = []

        def saved(result: TaskResult) -> None:
            results.append(result)
            if progress:
                progress(result, len(results), len(tasks))

        sink = ResultSaver(ResultsStore(out), stop, saved)  # a disk error stops the run, loses nothing saved
        try:
            done = prepare_run_dir(out, config, resume=resume)  # bad specs have failed before this point
            results.extend(done)
            resources.judge = with_cache(resources.judge, judge_cache or out / JUDGE_CACHE_FILE)
            resources.artifacts = ArtifactStore(out / "artifacts")
            finished = {r.task_id for r in done if not (retry_errors and r.infrastructure_failed)}
            with checkpoints(out) as saver:
                resources.checkpointer = saver
                todo = [t for t in tasks if t.id not in finished]
                if isinstance(executor, RemoteExecutor):  # workers in other processes rebuild their own resources
                    executor.run_remote(todo, config, out, judge_cache or out / JUDGE_CACHE_FILE, sink, stop)
                else:
                    (executor or LocalExecutor()).run(
                        todo, sink.guard(lambda task: run_task(task, config, resources)), sink, stop)
        except Exception as exc:
            if (cause := storage_cause(exc)) is None:
                raise
            sink.failed(cause)
        failure = sink.finish(out, already=len(results) - sink.saved)
        if failure:
            raise RunError(failure)
        wanted = set(ids)
        results = latest_results(results)  # a retried task's new result replaces the old one
        kept = [r for r in results if r.task_id in wanted]
        summary = summarize(kept, judge_name=config.judge, expected=len(wanted),
                            extra={"model": config.model, "strategy": config.strategy_spec,
                                   "critical_rule": config.critical_rule})
        write_json_atomic(out / SUMMARY_FILE, summary)
    if tracing is not None:
        tracing.flush()
    return summary
