"""Commands the CLI prints for the user to copy (retry, resume): built from the run's recorded
settings, so that the printed command is the one that continues this run, shell-quoted.

A resume must repeat every setting of the run (``vtb run --resume`` refuses other settings) and
its task selection (else it would run other tasks too); these helpers render both as flags.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, Sequence

from vtb_agents.cli.options import CONFIG_FLAGS, RUN_ONLY, RunOptions, flag
from vtb_agents.config import DEFAULTS, RunConfig
from vtb_agents.defaults import OBJECT_PREFIX

ABLATION_TAG = "ablation:"
"""The episode tag ``vtb ablate`` gives each condition's runs (``ablation:<setting>``)."""


class HintError(ValueError):
    """A recorded setting no ``vtb`` flag can give (the run was made from Python)."""


def _flat(config: RunConfig) -> dict[str, Any]:
    """Every setting of ``config`` by its flat name (episode settings beside the others), as JSON."""
    data = config.to_dict()
    return {**{k: v for k, v in data.items() if k != "episode"}, **data["episode"]}


def config_flags(config: RunConfig, *, ablation: bool = False) -> list[str]:
    """The ``vtb run`` (``ablation``: ``vtb ablate``) flags that give ``config`` (a recorded run's):
    one per setting away from its default, named by the one flag table (:data:`CONFIG_FLAGS`)."""
    defaults = _flat(DEFAULTS)
    flags: list[str] = []
    for name, value in _flat(config).items():
        if name == "tags":
            rest = [t for t in value if not (ablation and str(t).startswith(ABLATION_TAG))]
            if rest:
                raise HintError(f"episode tags {rest} have no vtb flag")
            continue
        if (ablation and name in RUN_ONLY) or value == defaults[name]:
            continue
        if OBJECT_PREFIX in json.dumps(value):
            raise HintError(f"setting {name}={value!r} is a Python object (vtb_agents.evaluate): no vtb flag gives it")
        option = CONFIG_FLAGS[name]
        if isinstance(value, bool):
            flags.append(option if value else "--no-" + option.removeprefix("--"))
        elif isinstance(value, list):  # a repeatable flag (--tool)
            flags += [item for one in value for item in (option, str(one))]
        elif value is not None:
            flags += [option, json.dumps(value) if isinstance(value, dict) else str(value)]
    return flags


def selection_flags(options: RunOptions) -> list[str]:
    """The task selection and executor flags of a command line (``--limit``, ``--category``,
    ``--status``, ``--skip-invalid`` ...)."""
    flags = [item for name in ("category", "task_id", "status") for value in getattr(options, name)
             for item in (flag(name), value)]
    flags += ["--limit", str(options.limit)] if options.limit else []
    flags += ["--skip-invalid"] if options.skip_invalid else []
    flags += ["--concurrency", str(options.concurrency)] if options.concurrency != 1 else []
    flags += ["--executor", options.executor] if options.executor != "local" else []
    flags += ["--workers", str(options.workers)] if options.workers else []
    flags += ["--ray-address", options.ray_address] if options.ray_address else []
    return flags


def run_ids_flags(run_ids: Sequence[str], source_ids: Sequence[str]) -> list[str]:
    """Flags selecting exactly a run's tasks from its source: none for all of them, ``--limit N`` for
    the first N, else one ``--task-id`` each."""
    if set(run_ids) == set(source_ids):
        return []
    if set(run_ids) == set(source_ids[:len(run_ids)]):
        return ["--limit", str(len(run_ids))]
    return [item for task_id in run_ids for item in ("--task-id", task_id)]


def command(*words: str | Path) -> str:
    """A ``vtb`` command line, shell-quoted."""
    return shlex.join(["vtb", *map(str, words)])


def ablation_of(config: RunConfig) -> str | None:
    """The ``vtb ablate`` condition a recorded run was (from its episode tag), or None."""
    tags = config.episode.tags
    return next((t.removeprefix(ABLATION_TAG) for t in tags if t.startswith(ABLATION_TAG)), None)


def resume_recorded_run(run_dir: Path, config: RunConfig, selection: Sequence[str],
                        *extra: str) -> str:
    """The command resuming the run recorded in ``run_dir`` with ``config`` and ``selection`` flags:
    ``vtb run ... --out RUN_DIR --resume``, or for a condition of ``vtb ablate`` the ``vtb ablate``
    of its folder for that condition; ``extra`` flags follow (e.g. ``--retry-errors``)."""
    setting = ablation_of(config)
    if setting is None:
        return command("run", *config_flags(config), *selection, "--out", run_dir, "--resume", *extra)
    return command("ablate", *config_flags(config, ablation=True), *selection, "--out", run_dir.parent,
                   "--setting", setting, "--resume", *extra)
