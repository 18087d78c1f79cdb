"""A large run directory made from a small real one: its results copied under new task ids, with a
summary computed by the real code (for the report's size test and ``bench/report_pages.py``)."""

from __future__ import annotations

import shutil
from pathlib import Path

from vtb_agents.analysis.cost import recorded_prices
from vtb_agents.analysis.metrics import summarize
from vtb_agents.rundir.create import write_summary
from vtb_agents.rundir.layout import RESULTS_FILE
from vtb_agents.rundir.read import load_run
from vtb_agents.tasks.model import Task

ANSWER_MARK = "long-answer-mark"
"""Words every copied answer repeats: the answer text is there to be searched, never inlined in report.html."""


def big_run(small: Path, out: Path, n: int, *, answer_chars: int = 3_000) -> list[Task]:
    """Copy the run directory ``small`` to ``out`` with ``n`` results, ``copy-<i>-<id>``, each a result
    of ``small`` with an answer of about ``answer_chars`` characters; return the tasks of those ids."""
    data = load_run(small)
    shutil.copytree(small, out, ignore=shutil.ignore_patterns("report*", "tasks", "*.lock"))
    results, tasks = [], []
    for i in range(n):
        result = data.results[i % len(data.results)]
        task_id = f"copy-{i:05d}-{result.task_id}"
        turns = [t.model_copy(update={"answer": f"{t.answer} {ANSWER_MARK} {i} " * (answer_chars // 40)})
                 for t in result.episode.turns]
        episode = result.episode.model_copy(update={"task_id": task_id, "turns": turns})
        results.append(result.model_copy(update={"task_id": task_id, "episode": episode}))
        tasks.append(data.tasks[result.task_id].model_copy(update={"id": task_id}))
    (out / RESULTS_FILE).write_text("".join(r.model_dump_json() + "\n" for r in results), encoding="utf-8")
    write_summary(out, summarize(results, judge_name=data.run.config.judge, prices=recorded_prices(data.run),
                                 extra={"model": data.summary.model or data.run.config.model}))
    return tasks
