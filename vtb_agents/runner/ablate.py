"""Ablations as in the paper's Figure 7: one run per setting, same tasks, model and judge.

Each setting is a full run in ``OUT/<setting>/`` (resumable on its own); the comparison is
written by :func:`vtb_agents.report.ablation.write_ablation_report`.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Sequence

from vtb_agents.config import RunConfig
from vtb_agents.rundir.records import RunSummary
from vtb_agents.runner.batch_grade import BatchSettings
from vtb_agents.runner.executors import Executor
from vtb_agents.runner.preflight import check_run
from vtb_agents.runner.run import ProgressFn, run_suite
from vtb_agents.tasks.model import Task

ABLATIONS: dict[str, str] = {
    "strong_prompt": "strong (proactive) system prompt, all tools",
    "weak_prompt": "weak system prompt, all tools",
    "no_vision_tool": "strong prompt, every tool but python_image_processing",
    "no_tools": "strong prompt, no tools at all",
}


def ablation_config(base: RunConfig, setting: str) -> RunConfig:
    """``base`` changed to the ablation ``setting`` (one of :data:`ABLATIONS`)."""
    if setting not in ABLATIONS:
        raise ValueError(f"unknown ablation {setting!r}: choose from {', '.join(ABLATIONS)}")
    episode = base.episode.model_copy(update={"prompt_level": "low" if setting == "weak_prompt" else "high",
                                              "tags": (*base.episode.tags, f"ablation:{setting}")})
    return base.model_copy(update={"episode": episode, "no_tools": setting == "no_tools",
                                   "no_vision_tool": setting == "no_vision_tool"})


def run_ablations(tasks: Sequence[Task], base: RunConfig, out: Path, *, settings: Sequence[str] = tuple(ABLATIONS),
                  resume: bool = False, executor: Executor | None = None,
                  stop: threading.Event | None = None, progress: ProgressFn | None = None,
                  retry_errors: bool = False, judge_cache: Path | None = None,
                  batch: BatchSettings | None = None) -> dict[str, RunSummary]:
    """Run every setting into ``out/<setting>`` and return their summaries, in order (``retry_errors``,
    ``judge_cache`` and ``batch``: as :func:`~vtb_agents.runner.run.run_suite`'s, for each setting; one
    ``judge_cache`` serves all settings, the same answer getting the same verdict).

    Every setting is planned and checked before the first setting runs
    (:func:`~vtb_agents.runner.preflight.check_run`: a user's compiled agent may hold one setting's
    tools and not another's), so a failure writes nothing; each runs on its plan."""
    configs = {setting: ablation_config(base, setting) for setting in settings}  # bad names fail first
    plans = {setting: check_run(config, resume_from=Path(out) / setting if resume else None)
             for setting, config in configs.items()}
    summaries: dict[str, RunSummary] = {}
    for setting, plan in plans.items():
        if stop is not None and stop.is_set():
            break
        summaries[setting] = run_suite(tasks, plan, Path(out) / setting, resume=resume, executor=executor,
                                       stop=stop, progress=progress, retry_errors=retry_errors,
                                       judge_cache=judge_cache, checked=True, batch=batch)
    return summaries
