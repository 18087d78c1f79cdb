"""Compatibility shim, kept for one release: the sandbox moved to :mod:`vtb_agents.sandbox`.

Import from ``vtb_agents.sandbox`` (and its modules ``base``, ``local``, ``e2b``...) instead. The
old submodule paths (``vtb_agents.tools.sandbox.local`` and so on) resolve to the new modules.
"""

import importlib
import sys

from vtb_agents.sandbox import *  # noqa: F401,F403
from vtb_agents.sandbox import __all__  # noqa: F401

for _name in ("base", "local", "e2b", "host", "output", "worker", "isolation", "cgroup", "seccomp", "leftovers"):
    sys.modules[f"{__name__}.{_name}"] = importlib.import_module(f"vtb_agents.sandbox.{_name}")
