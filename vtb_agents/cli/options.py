"""The run options ``vtb run`` and ``vtb ablate`` share, defined once.

:func:`with_run_options` adds every shared option to a command (its ``--help`` lists them) and
hands the command one :class:`RunOptions`; :meth:`RunOptions.config` turns them into a
``RunConfig`` through :func:`vtb_agents.runner.config.run_config`, the builder the Python API and
Studio use too. The options' defaults are the constants of :mod:`vtb_agents.defaults`, which
``RunConfig`` names too (one definition each), so declaring them imports neither the runner nor LangChain.
"""

from __future__ import annotations

import functools
import inspect
import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, TypeVar

import typer

from vtb_agents import defaults
from vtb_agents.cli.common import check_choice, err, fail, load_items_or_fail

if TYPE_CHECKING:  # loaded when a command runs, not by `vtb --help`
    from vtb_agents.runner.config import RunConfig
    from vtb_agents.tasks.errors import TaskLoadError
    from vtb_agents.tasks.model import Task

F = TypeVar("F", bound=Callable[..., Any])

JUDGE = typer.Option(defaults.DEFAULT_JUDGE, help="'rule' (deterministic checks only) or 'provider:model' (LLM judge).")
CRITICAL = typer.Option(defaults.DEFAULT_CRITICAL_RULE, help="Critical rubrics by 'weight' (>= 4), 'flag' or 'either'.")
REQUEST_TIMEOUT = typer.Option(defaults.DEFAULT_REQUEST_TIMEOUT_S, min=0.001,
                               help="Seconds a model or judge HTTP request may take (never past the task's "
                                    "--task-timeout).")
RESUME = typer.Option(False, "--resume", help="Continue the run in --out, skipping finished tasks.")

_FLAGS = {"requests_per_second": "--rps", "request_timeout_s": "--request-timeout", "task_timeout_s": "--task-timeout"}


def flag(option: str) -> str:
    """The ``vtb run`` flag of a run option (``request_timeout_s`` -> ``--request-timeout``)."""
    return _FLAGS.get(option, "--" + option.replace("_", "-"))


@dataclass(frozen=True)
class RunOptions:
    """The options of ``vtb run`` that every run of a command shares (``vtb ablate`` runs several)."""

    tasks: str
    model: str
    judge: str
    strategy: str
    model_kwargs: Optional[str]
    resume: bool
    retry_errors: bool
    concurrency: int
    limit: Optional[int]
    category: list[str]
    task_id: list[str]
    status: list[str]
    skip_invalid: bool
    max_tool_rounds: int
    history: str
    critical_rule: str
    resumer: str
    user_model: Optional[str]
    native_tool_images: bool
    max_image_side: int
    sandbox: str
    sandbox_strict: bool
    sandbox_network: bool
    rps: Optional[float]
    task_timeout: Optional[float]
    request_timeout: float
    tools_mode: Optional[str]
    tools_cache: Optional[Path]
    executor: str
    ray_address: Optional[str]

    def config(self, **settings: Any) -> RunConfig:
        """The run's ``RunConfig`` (``settings``: what the command itself adds, e.g. ``prompt_level``);
        a bad value exits with an error naming its flag."""
        from vtb_agents.runner.config import RunOptionError, run_config

        if self.retry_errors and not self.resume:
            fail("--retry-errors needs --resume (it re-runs the failed tasks of an existing run)")
        try:
            return run_config(
                model=self.model, judge=self.judge, tasks=self.tasks, strategy=self.strategy,
                model_kwargs=parse_model_kwargs(self.model_kwargs, self.model), critical_rule=self.critical_rule,
                resumer=self.resumer, user_model=self.user_model, sandbox=self.sandbox,
                sandbox_strict=self.sandbox_strict, sandbox_network=self.sandbox_network,
                tools_mode=self.tools_mode, tools_cache=str(self.tools_cache) if self.tools_cache else None,
                requests_per_second=self.rps, request_timeout_s=self.request_timeout,
                max_tool_rounds=self.max_tool_rounds, history=self.history,
                native_tool_images=self.native_tool_images, max_image_side=self.max_image_side,
                task_timeout_s=self.task_timeout, **settings)
        except RunOptionError as exc:
            fail(exc.render(flag))
            raise  # unreachable: fail() exits

    def selected_tasks(self) -> list[Task]:
        """The tasks of ``--tasks`` filtered by ``--category``, ``--task-id`` and ``--status``, cut to
        ``--limit`` and validated: invalid ones refuse the run (or are skipped, ``--skip-invalid``)."""
        return select_tasks(self.tasks, self.category, self.task_id, self.limit, status=self.status,
                            skip_invalid=self.skip_invalid)

    def make_executor(self) -> Any:
        """The executor of ``--executor``: local threads, or Ray actors (the ``ray`` extra)."""
        return make_executor(self.executor, self.ray_address, self.concurrency)


def _shared(
    tasks: str = typer.Option(defaults.SAMPLE, help="Task source: 'sample', a folder, parquet, 'hf:...'."),
    model: str = typer.Option(defaults.REPLAY, help="'replay', a preset (`vtb models`), 'provider:model' "
                                                    "(init_chat_model) or 'agent:module:function'."),
    judge: str = JUDGE,
    strategy: str = typer.Option(defaults.DEFAULT_STRATEGY, help="Turn policy: react, zoom, marks, plan, reflect (see "
                                                         "'vtb strategies'), or 'module:function' for your own."),
    model_kwargs: Optional[str] = typer.Option(None, "--model-kwargs", help="JSON object of extra chat-model "
                                               "settings, e.g. '{\"reasoning_effort\": \"low\"}' or a base_url."),
    resume: bool = RESUME,
    retry_errors: bool = typer.Option(False, "--retry-errors", help="With --resume: run again the tasks that "
                                      "infrastructure failures (provider, sandbox, storage) left ungraded."),
    concurrency: int = typer.Option(1, min=1, help="Tasks run at once."),
    limit: Optional[int] = typer.Option(None, min=1, help="Run at most this many tasks."),
    category: list[str] = typer.Option([], help="Only these categories (repeatable)."),
    task_id: list[str] = typer.Option([], "--task-id", help="Only these task ids (repeatable)."),
    status: list[str] = typer.Option([], "--status", help="Only tasks whose review status is this: draft, reviewed "
                                     "or accepted (repeatable; tasks without a review block have none)."),
    skip_invalid: bool = typer.Option(False, "--skip-invalid", help="Run the tasks that pass validation and list "
                                      "the skipped ones (default: any invalid task refuses the run)."),
    max_tool_rounds: int = typer.Option(defaults.DEFAULT_MAX_TOOL_ROUNDS, min=1, help="Tool rounds allowed per turn."),
    history: str = typer.Option(defaults.DEFAULT_HISTORY, help="Earlier assistant turns: the 'golden' answers or the "
                                                       "'model''s own."),
    critical_rule: str = CRITICAL,
    resumer: str = typer.Option(defaults.DEFAULT_RESUMER, help="Who answers clarifying questions: scripted, simulated, "
                                                       "human."),
    user_model: Optional[str] = typer.Option(None, help="provider:model of the simulated user."),
    native_tool_images: bool = typer.Option(defaults.DEFAULT_NATIVE_TOOL_IMAGES, help="Put new images inside tool "
                                            "results (Anthropic, Responses API)."),
    max_image_side: int = typer.Option(defaults.DEFAULT_MAX_IMAGE_SIDE, min=64, help="Images sent to the model are "
                                       "downscaled to this longer side."),
    sandbox: str = typer.Option(defaults.DEFAULT_SANDBOX, help="Where code runs: local or e2b."),
    sandbox_strict: bool = typer.Option(False, "--sandbox-strict", help="Refuse to run code without full "
                                        "isolation (bwrap)."),
    sandbox_network: bool = typer.Option(False, "--sandbox-network", help="Let the E2B sandbox reach the "
                                         "internet (off by default; recorded in the results)."),
    rps: Optional[float] = typer.Option(None, min=0.001, help="At most this many model requests per second."),
    task_timeout: Optional[float] = typer.Option(None, min=0.001, help="Seconds a task's episode may take: "
                                                 "checked at every model call, tool call and graph step (agent: "
                                                 "runs too); stops running code."),
    request_timeout: float = REQUEST_TIMEOUT,
    tools_mode: Optional[str] = typer.Option(None, help="Network tools: live, record or replay (default: "
                                             "replay for 'sample', else live)."),
    tools_cache: Optional[Path] = typer.Option(None, help="Record/replay cassette of the network tools."),
    executor: str = typer.Option("local", help="Where tasks run: 'local' (threads here) or 'ray' (Ray actors)."),
    ray_address: Optional[str] = typer.Option(None, help="Ray cluster to join (default: a new local instance, "
                                              "or RAY_ADDRESS)."),
) -> None:
    """The shared options, as a signature (typer reads it; :func:`with_run_options` splices it in)."""


def with_run_options(command: F) -> F:
    """Give ``command`` every shared run option; it receives them as ``options: RunOptions``.

    Its own parameters follow the shared ones in ``--help``.
    """
    shared = list(inspect.signature(_shared, eval_str=True).parameters.values())
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "options"]
    names = {f.name for f in fields(RunOptions)}
    if [p.name for p in shared] != [f.name for f in fields(RunOptions)]:
        raise TypeError("RunOptions and the shared option signature disagree")  # a developer's slip

    @functools.wraps(command)
    def with_options(**kwargs: Any) -> Any:
        options = RunOptions(**{name: kwargs.pop(name) for name in list(kwargs) if name in names})
        return command(options=options, **kwargs)

    parameters = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in shared + own]
    with_options.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    with_options.__annotations__ = {p.name: p.annotation for p in parameters}
    return with_options  # type: ignore[return-value]


def parse_model_kwargs(text: str | None, model: str) -> dict[str, Any] | None:
    """The ``--model-kwargs`` JSON object, or exit with a clear error (it needs a chat model)."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"--model-kwargs is not valid JSON: {exc.msg} (at character {exc.pos})")
    if not isinstance(value, dict):
        fail(f"--model-kwargs must be a JSON object, got {type(value).__name__}")
    if model == defaults.REPLAY or model.startswith(defaults.AGENT_PREFIX):
        fail(f"--model-kwargs needs a chat model (a preset or provider:model), not {model!r}")
    return value


def select_tasks(spec: str, category: list[str], task_id: list[str], limit: int | None, *,
                 status: Sequence[str] = (), skip_invalid: bool = False) -> list[Task]:
    """The tasks of ``spec`` filtered by category, id and review status, cut to ``limit``, then validated
    (:func:`~vtb_agents.tasks.validate.screen_tasks`) before anything runs: an invalid task exits
    naming every error of every such task, or with ``skip_invalid`` is left out and listed. A task
    that cannot be loaded counts as invalid (it is filtered by id only). Exit if none is left."""
    from vtb_agents.tasks.errors import TaskLoadError
    from vtb_agents.tasks.model import REVIEW_STATUSES
    from vtb_agents.tasks.validate import screen_tasks

    for value in status:
        check_choice("--status", value, REVIEW_STATUSES)
    items = load_items_or_fail(spec)
    if task_id:
        known = {item.problem.task_id if isinstance(item, TaskLoadError) else item.id for item in items}
        missing = sorted(set(task_id) - known)
        if missing:
            fail(f"no task(s) {', '.join(missing)} in {spec}")
    items = [item for item in items if _selected(item, set(category), set(task_id), set(status))]
    items = items[:limit] if limit else items
    screening = screen_tasks(items)
    if screening.rejected:
        for problem in (p for problems in screening.rejected.values() for p in problems):
            err.print(str(problem), highlight=False, soft_wrap=True, markup=False)
        names = ", ".join(repr(task) for task in screening.rejected)
        if not skip_invalid:
            fail(f"{len(screening.rejected)} task(s) fail validation, nothing was run: {names}\n"
                 f"(fix them, see `vtb tasks validate {spec}`, or pass --skip-invalid to run the others)")
        err.print(f"skipped {len(screening.rejected)} invalid task(s): {names}", highlight=False, soft_wrap=True,
                  markup=False)
    if not screening.tasks:
        fail("no tasks selected" + (f" (review status {', '.join(status)}: tasks without a review block have none)"
                                    if status else ""))
    return screening.tasks


def _selected(item: Task | TaskLoadError, category: set[str], task_id: set[str], status: set[str]) -> bool:
    """Whether ``item`` passes the filters; a task that failed to load passes all but the id filter."""
    from vtb_agents.tasks.errors import TaskLoadError

    if isinstance(item, TaskLoadError):
        return not task_id or item.problem.task_id in task_id
    return ((not category or item.category in category) and (not task_id or item.id in task_id)
            and (not status or item.review is not None and item.review.status in status))


def make_executor(kind: str, ray_address: str | None, concurrency: int) -> Any:
    """The executor for ``--executor``: local threads, or Ray actors (the ``ray`` extra)."""
    from vtb_agents.runner.executors import LocalExecutor

    check_choice("--executor", kind, ("local", "ray"))
    if ray_address and kind != "ray":
        fail("--ray-address needs --executor ray")
    if kind == "local":
        return LocalExecutor(concurrency)
    try:
        from vtb_agents.runner.ray_executor import RayExecutor
    except ImportError as exc:
        fail(f"{exc} (install the 'ray' extra: pip install 'vtb-agents[ray]')")
    return RayExecutor(address=ray_address, concurrency=concurrency)

