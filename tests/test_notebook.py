"""`evaluate()` in a notebook (docs/tutorials/evaluate-your-agent.md): a real Jupyter kernel (nbclient,
ipykernel) runs a
notebook that evaluates two sample tasks; the cell's output is the HTML repr (score table with intervals,
region figures, a link to report.html), the text repr fits one screen, the run goes under ./runs/ with a
timestamped name that is printed, and an error names evaluate()'s keyword, not the CLI flag."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from support.cli import PROJECT
from vtb_agents.api import in_python_terms

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

CELLS = [
    "import os, sys\nsys.path.insert(0, {project!r})\nos.chdir({cwd!r})\nimport vtb_agents",
    'tasks = vtb_agents.load_tasks("sample", limit=2)\nresult = vtb_agents.evaluate(tasks=tasks)\nresult',
    "print(repr(result))",
    "try:\n    vtb_agents.evaluate(tasks=tasks, out=result.run_dir)\nexcept Exception as exc:\n    print(exc)",
]


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("notebook")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(CELLS[0].format(project=str(PROJECT), cwd=str(cwd))),
                      *(nbformat.v4.new_code_cell(source) for source in CELLS[1:])]
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    client = nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(cwd)}})
    client.km_kwargs = {"kernel_cmd": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]}
    client.execute()
    return notebook, cwd


def outputs(cell) -> list[dict]:
    return [dict(output) for output in cell.outputs]


@pytest.mark.slow
def test_a_notebook_displays_the_html_repr_of_an_evaluation(executed):
    notebook, cwd = executed
    shown = outputs(notebook.cells[1])
    results = [o for o in shown if o["output_type"] == "execute_result"]
    assert len(results) == 1
    page = results[0]["data"]["text/html"]
    assert '<div class="vtb-eval">' in page and "replay (judge rule): 2 task(s), 2 graded" in page
    assert "APR 95% CI" in page and "ARS 95% CI" in page  # the score table with its intervals
    assert 'class="regions-table"' in page and "share IoU ≥ 0.5" in page  # the region figures
    link = re.search(r'<a href="(file://[^"]+/report\.html)"', page)
    assert link is not None and Path(link.group(1).removeprefix("file://")).is_file()
    printed = "".join(o.get("text", "") for o in shown if o["output_type"] == "stream")
    runs = sorted((cwd / "runs").iterdir())
    assert len(runs) == 1 and re.fullmatch(r"run-\d{8}-\d{6}", runs[0].name)  # ./runs/<timestamp>
    assert f"writing the run to {runs[0]}" in printed


@pytest.mark.slow
def test_the_text_repr_fits_one_screen(executed):
    notebook, _ = executed
    text = "".join(o.get("text", "") for o in outputs(notebook.cells[2]))
    lines = text.strip().splitlines()
    assert lines[0] == "Evaluation: replay (judge rule): 2 task(s), 2 graded"
    assert len(lines) <= 10 and max(map(len, lines)) <= 120
    assert "APR 100.0%" in text and "report: " in text


@pytest.mark.slow
def test_an_api_error_names_the_keyword(executed):
    notebook, _ = executed
    text = "".join(o.get("text", "") for o in outputs(notebook.cells[3]))
    assert "already holds a run: pass resume=True to continue it, or choose another out=" in text
    assert "--resume" not in text and "--out" not in text


def test_flags_become_keywords():
    assert in_python_terms("continue with --resume --retry-errors, --model-cache-only or --model-cache X") == \
        "continue with resume=True retry_errors=True, model_cache_only=True or model_cache= X"
