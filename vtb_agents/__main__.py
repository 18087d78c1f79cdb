"""``python -m vtb_agents``: the ``vtb`` command."""

from vtb_agents.cli import main

main()
