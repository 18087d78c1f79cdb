"""Console helpers shared by the ``vtb`` command modules: output, clear errors, loading tasks."""

from __future__ import annotations

import logging
from typing import TypeVar

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape

from vtb_agents.tasks.errors import TaskLoadError
from vtb_agents.tasks.model import Task
from vtb_agents.tasks.sources import load_tasks

Choice = TypeVar("Choice", bound=str)

out = Console()
err = Console(stderr=True)


def fail(message: str, code: int = 2) -> None:
    """Print ``message`` as an error and exit with ``code``."""
    print_error(message)
    raise typer.Exit(code)


def print_error(message: str) -> None:
    """Print ``message`` as one ``error:`` line on stderr (its own leading ``error: `` dropped)."""
    message = message.removeprefix("error: ")  # a task error's own text starts with its severity
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True, markup=True)


def unexpected_error_line(exc: BaseException) -> str:
    """The one line shown for an error no command handled itself: a file system error (read-only
    folder, disk full, permission) or input nested too deeply for Python."""
    if isinstance(exc, RecursionError):
        return f"input nested too deeply to process ({exc})"
    return f"cannot read or write files: {exc}" if isinstance(exc, OSError) else f"storage failed: {exc}"


def load_or_fail(spec: str) -> list[Task]:
    """The tasks of ``spec``, or exit with the first load error and a hint."""
    try:
        return load_tasks(spec)
    except (TaskLoadError, FileNotFoundError, ValueError) as exc:
        fail(f"{exc}\n(run `vtb tasks validate {spec}` to see every problem)")
        raise  # unreachable: fail() exits


def configure_logging(verbosity: int) -> None:
    """Show the package's log messages on stderr: ``-v`` its INFO lines (network retries, sandbox
    clean-up), ``-vv`` also DEBUG. Without ``-v`` logging stays as Python leaves it (warnings only)."""
    if verbosity <= 0:
        return
    handler = RichHandler(console=err, show_path=False, markup=False, rich_tracebacks=False)
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


