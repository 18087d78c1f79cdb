"""This checkout's ``vtb`` in a subprocess: one environment builder and one runner for every test that goes
through the real command line (``python -m vtb_agents``).

A test states what differs from the runner's own environment, nothing else: extra ``PYTHONPATH`` folders
(``path``, say a test's agent module), variables to set (``env``, say a local model server's URL from
:func:`openai_env`, or ``COLUMNS`` for the terminal's width) and variables to leave out (``without``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parents[2]
"""The checkout under test."""


def checkout_env(*paths: Path | str, without: Iterable[str] = (), **env: str) -> dict[str, str]:
    """The environment of a subprocess that must run this checkout's ``vtb_agents``, never a copy
    installed elsewhere: the checkout first on ``PYTHONPATH``, then ``paths`` (say, a test's agent
    module); ``env`` adds or overrides variables; ``without`` leaves out variables, each a name or a
    prefix ending in ``_`` (``"LANGSMITH_"``)."""
    dropped = tuple(without)

    def kept(name: str) -> bool:
        return not any(name == d or (d.endswith("_") and name.startswith(d)) for d in dropped)

    base = {k: v for k, v in os.environ.items() if kept(k)}
    return {**base, "PYTHONPATH": os.pathsep.join([str(PROJECT), *map(str, paths)]), **env}


def openai_env(base_url: str, key: str = "k", **more: str) -> dict[str, str]:
    """The variables that point LangChain's OpenAI client at a local server (``OPENAI_BASE_URL``, a key),
    with ``more`` variables."""
    return {"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": key, **more}


def vtb_command(*args: str | Path) -> list[str]:
    """The command line of ``vtb ARGS`` with this interpreter (``python -m vtb_agents``)."""
    return [sys.executable, "-m", "vtb_agents", *map(str, args)]


def vtb_env(path: Iterable[Path | str] = (), env: Mapping[str, str] | None = None, without: Iterable[str] = (),
            columns: int | None = None) -> dict[str, str]:
    """The environment of a ``vtb`` subprocess: :func:`checkout_env` of ``path``, ``env`` and ``without``,
    and a terminal of ``columns`` columns if given (``COLUMNS``: log lines and tables wrap at it)."""
    width = {} if columns is None else {"COLUMNS": str(columns)}
    return checkout_env(*path, without=without, **width, **(env or {}))


def vtb(*args: str | Path, cwd: Path | str | None = None, path: Iterable[Path | str] = (),
        env: Mapping[str, str] | None = None, without: Iterable[str] = (), columns: int | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``vtb ARGS`` of this checkout to its end and capture its output (text).

    ``path``, ``env``, ``without`` and ``columns`` shape the environment (:func:`vtb_env`); ``cwd`` is where
    it runs (relative task folders; ``python -m`` puts it first on ``sys.path``); ``timeout`` only bounds a
    run that hangs."""
    return subprocess.run(vtb_command(*args), capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env=vtb_env(path, env, without, columns))


def start_vtb(*args: str | Path, cwd: Path | str | None = None, path: Iterable[Path | str] = (),
              env: Mapping[str, str] | None = None, without: Iterable[str] = (), columns: int | None = None,
              **popen: Any) -> subprocess.Popen[Any]:
    """Start ``vtb ARGS`` of this checkout and return the process (to kill it, or to read a server's URL);
    the environment as :func:`vtb`, ``popen`` goes to :class:`subprocess.Popen` (``stdout``, ``text``...)."""
    return subprocess.Popen(vtb_command(*args), cwd=cwd, env=vtb_env(path, env, without, columns), **popen)
