"""Console helpers shared by the ``vtb`` command modules: the app factory, output, clear errors,
loading tasks.

Kept light: ``vtb --help`` imports every command module, so rich's console, the task model and
everything heavier are imported when a command first needs them.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any, TypeVar

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from vtb_agents.tasks.errors import TaskLoadError
    from vtb_agents.tasks.model import Task

Choice = TypeVar("Choice", bound=str)


def cli_app(**settings: Any) -> typer.Typer:
    """A ``typer.Typer`` for a ``vtb`` command group, with plain click help: typer's rich help
    formatting would import rich's markdown and panels on every ``--help`` (about 70 ms)."""
    return typer.Typer(rich_markup_mode=None, add_completion=False, **settings)


class LazyConsole:
    """A rich ``Console`` made on first use (importing ``rich.console`` is a fifth of ``vtb --help``),
    terminal-safe (:func:`vtb_agents.terminal.safe_console`): no text printed through it writes a raw
    control character. Model- and task-controlled text still goes in through
    :func:`~vtb_agents.terminal.safe_text` or :func:`~vtb_agents.terminal.safe_markup`, which also keep
    it from being read as markup."""

    def __init__(self, *, stderr: bool) -> None:
        self._stderr = stderr

    @functools.cached_property
    def console(self) -> Console:
        """The console itself (for rich objects that take one, e.g. ``Progress``)."""
        from vtb_agents.terminal import safe_console

        return safe_console(stderr=self._stderr)

    def print(self, *objects: Any, **options: Any) -> None:
        """``Console.print``."""
        self.console.print(*objects, **options)


out = LazyConsole(stderr=False)
err = LazyConsole(stderr=True)


def fail(message: str, code: int = 2) -> None:
    """Print ``message`` as an error and exit with ``code``."""
    print_error(message)
    raise typer.Exit(code)


def print_error(message: str) -> None:
    """Print ``message`` as one ``error:`` line on stderr (its own leading ``error: `` dropped); it may
    quote a task or a model, so it is printed terminal-safe (:func:`~vtb_agents.terminal.safe_markup`)."""
    from vtb_agents.terminal import safe_markup

    message = message.removeprefix("error: ")  # a task error's own text starts with its severity
    err.print(f"[bold red]error:[/] {safe_markup(message)}", highlight=False, soft_wrap=True, markup=True)


def unexpected_error_line(exc: BaseException) -> str:
    """The one line shown for an error no command handled itself: a file system error (read-only
    folder, disk full, permission) or input nested too deeply for Python."""
    if isinstance(exc, RecursionError):
        return f"input nested too deeply to process ({exc})"
    return f"cannot read or write files: {exc}" if isinstance(exc, OSError) else f"storage failed: {exc}"


def load_or_fail(spec: str) -> list[Task]:
    """The tasks of ``spec``, or exit with the first load error and a hint."""
    from vtb_agents.tasks.errors import TaskLoadError
    from vtb_agents.tasks.sources import load_tasks

    try:
        return load_tasks(spec)
    except (TaskLoadError, FileNotFoundError, ValueError) as exc:
        fail(f"{exc}\n(run `vtb tasks validate {spec}` to see every problem)")
        raise  # unreachable: fail() exits


def load_items_or_fail(spec: str) -> list[Task | TaskLoadError]:
    """Every task of ``spec`` or the error that stopped it loading; exit if the source itself is unusable."""
    from vtb_agents.tasks.sources import iter_source

    try:
        return list(iter_source(spec))
    except (FileNotFoundError, ValueError) as exc:
        fail(str(exc))
        raise  # unreachable: fail() exits


class SafeLogFormatter(logging.Formatter):
    """A log formatter whose lines are terminal-safe (:func:`vtb_agents.terminal.safe`): a log message
    may quote a model or a task."""

    def format(self, record: logging.LogRecord) -> str:
        from vtb_agents.terminal import safe

        return safe(super().format(record))


def configure_logging(verbosity: int) -> None:
    """Show the package's log messages on stderr: ``-v`` its INFO lines (network retries, sandbox
    clean-up), ``-vv`` also DEBUG. Without ``-v`` logging stays as Python leaves it (warnings only,
    through its handler of last resort, made terminal-safe here)."""
    if verbosity <= 0:
        if logging.lastResort is not None:
            logging.lastResort.setFormatter(SafeLogFormatter())
        return
    from rich.logging import RichHandler

    handler = RichHandler(console=err.console, show_path=False, markup=False, rich_tracebacks=False)
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s", datefmt="[%X]", handlers=[handler],
                        force=True)
    logging.getLogger("vtb_agents").setLevel(logging.INFO if verbosity == 1 else logging.DEBUG)


def check_choice(option: str, value: str, allowed: tuple[str, ...]) -> None:
    """Exit with a clear error unless ``value`` is one of ``allowed``."""
    choice(option, value, allowed)


def choice(option: str, value: str, allowed: tuple[Choice, ...]) -> Choice:
    """``value`` as the member of ``allowed`` it names (typed as their Literal), or exit with a clear error."""
    for member in allowed:
        if member == value:
            return member
    fail(f"{option} must be one of {', '.join(allowed)}, not {value!r}")
    raise AssertionError("unreachable: fail() exits")


