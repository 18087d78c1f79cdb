"""The ``vtb`` command as a click command, for the docs' CLI reference (``mkdocs-click`` in docs/reference/cli.md):
typer's app turned into the click group it runs as, so every command and option is documented from the code."""

import typer

from vtb_agents.cli import app

cli = typer.main.get_command(app)
