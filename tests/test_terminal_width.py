"""Terminal output fits the terminal: every figure of the tables printed whole at 80 and 120 columns
(docs/concepts/epochs.md, docs/reference/transcripts.md), through the real `vtb` CLI in a subprocess
with COLUMNS set."""

from __future__ import annotations

import io
import json
import re
from typing import Any

import pytest
from rich.console import Console

from vtb_agents.cli.run import summary_table
from vtb_agents.rundir.records import RunSummary
from vtb_agents.report import compare_runs
from vtb_agents.report.markup import interval, pct
from vtb_agents.report.paired import cells as paired_cells
from vtb_agents.report.terminal import Col, Fitted, Sheet
from vtb_agents.tasks import load_tasks
from support.cli import vtb
from support.together import together

WIDTHS = (80, 120)
TWO_OF_EACH = ("fu-medical-labs", "fu-sports-roster", "ht-medical-dosage", "ht-sports-race-weather",
               "pr-finance-ledger", "pr-biology-plates", "rs-generalist-street", "rs-finance-invoice",
               "te-generalist-map", "te-physics-gauge")
"""Ten sample tasks, two of each category and two of each domain: every group of `make demo`'s table (all 20
tasks) is there with its interval (a group of one task has none), at half the run."""




@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A run as `make demo`'s (the sample suite, replay, rule judge) of :data:`TWO_OF_EACH` and a two-epoch run of 8
    sample tasks, each printed at 80 columns by the real CLI."""
    root = tmp_path_factory.mktemp("widths")
    chosen = [arg for task_id in TWO_OF_EACH for arg in ("--task-id", task_id)]
    demo, epochs = together(  # two runs side by side, each in a folder of its own
        lambda: vtb("run", "--tasks", "sample", *chosen, "--model", "replay", "--judge", "rule", "--out",
                    str(root / "demo"), columns=80, timeout=600),
        lambda: vtb("run", "--tasks", "sample", "--model", "replay", "--judge", "rule", "--epochs", "2",
                    "--limit", "8", "--out", str(root / "epochs"), columns=80, timeout=600))
    assert demo.returncode == 0, demo.stderr
    assert epochs.returncode == 0, epochs.stderr
    return {"demo": (root / "demo", demo.stdout), "epochs": (root / "epochs", epochs.stdout)}


def figures(summary: dict[str, Any]) -> list[str]:
    """Every figure of the summary table: APR, ARS, their intervals (and pass@k, pass^k), each group."""
    blocks = [{**summary, "n": summary["tasks"]}, *(b for section in ("by_category", "by_domain", "by_turncase")
                                                   for b in summary[section].values())]
    found = []
    for block in blocks:
        found += [pct(block["apr"]), pct(block["ars"]), interval(block["apr_ci95"]), interval(block["ars_ci95"])]
        if summary.get("epochs", 1) > 1:
            found += [pct(block["pass_at_k"]), pct(block["pass_hat_k"])]
    return found


def table_of(summary: dict[str, Any]) -> Fitted:
    """``vtb run``'s summary table of a ``summary.json`` (its run's epochs as recorded there)."""
    return summary_table(RunSummary.model_validate(summary), summary["epochs"])


def names(summary: dict[str, Any]) -> list[str]:
    """The group names of the summary table (each must be on one line, never wrapped)."""
    return [name for section in ("by_category", "by_domain", "by_turncase") for name in summary[section]]


def rendered(renderable: Any, width: int) -> str:
    console = Console(width=width, file=io.StringIO(), record=True)
    console.print(renderable)
    return console.export_text()


def assert_whole(text: str, wanted: list[str], width: int) -> None:
    lines = text.splitlines()
    assert max(map(len, lines)) <= width, f"a line is wider than {width} columns"
    assert not re.search(r"\w…", text), "a cell was cut"
    for figure in wanted:
        assert any(figure in line for line in lines), f"{figure!r} not printed whole at {width} columns:\n{text}"


@pytest.mark.slow
@pytest.mark.parametrize("which", ["demo", "epochs"])
def test_vtb_run_prints_every_figure_whole_at_80_columns(runs, which):
    run_dir, stdout = runs[which]
    summary = json.loads((run_dir / "summary.json").read_text())
    table = stdout.split("tools:")[0]
    assert_whole(table, figures(summary) + names(summary), 80)
    if which == "demo":  # every group of the whole suite's table, each with an interval
        sample = load_tasks("sample")
        assert (set(summary["by_category"]), set(summary["by_domain"]), set(summary["by_turncase"])) == (
            {t.category for t in sample}, {t.domain for t in sample}, {t.turncase for t in sample})
        groups = [b for section in ("by_category", "by_domain", "by_turncase") for b in summary[section].values()]
        assert all(b["apr_ci95"] is not None and b["ars_ci95"] is not None for b in groups)
    if which == "epochs":
        assert "pass@k" in table and "pass^k" in table and "2 epochs per task" in table


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.slow
def test_summary_tables_render_whole_at_80_and_120_columns(runs, width):
    for run_dir, _ in runs.values():
        summary = json.loads((run_dir / "summary.json").read_text())
        assert_whole(rendered(table_of(summary), width), figures(summary) + names(summary), width)


@pytest.mark.slow
def test_an_epochs_table_with_wide_intervals_keeps_them_whole(runs):
    """The case of the issue: an interval such as 24.5–100.0 among pass@k and pass^k at 80 columns."""
    summary = json.loads((runs["epochs"][0] / "summary.json").read_text())
    for block in [summary, *summary["by_category"].values()]:
        block["apr_ci95"], block["ars_ci95"] = [0.245, 1.0], [0.0, 1.0]
    summary["by_category"]["a_category_with_a_long_name"] = {**summary, "n": 3, "graded": 3}
    for width in WIDTHS:
        text = rendered(table_of(summary), width)
        assert_whole(text, figures(summary) + ["24.5–100.0", "0.0–100.0", "a_category_with_a_long_name"], width)


@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
def test_vtb_compare_prints_every_figure_whole(runs, width):
    done = vtb("compare", str(runs["demo"][0]), str(runs["epochs"][0]), columns=width, timeout=600)
    assert done.returncode == 0, done.stderr
    comparison = compare_runs([runs["demo"][0], runs["epochs"][0]])
    wanted = [cell for row in comparison.rows for cell in comparison.cells(row)[4:] if cell]
    pair = paired_cells(comparison.paired[0])
    wanted += pair[4:]
    assert_whole(done.stdout, wanted, width)


def test_a_table_too_wide_for_the_terminal_leaves_out_its_lowest_priority_columns():
    sheet = Sheet([Col("name", figure=False), Col("important"), Col("minor", drop=2), Col("less", drop=1)],
                  title="t")
    sheet.add_row("alpha", "12.3–45.6", "x" * 30, "y" * 30)
    text = rendered(Fitted(sheet), 60)
    assert "12.3–45.6" in text and "y" * 30 in text and "x" * 30 not in text
    assert "not shown to fit the terminal: minor" in text


@pytest.mark.slow
def test_vtb_transcript_fits_80_columns_and_says_how_the_task_ended(runs):
    run_dir = runs["demo"][0]
    done = vtb("transcript", str(run_dir), "rs-finance-invoice", columns=80, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(map(len, lines)) <= 80
    assert lines[1].startswith("pass · score 1.00 · outcome answered · epoch 1 · cost unknown")
    code = [i for i, line in enumerate(lines) if line.strip() == "code:"]
    assert code, done.stdout
    below = lines[code[0] + 1:code[0] + 4]
    assert all(line.startswith("    ") for line in below if line), below  # code indented under its header
    judge = next(line for line in lines if line.startswith("━━ #") and " judge " in line)
    assert " · met · rubric " in judge and len(judge) <= 80


def test_vtb_transcript_prints_model_text_terminal_safe(tmp_path):
    """Every model-written text of `vtb transcript` goes through one function (model_text): an escape
    sequence in a reply and in code is shown, never sent to the terminal."""
    from vtb_agents.artifacts import ArtifactStore
    from vtb_agents.cli.transcript import render
    from vtb_agents.results import ToolCallRecord
    from vtb_agents.transcript import ModelEvent, ModelResponse, ToolEvent, Transcript

    hostile = "\x1b]0;pwned\x07\x1b[2J"
    record = Transcript(task_id="t\x1b[31m", events=[
        ModelEvent(step="model", turn=0, messages=[{"role": "human", "content": hostile}],
                   response=ModelResponse(text=hostile, tool_calls=[{"name": "python_image_processing",
                                                                      "args": {"code": f"print('{hostile}')"}}])),
        ToolEvent(step="tools", call=ToolCallRecord(turn=0, round=0, id="c1", name="python_image_processing",
                                                     args={"code": f"x = '{hostile}'"}, ok=True, output=hostile))])
    for highlight in (False, True):
        console = Console(width=80, file=io.StringIO(), record=True, force_terminal=highlight)
        for renderable in render(record, ArtifactStore(tmp_path), highlight=highlight):
            console.print(renderable)
        text = console.export_text(styles=False)
        assert "\x1b]0;" not in text and "\x07" not in text and "\\x1b]0;pwned\\x07" in text


def test_code_is_highlighted_on_a_terminal_only():
    from vtb_agents.cli.transcript import code_block, indent

    for highlight in (True, False):
        console = Console(width=80, file=io.StringIO(), force_terminal=highlight, color_system="standard",
                          record=True)
        console.print(indent(code_block("from PIL import Image\nimg = Image.open('image_0.png')\n", highlight)))
        written = console.file.getvalue()
        assert ("\x1b[" in written) is highlight
        assert all(line.startswith("  ") for line in console.export_text().splitlines() if line.strip())
