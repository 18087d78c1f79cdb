"""The task table that ``report.html`` opens on: one row per task (id, category, domain, result,
outcome, score, turns, tool calls, cost), each linking to its task page, with filters by category,
outcome and result (pass/fail/ungraded) and a search box, all client-side (``templates/table.js``).

The rows are the only per-task part of ``report.html`` (a few hundred bytes each, no task detail).
Searching by text (prompts and answers) uses ``RUN_DIR/report_files/search.js``, written beside the
images and loaded by the page only once something is typed: the text of a large run never slows the
opening. The search matches a task when its id, or its prompts and answers, contain the typed text
(case-insensitive).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Sequence

from vtb_agents.analysis.regions import LOOKED_IOU
from vtb_agents.report.images import FILES_DIR
from vtb_agents.report.markup import badge, esc, num
from vtb_agents.report.task_page import TaskPage, result_label
from vtb_agents.report.usage import usd
from vtb_agents.results import TaskResult

SEARCH_FILE = f"{FILES_DIR}/search.js"
"""The text search index of a report (relative to the run directory): ``window.vtbSearchIndex = {stem: text}``."""
RESULTS = ("pass", "fail", "ungraded")
LOOKED = ("looked", "did not look", "not located", "not measured")
"""Values of the "where it looked" filter (:func:`looked`)."""


def looked(result: TaskResult) -> tuple[str, float | None]:
    """Whether a task looked at the right place, and its crop IoU: the mean ``best_crop_iou`` of its
    measured turns; "looked" when every measured turn has IoU >= 0.5, "did not look" when one has less,
    else "not located" when a turn's images could not be located, else "not measured"."""
    measured = [t.best_crop_iou for t in result.episode.turns if t.best_crop_iou is not None]
    if measured:
        return ("looked" if min(measured) >= LOOKED_IOU else "did not look"), round(sum(measured) / len(measured), 4)
    return ("not located" if any(t.unlocated for t in result.episode.turns) else "not measured"), None
COLUMNS = (("task", "text"), ("category", "text"), ("domain", "text"), ("result", "text"), ("outcome", "text"),
           ("score", "num"), ("turns", "num"), ("tool calls", "num"), ("crop IoU", "num"), ("cost", "num"))
"""Header and sort kind of each column."""
EPOCH_COLUMN = (("epoch", "num"),)
"""The column after the task's of a run with several epochs."""
NUMERIC = ' class="n"'
"""The attribute of a right-aligned (numeric) cell."""


def _row(task_page: TaskPage, epochs: bool) -> str:
    result = task_page.result
    label, kind = result_label(result)
    ended = result.ended
    calls = len(result.episode.tool_calls)
    score, cost = result.grade.score, task_page.cost
    where, iou = looked(result)
    cells = [f'<td><a href="{esc(task_page.href)}">{esc(result.task_id)}</a></td>',
             *([f'<td class="n">{task_page.epoch}</td>'] if epochs else []),
             f"<td>{esc(result.category)}</td>", f"<td>{esc(result.domain)}</td>",
             f"<td>{badge(label, kind)}</td>", f"<td>{esc(ended.replace('_', ' '))}</td>",
             f'<td class="n" data-v="{"" if score is None else score}">{esc(num(score))}</td>',
             f'<td class="n">{len(result.episode.turns)}</td>', f'<td class="n">{calls}</td>',
             f'<td class="n" data-v="{"" if iou is None else iou}" title="{esc(where)}">'
             f'{esc(where if iou is None else num(iou))}</td>',
             f'<td class="n" data-v="{"" if cost is None else cost}">{esc(usd(cost))}</td>']
    return (f'<tr data-category="{esc(result.category)}" data-outcome="{esc(ended)}" data-result="{label}" '
            f'data-looked="{esc(where)}" '
            f'data-stem="{esc(task_page.stem)}">{"".join(cells)}</tr>')


def _select(name: str, label: str, values: Sequence[str]) -> str:
    options = "".join(f'<option value="{esc(v)}">{esc(v.replace("_", " "))}</option>' for v in values)
    return (f'<label>{esc(label)} <select id="f-{name}" data-filter="{name}"><option value="">all</option>'
            f"{options}</select></label>")


def task_table(pages: list[TaskPage], *, epochs: bool = False) -> str:
    """The report's first section: filters, search box and the table of every task (a row per task and
    epoch, with an epoch column when ``epochs``)."""
    categories = sorted({p.result.category for p in pages})
    outcomes = sorted({p.result.ended for p in pages})
    filters = (f'<div class="filters">{_select("category", "category", categories)}'
               f'{_select("outcome", "outcome", outcomes)}{_select("result", "result", RESULTS)}'
               f'{_select("looked", "where it looked", LOOKED)}'
               '<label>search <input id="q" type="search" placeholder="task id, prompt or answer text" size="32">'
               '</label><span id="shown" class="note"></span></div>')
    head = "".join(f'<th data-sort="{kind}"{NUMERIC if kind == "num" else ""}>{esc(name)}</th>'
                   for name, kind in (COLUMNS[:1] + EPOCH_COLUMN + COLUMNS[1:] if epochs else COLUMNS))
    rows = "".join(_row(p, epochs) for p in pages)
    return (f'<section id="tasks"><h2>Tasks ({len(pages)})</h2>{filters}'
            f'<table id="task-table" class="wide tasks" data-search="{esc(SEARCH_FILE)}">'
            f"<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
            '<p id="no-rows" class="note" hidden>No task matches.</p></section>')


def search_text(task_page: TaskPage) -> str:
    """What the text search looks in: the task's prompts and the model's answers."""
    prompts = [turn.prompt for turn in task_page.task.turns] if task_page.task is not None else []
    answers = [turn.answer for turn in task_page.result.episode.turns]
    return "\n".join([*prompts, *answers])


def write_search_index(run_dir: Path, pages: list[TaskPage]) -> Path:
    """Write ``RUN_DIR/report_files/search.js`` (prompts and answers by page stem) and return it."""
    index = {p.stem: search_text(p) for p in pages}
    out = Path(run_dir) / SEARCH_FILE
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(f"window.vtbSearchIndex = {json.dumps(index, ensure_ascii=False)};\n", encoding="utf-8")
    os.replace(tmp, out)
    return out
