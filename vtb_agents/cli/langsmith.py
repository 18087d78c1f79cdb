"""``vtb langsmith ...`` (``langsmith_app``, mounted on the main app) and the LangSmith branch of
``vtb run --langsmith-experiment``.

The client comes from the ``LANGSMITH_*`` environment (``LANGSMITH_API_KEY``, ``LANGSMITH_ENDPOINT``)
and traces image-safe (:mod:`vtb_agents.tracing`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

import typer

from vtb_agents.cli.common import cli_app, fail, out

if TYPE_CHECKING:  # kept out of `vtb --help`'s imports
    from vtb_agents.config import RunConfig
    from vtb_agents.tasks.model import Task

langsmith_app = cli_app(help="LangSmith: push tasks as a dataset (experiments: `vtb run --langsmith-experiment`).",
                        no_args_is_help=True)


@langsmith_app.callback()
def _group() -> None:
    """LangSmith datasets of tasks (client configured by LANGSMITH_API_KEY / LANGSMITH_ENDPOINT)."""


def _errors() -> tuple[type[BaseException], ...]:
    from langsmith.utils import LangSmithError

    from vtb_agents.rundir.errors import RunError
    from vtb_agents.tasks.errors import TaskLoadError

    return LangSmithError, RunError, TaskLoadError, FileNotFoundError, ValueError


@langsmith_app.command("push-dataset")
def push_dataset_command(
        tasks: str = typer.Option(..., "--tasks", help="Task source: 'sample', a folder, parquet, 'hf:...'."),
        name: str = typer.Option(..., "--name", help="LangSmith dataset name (created, or extended with new tasks)."),
        description: Optional[str] = typer.Option(None, help="Dataset description."),
) -> None:
    """Create a LangSmith dataset with one example per task (images as attachments)."""
    from vtb_agents.langsmith_dataset import push_dataset
    from vtb_agents.tasks.sources import load_tasks

    try:
        result = push_dataset(load_tasks(tasks), name, description=description)
    except _errors() as exc:
        fail(f"{type(exc).__name__}: {exc}")
    verb = "created" if result.created else "updated"
    out.print(f"{verb} dataset {result.name!r} ({result.dataset_id}): {len(result.added)} example(s) added, "
              f"{len(result.present)} already there", highlight=False, soft_wrap=True)


def run_langsmith_experiment(tasks: Sequence[Task], config: RunConfig, experiment: str, *,
                             out_dir: Path | None = None, dataset: str | None = None, concurrency: int = 1) -> None:
    """What ``vtb run --langsmith-experiment EXPERIMENT`` does: push the tasks (to ``dataset``), run
    them as experiment ``EXPERIMENT-<suffix>`` and print its scores; artifacts go to ``out_dir``."""
    from vtb_agents.langsmith_eval import evaluate_with_langsmith, summarize_experiment

    try:
        results = evaluate_with_langsmith(list(tasks), config, experiment, dataset_name=dataset, work_dir=out_dir,
                                          max_concurrency=concurrency if concurrency > 1 else 0)
    except _errors() as exc:
        fail(f"{type(exc).__name__}: {exc}")
    summary = summarize_experiment(results)

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.1f}%"

    out.print(f"experiment {summary['experiment']}: {summary['tasks']} task(s), {summary['graded']} graded, "
              f"{summary['errors']} error(s); APR {pct(summary['apr'])}, ARS {pct(summary['ars'])}",
              highlight=False, soft_wrap=True)
