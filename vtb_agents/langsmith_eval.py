"""Run tasks as a LangSmith experiment: ``langsmith.evaluate`` with our episode as the target and
the VTB rubric evaluator (feedback ``vtb_rubric_score`` and ``vtb_pass``).

The target runs the task's episode exactly as ``vtb run`` does (same model, tools, sandbox,
settings; see :class:`~vtb_agents.runner.run.RunConfig`) and returns ``{"answers": [...]}``, one
per turn; its LangGraph run (``vtb:<task id>``) is traced inside the experiment's target run
through the (image-safe) client. Grading happens in LangSmith's evaluator step, against the
example's reference outputs (the task), with the run's judge and critical rule.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence

import langsmith
from langsmith.evaluation._runner import ExperimentResults

from vtb_agents.version import __version__
from vtb_agents.judges.evaluator import PASS_KEY, SCORE_KEY, make_rubric_evaluator
from vtb_agents.langsmith_dataset import dataset_examples, push_dataset, task_from_example
from vtb_agents.rundir.layout import ARTIFACTS_DIR, JUDGE_CACHE_FILE
from vtb_agents.rundir.lock import run_dir_lock
from vtb_agents.config import RunConfig
from vtb_agents.models.cache import task_model_calls
from vtb_agents.runner.preflight import check_run
from vtb_agents.runner.resources import RunResources, open_plan
from vtb_agents.runner.run import episode_for_task
from vtb_agents.tasks.model import Task
from vtb_agents.tracing import default_client

Target = Callable[[dict[str, Any]], dict[str, Any]]


def default_dataset_name(config: RunConfig) -> str:
    """The dataset tasks are pushed to when none is named: ``vtb:<task source folder or spec>``."""
    return f"vtb:{Path(config.tasks).name or config.tasks}"


def make_target(tasks: dict[str, Task], config: RunConfig, resources: RunResources) -> Target:
    """The experiment target: runs the episode of ``inputs["task_id"]`` (its model calls through the
    run's model cache, if any); model or graph errors raise (LangSmith records them on the run and the
    task is left ungraded)."""

    def vtb_episode(inputs: dict[str, Any]) -> dict[str, Any]:
        task = tasks[str(inputs["task_id"])]
        with task_model_calls(resources.model_cache, task.id) as calls, resources.open_sandbox() as sandbox:
            episode = episode_for_task(task, config, resources, sandbox)
        if calls is not None:
            calls.raise_miss()
        return {"answers": [t.answer for t in episode.turns], "statuses": [t.status for t in episode.turns],
                "tool_calls": [c.name for c in episode.tool_calls]}

    return vtb_episode


def evaluate_with_langsmith(tasks_or_dataset: Sequence[Task] | str, config: RunConfig, experiment_prefix: str,
                            client: langsmith.Client | None = None, *, dataset_name: str | None = None,
                            work_dir: Path | None = None, max_concurrency: int = 0,
                            description: str | None = None) -> ExperimentResults:
    """Run ``config`` over tasks as LangSmith experiment ``experiment_prefix-<suffix>`` and return the results.

    ``tasks_or_dataset`` is a list of tasks (pushed first to ``dataset_name``, default
    :func:`default_dataset_name`; only their examples are run) or the name of a dataset made by
    :func:`~vtb_agents.langsmith_dataset.push_dataset` (all its examples; the tasks are rebuilt from
    them). Artifacts and the judge cache go to ``work_dir`` (default: a temporary folder). The run's
    parts are checked first, before anything is pushed (:func:`~vtb_agents.runner.preflight.check_run`).
    """
    plan = check_run(config)
    client = client or default_client()
    if isinstance(tasks_or_dataset, str):
        examples = dataset_examples(tasks_or_dataset, client=client, include_attachments=True)
        tasks = [task_from_example(e) for e in examples]
    else:
        tasks = list(tasks_or_dataset)
        name = dataset_name or default_dataset_name(config)
        push_dataset(tasks, name, client=client)
        examples = dataset_examples(name, client=client, task_ids=[t.id for t in tasks])
    if not examples:
        raise ValueError("no tasks to evaluate")
    lookup = {t.id: t for t in tasks}
    with tempfile.TemporaryDirectory(prefix="vtb-ls-") as temporary:
        folder = Path(work_dir) if work_dir else Path(temporary)
        folder.mkdir(parents=True, exist_ok=True)
        # one writer per folder, as for `vtb run`: the artifacts and the judge cache are shared state
        with run_dir_lock(folder, "vtb run --langsmith-experiment"), \
                open_plan(plan, artifacts=folder / ARTIFACTS_DIR,
                          judge_cache=folder / JUDGE_CACHE_FILE) as resources:
            results = langsmith.evaluate(
                make_target(lookup, config, resources), data=examples,
                # langsmith takes an evaluator's list of results (the openevals shape); its annotation does not say so
                evaluators=[make_rubric_evaluator(lookup, judge=resources.judge,  # type: ignore[list-item]
                                                  critical_rule=config.critical_rule)],
                experiment_prefix=experiment_prefix, description=description, client=client,
                metadata={"vtb_agents": __version__, "model": config.model, "judge": config.judge,
                          "vtb_config": config.to_dict()},
                max_concurrency=max_concurrency, blocking=True)
    client.flush()  # runs and feedback are sent in the background
    return results


def summarize_experiment(results: ExperimentResults) -> dict[str, Any]:
    """Counts and means of the experiment's ``vtb_rubric_score`` / ``vtb_pass`` (None: ungraded)."""
    scores: list[float] = []
    passes: list[bool] = []
    errors = 0
    rows = list(results)
    for row in rows:
        errors += bool(row["run"].error)
        for result in row["evaluation_results"]["results"]:
            if result.key == SCORE_KEY and result.score is not None:
                scores.append(float(result.score))
            elif result.key == PASS_KEY and result.score is not None:
                passes.append(bool(result.score))
    return {"experiment": results.experiment_name, "tasks": len(rows), "graded": len(scores), "errors": errors,
            "ars": sum(scores) / len(scores) if scores else None,
            "apr": sum(passes) / len(passes) if passes else None}
