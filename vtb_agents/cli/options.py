"""The run options ``vtb run`` and ``vtb ablate`` share, defined once.

Every setting of a run is a field of :class:`~vtb_agents.config.RunConfig`; :data:`CONFIG_FLAGS` is
the one table mapping each field to its ``vtb`` flag (:data:`NOT_FLAGS` lists the few no flag
gives), and an option's type, help and default are its field's type, description and default. So a
new setting is one field and one row: its option is made from them (:func:`setting_parameter`;
``tests/test_cli_options.py`` checks table, fields and flags agree). :func:`with_run_options` adds
every shared option to a command (its ``--help`` lists them)
and hands the command one :class:`RunOptions`; :meth:`RunOptions.config` turns them into a
``RunConfig`` through :func:`vtb_agents.config.run_config`, the builder the Python API uses too.
Declaring them reads the fields as :mod:`vtb_agents.cli.run_settings` derived them from the model
(so ``vtb --help`` imports neither pydantic nor :mod:`vtb_agents.config`); a command that runs
builds the ``RunConfig``.
"""

from __future__ import annotations

import functools
import inspect
import json
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, TypeVar

import typer

from vtb_agents.cli.common import check_choice, err, fail, load_items_or_fail
from vtb_agents.cli.run_settings import run_settings

if TYPE_CHECKING:  # loaded when a command runs, not by `vtb --help`
    from vtb_agents.config import RunConfig
    from vtb_agents.tasks.model import Task

F = TypeVar("F", bound=Callable[..., Any])

CONFIG_FLAGS: dict[str, str] = {
    "tasks": "--tasks", "model": "--model", "judge": "--judge", "strategy": "--strategy",
    "model_kwargs": "--model-kwargs", "max_tool_rounds": "--max-tool-rounds", "history": "--history",
    "critical_rule": "--critical-rule", "resumer": "--resumer", "user_model": "--user-model",
    "native_tool_images": "--native-tool-images", "max_image_side": "--max-image-side", "sandbox": "--sandbox",
    "sandbox_strict": "--sandbox-strict", "sandbox_network": "--sandbox-network", "requests_per_second": "--rps",
    "max_connections": "--max-connections", "code_timeout_s": "--code-timeout",
    "task_timeout_s": "--task-timeout", "request_timeout_s": "--request-timeout", "tools_mode": "--tools-mode",
    "tools_cache": "--tools-cache", "extra_tools": "--tool", "epochs": "--epochs", "model_cache": "--model-cache",
    "model_cache_only": "--model-cache-only", "prompt_cache": "--prompt-cache", "judge_batch": "--judge-batch",
    "cost_limit": "--cost-limit", "token_limit": "--token-limit", "task_token_limit": "--task-token-limit",
    # `vtb run`'s own (`vtb ablate` sets them per condition)
    "prompt_level": "--prompt-level", "no_tools": "--no-tools", "no_vision_tool": "--no-vision-tool",
}
"""The ``vtb`` flag of every run setting (a field of ``RunConfig`` or of its ``EpisodeSettings``)."""
NOT_FLAGS: dict[str, str] = {
    "tags": "trace tags are for runs made from Python (vtb ablate tags its conditions itself)",
}
"""The run settings no flag gives, and why (a run with them set cannot be resumed from the CLI)."""


def config_default(option: str) -> Any:
    """The default of the run setting ``option`` (flat: a ``RunConfig`` or ``EpisodeSettings`` field)."""
    return run_settings()[option].default


def config_help(option: str) -> str:
    """The help of the run setting ``option``: its field's description."""
    return run_settings()[option].help


def config_option(option: str, *names: str, **extra: Any) -> Any:
    """The typer option of the run setting ``option``: its flag (or ``names``), help and default."""
    return typer.Option(config_default(option), *(names or (CONFIG_FLAGS[option],)), help=config_help(option),
                        **extra)


REQUEST_TIMEOUT = config_option("request_timeout_s", min=0.001)
RESUME = typer.Option(False, "--resume", help="Continue the run in --out, skipping finished tasks.")


def flag(option: str) -> str:
    """The ``vtb run`` flag of a run setting or option (``request_timeout_s`` -> ``--request-timeout``)."""
    return CONFIG_FLAGS.get(option, "--" + option.replace("_", "-"))


RUN_ONLY = ("prompt_level", "no_tools", "no_vision_tool")
"""Settings only ``vtb run`` takes as flags (``vtb ablate`` sets them per condition)."""
SHARED_SETTINGS = tuple(name for name in CONFIG_FLAGS if name not in RUN_ONLY)
"""The settings whose flags ``vtb run`` and ``vtb ablate`` share, made from :data:`CONFIG_FLAGS`."""


@dataclass(frozen=True)
class RunOptions:
    """The options of ``vtb run`` that every run of a command shares (``vtb ablate`` runs several):
    the run settings given (``settings``, by ``RunConfig`` field name) and how to select and run tasks."""

    settings: dict[str, Any]
    resume: bool
    retry_errors: bool
    concurrency: int
    limit: Optional[int]
    category: list[str]
    task_id: list[str]
    status: list[str]
    skip_invalid: bool
    executor: str
    workers: Optional[int]
    ray_address: Optional[str]
    models: tuple[str, ...] = ()
    """Every ``--model`` given, in order (``settings["model"]`` is the first): more than one is a
    many-model run (docs/how-to/many-models.md)."""

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> RunOptions:
        """The shared options among a command's parsed ``params`` (the others are left out)."""
        names = [f.name for f in fields(cls) if f.name not in ("settings", "models")]
        models = tuple(params["model"]) or (config_default("model"),)
        settings = {**{name: params[name] for name in SHARED_SETTINGS}, "model": models[0]}
        return cls(settings=settings, models=models, **{name: params[name] for name in names})

    @property
    def tasks(self) -> str:
        """The task source, ``--tasks``."""
        return str(self.settings["tasks"])

    def config(self, **settings: Any) -> RunConfig:
        """The run's ``RunConfig`` (``settings``: what the command itself adds, e.g. ``prompt_level``);
        a bad value exits with an error naming its flag."""
        from vtb_agents.config import RunOptionError, run_config

        if self.retry_errors and not self.resume:
            fail("--retry-errors needs --resume (it re-runs the failed tasks of an existing run)")
        given = {**self.settings, "model_kwargs": parse_model_kwargs(self.settings["model_kwargs"])}
        try:
            return run_config(**given, **settings)
        except RunOptionError as exc:
            fail(exc.render(flag))
            raise  # unreachable: fail() exits

    def selected_tasks(self) -> list[Task]:
        """The tasks of ``--tasks`` filtered by ``--category``, ``--task-id`` and ``--status``, cut to
        ``--limit`` and validated: invalid ones refuse the run (or are skipped, ``--skip-invalid``)."""
        return select_tasks(self.tasks, self.category, self.task_id, self.limit, status=self.status,
                            skip_invalid=self.skip_invalid)

    def make_executor(self, prestart: bool = False) -> Any:
        """The executor of ``--executor``: local threads, local processes, or Ray actors (the ``ray``
        extra). ``prestart``: local processes start now (they load the libraries meanwhile)."""
        return make_executor(self.executor, self.ray_address, self.concurrency, self.workers, prestart)


def setting_parameter(option: str) -> inspect.Parameter:
    """The command-line parameter of the run setting ``option``: flag, help and default from
    :func:`config_option`, its type from the field's (:class:`~vtb_agents.cli.run_settings.RunSetting`:
    a choice or JSON object is text, checked when the config is built), and a lower bound where the
    field has one (``ge``)."""
    setting = run_settings()[option]
    if setting.type == "list" or option == "model":  # a repeatable flag (--tool; --model: one run per model)
        return inspect.Parameter(option, inspect.Parameter.KEYWORD_ONLY, annotation=list[str],
                                 default=typer.Option([], CONFIG_FLAGS[option], help=config_help(option),
                                                      show_default=str(config_default(option)) if option == "model"
                                                      else False))
    core = {"str": str, "int": int, "float": float, "bool": bool}[setting.type]
    bounds = {"min": setting.minimum} if setting.minimum is not None else {}
    return inspect.Parameter(option, inspect.Parameter.KEYWORD_ONLY, default=config_option(option, **bounds),
                             annotation=Optional[core] if setting.optional else core)


def _shared(
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
    executor: str = typer.Option("local", help="Where tasks run: 'local' (threads here), 'processes' (several "
                                 "local processes, each running its share of --concurrency in threads) or 'ray' "
                                 "(Ray actors)."),
    workers: Optional[int] = typer.Option(None, min=1, help="With --executor processes: how many processes (default: "
                                          "one per 32 tasks of --concurrency, at least 1, at most the cores); "
                                          "with --executor ray: how many actors (default: one per node with CPUs)."),
    ray_address: Optional[str] = typer.Option(None, help="Ray cluster to join (default: a new local instance, "
                                              "or RAY_ADDRESS)."),
) -> None:
    """The shared options that are no run setting, as a signature (typer reads it;
    :func:`with_run_options` splices it in after the settings' own, :func:`setting_parameter`)."""


def with_run_options(command: F) -> F:
    """Give ``command`` every shared run option; it receives them as ``options: RunOptions``.

    Its own parameters follow the shared ones in ``--help``.
    """
    shared = [*map(setting_parameter, SHARED_SETTINGS), *inspect.signature(_shared, eval_str=True).parameters.values()]
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "options"]
    names = {p.name for p in shared}

    @functools.wraps(command)
    def with_options(**kwargs: Any) -> Any:
        options = RunOptions.from_params({name: kwargs.pop(name) for name in list(kwargs) if name in names})
        return command(options=options, **kwargs)

    parameters = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in shared + own]
    with_options.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    with_options.__annotations__ = {p.name: p.annotation for p in parameters}
    return with_options  # type: ignore[return-value]


def parse_model_kwargs(text: str | None) -> dict[str, Any] | None:
    """The ``--model-kwargs`` JSON object, or exit with a clear error (whether the model takes them is
    the run's plan's to say, :func:`vtb_agents.runner.plan.plan_records`)."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        fail(f"--model-kwargs is not valid JSON: {exc.msg} (at character {exc.pos})")
    if not isinstance(value, dict):
        fail(f"--model-kwargs must be a JSON object, got {type(value).__name__}")
    return value


def select_tasks(spec: str, category: list[str], task_id: list[str], limit: int | None, *,
                 status: Sequence[str] = (), skip_invalid: bool = False) -> list[Task]:
    """The tasks of ``spec`` filtered by category, id and review status, cut to ``limit``, then validated
    (:func:`~vtb_agents.tasks.validate.screen_tasks`) before anything runs: an invalid task exits
    naming every error of every such task, or with ``skip_invalid`` is left out and listed. A task
    that cannot be loaded counts as invalid (it is filtered by id only). Exit if none is left."""
    from vtb_agents.tasks.model import REVIEW_STATUSES
    from vtb_agents.tasks.select import TaskFilter
    from vtb_agents.tasks.validate import screen_tasks
    from vtb_agents.terminal import safe

    for value in status:
        check_choice("--status", value, REVIEW_STATUSES)
    items = load_items_or_fail(spec)
    chosen = TaskFilter(categories=frozenset(category), task_ids=frozenset(task_id), statuses=frozenset(status),
                        limit=limit)
    missing = chosen.missing_ids(items)
    if missing:
        fail(f"no task(s) {', '.join(missing)} in {spec}")
    items = chosen.apply(items)
    screening = screen_tasks(items)
    if screening.rejected:
        for problem in (p for problems in screening.rejected.values() for p in problems):
            err.print(safe(str(problem)), highlight=False, soft_wrap=True, markup=False)
        names = ", ".join(repr(task) for task in screening.rejected)
        if not skip_invalid:
            fail(f"{len(screening.rejected)} task(s) fail validation, nothing was run: {names}\n"
                 f"(fix them, see `vtb tasks validate {spec}`, or pass --skip-invalid to run the others)")
        err.print(safe(f"skipped {len(screening.rejected)} invalid task(s): {names}"), highlight=False,
                  soft_wrap=True, markup=False)
    if not screening.tasks:
        fail("no tasks selected" + (f" (review status {', '.join(status)}: tasks without a review block have none)"
                                    if status else ""))
    return screening.tasks


def make_executor(kind: str, ray_address: str | None, concurrency: int, workers: int | None = None,
                  prestart: bool = False) -> Any:
    """The executor for ``--executor``: local threads, local processes (``--workers``; started now
    with ``prestart``, so that they load the libraries while the run gets ready), or Ray actors (the
    ``ray`` extra; ``--workers`` actors, default one per node with CPUs)."""
    from vtb_agents.runner.executors import LocalExecutor

    check_choice("--executor", kind, ("local", "processes", "ray"))
    if ray_address and kind != "ray":
        fail("--ray-address needs --executor ray")
    if workers is not None and kind == "local":
        fail("--workers needs --executor processes or ray")
    if kind == "local":
        return LocalExecutor(concurrency)
    if kind == "processes":
        from vtb_agents.runner.process_executor import ProcessExecutor

        processes = ProcessExecutor(concurrency, workers)
        if prestart:
            processes.prestart()
        return processes
    try:
        from vtb_agents.runner.ray_executor import RayExecutor
    except ImportError as exc:
        fail(f"{exc} (install the 'ray' extra: pip install 'vtb-agents[ray]')")
    return RayExecutor(address=ray_address, concurrency=concurrency, workers=workers)
