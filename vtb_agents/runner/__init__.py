"""Batch runs: run tasks, grade them, store results line by line, summarise.

The run directory's own modules moved to :mod:`vtb_agents.rundir`; their old paths
(``vtb_agents.runner.store``, ``.lock``, ``.finished``) resolve to the new modules for one release.
"""

import importlib
import sys

for _old, _new in (("store", "store"), ("lock", "lock"), ("finished", "read")):
    sys.modules[f"{__name__}.{_old}"] = importlib.import_module(f"vtb_agents.rundir.{_new}")
