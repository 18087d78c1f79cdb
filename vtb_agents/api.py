"""The Python API for notebooks and scripts, on the same code as the ``vtb`` command.

Example (offline, on the bundled suite):
    >>> import vtb_agents
    >>> summary = vtb_agents.evaluate("react", tasks="sample", model="replay", judge="rule")  # doctest: +SKIP
    >>> summary.apr, summary.run_dir  # doctest: +SKIP
    (1.0, PosixPath('runs/run-20260101-120000'))

Objects work where specs do: a LangChain chat model as ``model`` or ``judge``, a judge object, a
:class:`Strategy`, your agent (a compiled graph, any Runnable, or a factory of one) as ``agent``
and extra tools; in a notebook, ``await vtb_agents.aevaluate(...)``:
    >>> from langchain_openai import ChatOpenAI
    >>> summary = await vtb_agents.aevaluate(model=ChatOpenAI(model="gpt-4o"), judge="o4-mini")  # doctest: +SKIP

Your own LangChain agent, in five lines:
    >>> from langchain.agents import create_agent
    >>> task = vtb_agents.load_tasks("sample")[0]  # doctest: +SKIP
    >>> with vtb_agents.task_tools(task) as tools:  # doctest: +SKIP
    ...     agent = create_agent("openai:gpt-4o", tools)
    ...     agent.invoke({"messages": [("user", task.turns[0].prompt)]})
"""

from __future__ import annotations

import asyncio
import contextvars
import re
import sys
import tempfile
from collections.abc import Callable, Coroutine, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, ParamSpec, TypeVar, overload

from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from vtb_agents.artifacts import ArtifactStore, to_png
from vtb_agents.defaults import DEFAULT_STRATEGY, REPLAY
from vtb_agents.judges import RubricJudge
from vtb_agents.judges.base import judge_problem
from vtb_agents.judges.llm import LLMJudge
from vtb_agents.results import TaskResult
from vtb_agents.rundir.errors import RunError
from vtb_agents.rundir.leaderboard import Leaderboard
from vtb_agents.rundir.records import GroupScore, RunCost, RunSummary, RunUsage
from vtb_agents.rundir.store import ResultsStore
from vtb_agents.runner.plan import RunObjects, object_name, sandbox_kind_opener
from vtb_agents.strategies.agent import AgentLike, agent_strategy
from vtb_agents.strategies.base import Strategy
from vtb_agents.tasks.model import Task
from vtb_agents.tasks.select import TaskFilter
from vtb_agents.tasks.sources import load_tasks as load_source
from vtb_agents.tools import bind_episode_tools, select_tools
from vtb_agents.tools.network import NetworkSettings

__all__ = ["Evaluation", "Evaluations", "GroupScore", "RunCost", "RunSummary", "RunUsage", "TaskResult", "aevaluate",
           "evaluate", "load_tasks", "task_tools"]

JudgeLike = str | BaseChatModel | RubricJudge
P = ParamSpec("P")
R = TypeVar("R")


class Evaluation(RunSummary):
    """What :func:`evaluate` returns: the run's summary (``summary.json``: APR, ARS, outcomes, tool
    metrics, usage, cost; with ``epochs``, intervals and pass@k) with its run directory, its results,
    one :class:`TaskResult` per task and epoch, and its HTML report (``report.html``, with a page per
    task, as ``vtb run`` writes it)."""

    results: list[TaskResult]
    report: Path

    def __repr__(self) -> str:
        """A few lines (what was run, APR and ARS with intervals, where it looked, where the files are),
        not the full record: ``.model_dump()`` has everything."""
        from vtb_agents.report.notebook import evaluation_text

        return evaluation_text(self, self.report, len(self.results))

    __str__ = __repr__

    def _repr_html_(self) -> str:
        """The notebook view: the score tables with intervals, the region figures, a link to report.html."""
        from vtb_agents.report.notebook import evaluation_html

        return evaluation_html(self, self.report)


PYTHON_TERMS = (("--model-cache-only", "model_cache_only=True"), ("--retry-errors", "retry_errors=True"),
                ("--model-cache", "model_cache="), ("--resume", "resume=True"), ("--epochs", "epochs="),
                ("--out", "out="), ("`vtb run`", "`evaluate()`"), ("vtb run", "evaluate()"))
"""The runner's messages speak CLI; :func:`evaluate` says the same in its keywords."""


def in_python_terms(message: str) -> str:
    """``message`` with ``vtb run``'s flags named as :func:`evaluate`'s keywords (``resume=True``, not ``--resume``)."""
    for flag, keyword in PYTHON_TERMS:
        message = re.sub(re.escape(flag) + r"(?![\w-])", keyword, message)
    return message


def default_run_dir(now: datetime | None = None) -> Path:
    """A new folder under ``./runs/`` named by the time (``runs/run-20260101-120000``, ``-2`` ... if taken)."""
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    base = Path("runs") / f"run-{stamp}"
    chosen, number = base, 1
    while chosen.exists():
        number += 1
        chosen = base.with_name(f"{base.name}-{number}")
    return chosen


def load_tasks(source: str | Path = "sample", *, category: str | None = None, task_id: str | None = None,
               limit: int | None = None) -> list[Task]:
    """The tasks of ``source`` (``sample``, a folder, parquet, ``hf:...``), optionally filtered (the one
    task filter, :class:`~vtb_agents.tasks.select.TaskFilter`, as ``vtb run``'s options)."""
    chosen = TaskFilter(categories=frozenset({category} if category is not None else ()),
                        task_ids=frozenset({task_id} if task_id is not None else ()), limit=limit)
    return chosen.apply(load_source(source))


@contextmanager
def task_tools(task: Task | None = None, *, sandbox: str = "local", artifacts_dir: Path | None = None,
               no_vision_tool: bool = False, network: NetworkSettings | None = None) -> Iterator[list[BaseTool]]:
    """The six tools bound to a fresh sandbox holding ``task``'s images (``image_0.png``, ...).

    The sandbox closes when the block ends. Images saved by code calls go to ``artifacts_dir``
    (a temporary folder by default). Network tools call the live services unless ``network`` says
    otherwise (the bundled suite's cassette: ``NetworkSettings(mode="replay", cache_path=...)``).
    """
    with tempfile.TemporaryDirectory(prefix="vtb-tools-") as scratch, sandbox_kind_opener(sandbox)() as box:
        artifacts = ArtifactStore(artifacts_dir or Path(scratch) / "artifacts")
        named = [(task.image_name(i), image) for i, image in enumerate(task.images)] if task is not None else []
        for name, image in named:
            box.put_file(name, to_png(image.read_bytes()))
        yield bind_episode_tools(select_tools(no_vision_tool=no_vision_tool, network=network), box, artifacts)


def judge_object(judge: BaseChatModel | RubricJudge) -> RubricJudge:
    """A judge object as it is, or a chat model as the LLM judge (:class:`~vtb_agents.judges.llm.LLMJudge`)."""
    if isinstance(judge, BaseChatModel):
        return LLMJudge(judge, name=object_name(judge))
    problem = judge_problem(judge)
    if problem is None:
        return judge
    raise TypeError(f"judge must be a spec, a chat model or a judge object (a 'name', 'calls_model' and a 'judge' "
                    f"method, vtb_agents.judges.RubricJudge), not {type(judge).__name__}: {problem}")


def run_objects(strategy: str | Strategy, model: str | BaseChatModel, judge: JudgeLike, agent: AgentLike | None,
                tools: Sequence[BaseTool | str]) -> tuple[RunObjects, dict[str, Any]]:
    """The objects among ``evaluate``'s arguments, and the run options naming every argument."""
    if agent is not None and strategy != DEFAULT_STRATEGY:
        raise ValueError(f"agent= answers the turns itself: it cannot be combined with strategy {strategy!r}")
    if agent is not None and model != REPLAY:
        raise ValueError("agent= brings its own model: leave model= out (the agent's model is what runs)")
    if not isinstance(strategy, (str, Strategy)):
        raise TypeError(f"strategy must be a name, 'module:function' or a Strategy, not {type(strategy).__name__}: "
                        "pass your own agent as agent=")
    if agent is not None and not isinstance(agent, Runnable) and not callable(agent):
        raise TypeError(f"agent must be a Runnable (a compiled graph) or an agent factory, not {type(agent).__name__}")
    chosen = agent_strategy(agent, object_name(agent)) if agent is not None else strategy
    judging = None if isinstance(judge, str) else judge_object(judge)
    bad = [t for t in tools if not isinstance(t, (BaseTool, str))]
    if bad:
        raise TypeError(f"tools must be LangChain BaseTool objects (@tool) or 'module:attr' specs, "
                        f"not {type(bad[0]).__name__}")
    objects = RunObjects(model=None if isinstance(model, str) else model, judge=judging,
                         strategy=None if isinstance(chosen, str) else chosen,
                         tools=tuple(t for t in tools if isinstance(t, BaseTool)))
    names = {"model": model if isinstance(model, str) else object_name(model),
             "judge": judge if isinstance(judge, str) else object_name(judge),
             "strategy": object_name(agent) if agent is not None else
             strategy if isinstance(strategy, str) else object_name(strategy),
             "extra_tools": tuple(t if isinstance(t, str) else object_name(t) for t in tools)}
    return objects, names


class Evaluations(Leaderboard):
    """What :func:`evaluate` returns for several models (``model=[...]``): the leaderboard
    (``leaderboard.json``: per model APR, ARS with intervals, cost, cost per pass, outcomes, from each
    run's ``summary.json``), each model's :class:`Evaluation` by the name its ``run.json`` records
    (``runs``), and the leaderboard page (``page``, linking each model's report)."""

    runs: dict[str, Evaluation]
    page: Path


@overload
def evaluate(strategy: str | Strategy = ..., tasks: str | list[Task] = ..., model: str | BaseChatModel = ...,
             judge: JudgeLike = ..., out: str | Path | None = ..., *, agent: AgentLike | None = ...,
             tools: Sequence[BaseTool | str] = ..., concurrency: int = ..., resume: bool = ...,
             retry_errors: bool = ..., **options: Any) -> Evaluation: ...


@overload
def evaluate(strategy: str | Strategy = ..., tasks: str | list[Task] = ...,
             model: list[str | BaseChatModel] = ..., judge: JudgeLike = ..., out: str | Path | None = ..., *,
             agent: AgentLike | None = ..., tools: Sequence[BaseTool | str] = ..., concurrency: int = ...,
             resume: bool = ..., retry_errors: bool = ..., **options: Any) -> Evaluations: ...


def evaluate(strategy: str | Strategy = DEFAULT_STRATEGY, tasks: str | list[Task] = "sample",
             model: str | BaseChatModel | list[str | BaseChatModel] = REPLAY, judge: JudgeLike = "rule",
             out: str | Path | None = None, *, agent: AgentLike | None = None, tools: Sequence[BaseTool | str] = (),
             concurrency: int = 1, resume: bool = False, retry_errors: bool = False,
             **options: Any) -> Evaluation | Evaluations:
    """Run and grade ``tasks``, write the run directory ``out`` (default: a new folder under ``./runs/``
    named by the time, printed on stderr) with its HTML report (``report.html`` and a page per task, as
    ``vtb run`` writes them) and return its summary, results and report's path. ``resume=True``
    continues the run in ``out`` (``retry_errors=True`` also runs again the episodes an infrastructure
    failure left ungraded). Errors name these keywords, not ``vtb run``'s flags.

    ``strategy`` is a name, ``module:function`` or a :class:`Strategy`; ``agent`` is your own agent
    instead: a factory taking the episode's tools (it gets them bound to each task's sandbox), or a
    ready Runnable (a compiled graph), which must already hold exactly the run's tools by name
    (:mod:`vtb_agents.strategies.agent`). ``model``
    and ``judge`` are specs or LangChain chat models (``judge`` also a judge object, see
    :class:`~vtb_agents.judges.RubricJudge`); ``tools`` are tool objects or ``module:attr`` specs added
    to the tool set (``judge``, ``strategy`` and the ``sandbox`` option take ``module:attr`` too,
    docs/how-to/write-a-plugin.md).
    ``run.json`` records objects by name (``object:ChatOpenAI(model=gpt-4o)``): such a run resumes
    from Python only. ``options`` are ``vtb run``'s settings by their Python names
    (``max_tool_rounds``, ``prompt_level``, ``history``, ``no_tools``, ``critical_rule``, ``epochs``, ...).
    Inside a running event loop (Jupyter) the run goes to a worker thread; ``await aevaluate(...)``
    there keeps the loop free.

    Before anything is written, every part of the run is built once and checked
    (docs/how-to/doctor.md): a part that fails raises :class:`~vtb_agents.runner.preflight.PreflightError`
    (a RuntimeError) naming it and the cause; a spec that cannot be loaded raises ValueError.

    ``model=[...]`` (specs or chat models) runs every model at once, one run directory each under
    ``out``, as ``vtb run --model A --model B`` does (docs/how-to/many-models.md), and returns the
    :class:`Evaluations` with the leaderboard.
    """
    from vtb_agents.config import run_config
    from vtb_agents.report import preparing_report, write_report
    from vtb_agents.runner.executors import LocalExecutor
    from vtb_agents.runner.run import run_suite

    if isinstance(model, list):
        return evaluate_models(strategy, tasks, model, judge, out, agent=agent, tools=tools, concurrency=concurrency,
                               resume=resume, retry_errors=retry_errors, **options)
    objects, names = run_objects(strategy, model, judge, agent, tools)
    if objects.model is not None and options.get("model_kwargs"):
        raise ValueError("model_kwargs set a spec's chat-model settings: configure the model object itself")
    task_list = load_tasks(tasks) if isinstance(tasks, (str, Path)) else list(tasks)
    config = run_config(tasks=tasks if isinstance(tasks, str) else "python", **names, **options)
    run_dir = Path(out) if out is not None else default_run_dir()
    if out is None:
        print(f"vtb_agents.evaluate: writing the run to {run_dir.resolve()}", file=sys.stderr)

    def run() -> Evaluation:
        try:
            with preparing_report(run_dir, task_list) as progress:
                summary = run_suite(task_list, config, run_dir, resume=resume, executor=LocalExecutor(concurrency),
                                    objects=objects, progress=progress, retry_errors=retry_errors)
        except RunError as exc:  # the same error, its message in evaluate()'s terms
            exc.args = (in_python_terms(str(exc)), *exc.args[1:])
            raise
        report = write_report(run_dir, tasks=task_list)
        wanted = {t.id for t in task_list}
        results = [r for r in ResultsStore(run_dir).load()[0] if r.task_id in wanted]
        return Evaluation.model_validate({**summary.model_dump(), "results": results, "report": report})

    if not loop_running():
        return run()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="vtb-evaluate") as worker:
        return worker.submit(contextvars.copy_context().run, run).result()


def evaluate_models(strategy: str | Strategy, tasks: str | list[Task], models: list[str | BaseChatModel],
                    judge: JudgeLike, out: str | Path | None, *, agent: AgentLike | None,
                    tools: Sequence[BaseTool | str], concurrency: int, resume: bool, retry_errors: bool,
                    **options: Any) -> Evaluations:
    """:func:`evaluate` of several ``models`` (:mod:`vtb_agents.runner.many`): planned and checked all
    before any runs, run at once (``concurrency`` each), each run's report written, then the leaderboard.
    The first error of a model's run is raised once every run has stopped (in :func:`evaluate`'s terms)."""
    from vtb_agents.config import run_config
    from vtb_agents.report import preparing_report, write_report
    from vtb_agents.report.leaderboard import write_leaderboard_page
    from vtb_agents.rundir.leaderboard import leaderboard_of, write_leaderboard
    from vtb_agents.runner.executors import LocalExecutor
    from vtb_agents.runner.many import plan_models, run_models

    if not models:
        raise ValueError("model=[] names no model: give one or more")
    chosen = [run_objects(strategy, model, judge, agent, tools) for model in models]
    if any(objects.model is not None for objects, _ in chosen) and options.get("model_kwargs"):
        raise ValueError("model_kwargs set a spec's chat-model settings: configure the model object itself")
    task_list = load_tasks(tasks) if isinstance(tasks, (str, Path)) else list(tasks)
    base = run_config(tasks=tasks if isinstance(tasks, str) else "python", **chosen[0][1], **options)
    folder = Path(out) if out is not None else default_run_dir()
    specs = [names["model"] for _, names in chosen]
    planned = plan_models(base, specs, folder, objects={names["model"]: objects for objects, names in chosen},
                          resume=resume)
    if out is None:
        print(f"vtb_agents.evaluate: writing the runs to {folder.resolve()}", file=sys.stderr)

    def run() -> Evaluations:
        with ExitStack() as preparing:
            progress = {spec: preparing.enter_context(preparing_report(path, task_list))
                        for spec, path in planned.dirs.items()}
            runs = run_models(task_list, planned, resume=resume, executor=lambda: LocalExecutor(concurrency),
                              progress=progress, retry_errors=retry_errors)
        for spec, done in runs.items():
            if done.error is not None:
                if isinstance(done.error, RunError):
                    done.error.args = (in_python_terms(f"model {spec}: {done.error}"), *done.error.args[1:])
                raise done.error
        wanted = {t.id for t in task_list}
        evaluations: dict[str, Evaluation] = {}
        for spec, done in runs.items():
            assert done.summary is not None  # a run that raised nothing wrote its summary
            results = [r for r in ResultsStore(done.run_dir).load()[0] if r.task_id in wanted]
            evaluations[spec] = Evaluation.model_validate({**done.summary.model_dump(), "results": results,
                                                           "report": write_report(done.run_dir, tasks=task_list)})
        board = leaderboard_of(folder, planned.dirs)
        write_leaderboard(folder, board)
        return Evaluations.model_validate({**board.model_dump(), "runs": evaluations,
                                           "page": write_leaderboard_page(folder, board)})

    if not loop_running():
        return run()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="vtb-evaluate") as worker:
        return worker.submit(contextvars.copy_context().run, run).result()


def loop_running() -> bool:
    """Whether this thread runs an event loop (a notebook's), where the runner's own loop cannot start."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def off_the_loop(function: Callable[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
    """The async twin of ``function``: it runs in a worker thread, leaving the caller's loop free."""

    async def twin(*args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(function, *args, **kwargs)

    return twin


aevaluate = off_the_loop(evaluate)
aevaluate.__name__ = aevaluate.__qualname__ = "aevaluate"
aevaluate.__doc__ = """:func:`evaluate` for async code (notebooks, servers): ``await aevaluate(...)`` takes the same
arguments and returns the same :class:`Evaluation`, running the run in a worker thread."""
