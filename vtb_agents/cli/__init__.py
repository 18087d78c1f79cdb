"""The ``vtb`` command (``vtb = "vtb_agents.cli:main"``; ``python -m vtb_agents`` runs it too).

``root.py`` holds the app, the ``tasks`` commands and mounts the others: ``run.py`` (``vtb run``,
``vtb ablate``, ``vtb grade``), ``extensions.py`` (``vtb strategies``, ``tools``, ``judges``,
``sandboxes``), ``options.py`` (the run options those share), ``report.py``,
``analyze.py``, ``annotate.py``, ``authoring.py``, ``langsmith.py``, ``models.py``,
``sandbox.py``; ``common.py`` has the console and error helpers.
"""

from vtb_agents.cli.root import app, main

__all__ = ["app", "main"]
