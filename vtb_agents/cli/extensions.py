"""``vtb strategies``, ``vtb tools``, ``vtb judges`` and ``vtb sandboxes``: the names a spec can use, built-in
and installed (entry point groups ``vtb_agents.<kind>``), on ``extensions_cli``, mounted by :mod:`vtb_agents.cli`.

The one command module that reads the extension loader's listing (:func:`vtb_agents.extensions.installed`):
it lists names and decodes no spec; a run's specs are decoded by its plan (:mod:`vtb_agents.runner.plan`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from vtb_agents.cli.common import cli_app, out

if TYPE_CHECKING:
    from vtb_agents.extensions import Kind

extensions_cli = cli_app()


def print_listing(kind: Kind, title: str, builtins: Sequence[tuple[str, str, str]]) -> None:
    """A table of the built-in extensions of ``kind`` (name, what it does, where from) and of those
    installed packages declare (entry point group ``vtb_agents.<kind>``)."""
    from rich.table import Table

    from vtb_agents.extensions import LABELS, installed

    table = Table(LABELS[kind], "what it is", "from", title=title)
    for row in builtins:
        table.add_row(*row)
    for extension in installed(kind):
        table.add_row(extension.name, extension.value, f"installed: {extension.package}")
    out.print(table)


@extensions_cli.command("strategies")
def strategies() -> None:
    """List the strategies (turn policies) for --strategy, built-in and installed, one line each."""
    from vtb_agents.strategies import BUILTIN

    print_listing("strategies", "strategies (--strategy NAME, or module:function)",
                  [(s.name, s.summary, s.source) for s in BUILTIN.values()])


@extensions_cli.command("tools")
def tools() -> None:
    """List the agent's tools, built-in and installed (--tool NAME adds an installed one)."""
    from vtb_agents.tools import select_tools

    print_listing("tools", "tools (built-in ones are always offered; --tool NAME or module:attr adds one)",
                  [(t.name, t.description.split(". ")[0].strip(), "built-in") for t in select_tools()])


@extensions_cli.command("judges")
def judges() -> None:
    """List the judges for --judge, built-in and installed."""
    print_listing("judges", "judges (--judge NAME, provider:model, a preset, or package.module:attr)",
                  [("rule", "deterministic checks only; other rubrics stay unjudged", "built-in"),
                   ("provider:model", "an LLM judge (a preset works too: `vtb models`)", "built-in")])


@extensions_cli.command("sandboxes")
def sandboxes() -> None:
    """List the sandbox backends for --sandbox, built-in and installed."""
    print_listing("sandboxes", "sandboxes (--sandbox NAME, or module:Class)",
                  [("local", "a worker process on this machine (bubblewrap isolation where available)", "built-in"),
                   ("e2b", "an E2B cloud sandbox (the 'e2b' extra and E2B_API_KEY)", "built-in")])
