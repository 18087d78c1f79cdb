"""`vtb grade` rewrites the report it changes (issue #31): after a regrade with another judge, report.html
shows the new summary's APR and ARS and every task page the new verdicts (real CLI, LLM judges on the
local OpenAI server)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import checkout_env, write_task
from openai_server import OpenAIServer
from scripted_vision import VisionModel

from vtb_agents.report.markup import pct
from vtb_agents.rundir.layout import task_page_file

TASK_IDS = ("t0", "t1", "t2")
LENIENT, STRICT = "judge-lenient", "judge-strict"


def respond(vision: VisionModel):
    """The agent (scripted vision model) and two judges: one finds every rubric met, one none."""
    def reply(body: dict[str, Any]) -> Any:
        if body["model"] in (LENIENT, STRICT):
            verdict = "met" if body["model"] == LENIENT else "not_met"
            return json.dumps({"verdict": verdict, "justification": f"{body['model']} says {verdict}"})
        return vision(body)
    return reply


def vtb(*args: str, base_url: str) -> subprocess.CompletedProcess[str]:
    env = checkout_env(OPENAI_BASE_URL=base_url, OPENAI_API_KEY="k", COLUMNS="250")
    return subprocess.run([sys.executable, "-m", "vtb_agents", *args], env=env, capture_output=True, text=True,
                          timeout=300)


def headline(report: str, name: str) -> str:
    """A headline figure (APR, ARS) of report.html as shown."""
    found = re.search(rf'<div class="kpi"><b>([^<]*)</b><span>{name}</span></div>', report)
    assert found, f"no {name} in the report"
    return found.group(1)


def verdict_rows(page: str) -> list[tuple[str, str]]:
    """(status class, row HTML) of every verdict row of a task page."""
    return re.findall(r'<tr class="(met|not_met|unjudged|error)">(.*?)</tr>', page, re.DOTALL)


def test_vtb_grade_with_another_judge_rewrites_the_report_and_every_task_page(tmp_path: Path) -> None:
    root, run = tmp_path / "tasks", tmp_path / "run"
    for task_id in TASK_IDS:
        folder = write_task(root, task_id)
        task = json.loads((folder / "task.json").read_text())
        task["turns"][0]["prompt"] += f" ({task_id})"
        task["turns"][0]["rubrics"]["r2"].update({"weight": 5, "critical": "yes"})  # the judge decides the pass
        (folder / "task.json").write_text(json.dumps(task))
    with OpenAIServer(respond(VisionModel())) as server:
        ran = vtb("run", "--tasks", str(root), "--model", "openai:vision-test", "--judge", f"openai:{LENIENT}",
                  "--out", str(run), base_url=server.base_url)
        assert ran.returncode == 0, ran.stderr
        assert headline((run / "report.html").read_text(), "APR") == "100.0%"
        graded = vtb("grade", str(run), "--judge", f"openai:{STRICT}", base_url=server.base_url)
    assert graded.returncode == 0, graded.stderr
    summary = json.loads((run / "summary.json").read_text())
    assert summary["apr"] == 0.0 and summary["judge"]["model"] == f"openai:{STRICT}"
    report = (run / "report.html").read_text()
    assert headline(report, "APR") == pct(summary["apr"]) == "0.0%"
    assert headline(report, "ARS") == pct(summary["ars"])
    assert f"judge openai:{STRICT}" in report and LENIENT not in report
    for task_id in TASK_IDS:
        page = task_page_file(run, task_id).read_text()
        rows = verdict_rows(page)
        judged = [row for status, row in rows if f"openai:{STRICT}" in row]
        assert len(judged) == 1 and ("not_met", judged[0]) in rows, task_id
        assert f"{STRICT} says not_met" in page and LENIENT not in page, task_id
    assert f"report: {run / 'report.html'}" in graded.stdout
