"""The leaderboard of a many-model command, in the terminal and as ``leaderboard.html``.

Both show what ``leaderboard.json`` holds (:mod:`vtb_agents.rundir.leaderboard`: figures copied from
each run's ``summary.json``): per model APR and ARS with their 95% intervals, the estimated cost and
cost per passed task ("unknown" where a price is not known, never $0), and the outcomes. The page
links each model's own ``report.html``. docs/how-to/many-models.md.
"""

from __future__ import annotations

from pathlib import Path

from vtb_agents.report.html import REPORT_FILE
from vtb_agents.report.markup import esc, interval, page, pct, table
from vtb_agents.report.terminal import Col, Fitted, Sheet
from vtb_agents.report.usage import usd
from vtb_agents.rundir.leaderboard import Leaderboard, LeaderboardRow
from vtb_agents.terminal import safe_markup, safe_text

__all__ = ["LEADERBOARD_PAGE", "leaderboard_table", "outcomes_text", "write_leaderboard_page"]

LEADERBOARD_PAGE = "leaderboard.html"
CAPTION = "95% CI: Student's t over task means (docs/concepts/epochs.md); cost at the presets' prices"


def outcomes_text(row: LeaderboardRow) -> str:
    """The row's outcomes in one line, most frequent first (``answered 18, step_limit 2``)."""
    return ", ".join(f"{name} {count}" for name, count in sorted(row.outcomes.items(), key=lambda kv: (-kv[1], kv[0])))


def _cells(row: LeaderboardRow) -> tuple[str, ...]:
    return (str(row.tasks), str(row.graded), pct(row.apr), interval(row.apr_ci95), pct(row.ars),
            interval(row.ars_ci95), usd(row.cost), usd(row.cost_per_pass))


def leaderboard_table(board: Leaderboard) -> Fitted:
    """The leaderboard fitted to the terminal (:mod:`vtb_agents.report.terminal`): one row per model,
    best APR first; the outcomes column is left out first when it does not fit."""
    sheet = Sheet([Col("model", figure=False), Col("tasks", drop=2), Col("graded", drop=3), Col("APR"),
                   Col("APR 95% CI"), Col("ARS"), Col("ARS 95% CI"), Col("cost"), Col("cost/pass"),
                   Col("outcomes", figure=False, drop=4)],
                  title=safe_markup(f"Leaderboard (judge: {board.judge})"), caption=CAPTION)
    for row in board.rows:
        name = safe_text(row.model + ("" if row.complete else " (INCOMPLETE)"))
        sheet.add_row(name, *_cells(row), safe_text(outcomes_text(row)))
    return Fitted(sheet)


def write_leaderboard_page(folder: Path, board: Leaderboard) -> Path:
    """Write ``folder/leaderboard.html``: the leaderboard's table, each model linked to its run's report."""
    rows = [[f'<a href="{esc(f"{row.run_dir}/{REPORT_FILE}")}">{esc(row.model)}</a>'
             + ("" if row.complete else " <b>(incomplete)</b>"), *map(esc, _cells(row)), esc(outcomes_text(row))]
            for row in board.rows]
    headers = ["model", "tasks", "graded", "APR", "APR 95% CI", "ARS", "ARS 95% CI", "cost", "cost/pass", "outcomes"]
    body = (f"<h1>Leaderboard</h1><p class=\"sub\">{len(board.rows)} model(s), judge {esc(board.judge)}</p>"
            f"{table(headers, rows, cls='leaderboard', caption=CAPTION)}")
    path = Path(folder) / LEADERBOARD_PAGE
    path.write_text(page("Leaderboard", body), encoding="utf-8")
    return path
