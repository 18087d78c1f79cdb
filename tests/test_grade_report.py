"""`vtb grade` rewrites the report it changes (issue #31): after a regrade with another judge, report.html
shows the new summary's APR and ARS and every task page the new verdicts (real CLI, LLM judges on the
local OpenAI server)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import write_task
from support.openai_server import OpenAIServer
from support.scripted_vision import VisionModel
from support.cli import openai_env, start_vtb, vtb

from vtb_agents.report.markup import pct
from vtb_agents.rundir.records import next_grading_id
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




def headline(report: str, name: str) -> str:
    """A headline figure (APR, ARS) of report.html as shown."""
    found = re.search(rf'<div class="kpi"><b>([^<]*)</b><span>{name}</span></div>', report)
    assert found, f"no {name} in the report"
    return found.group(1)


def verdict_rows(page: str) -> list[tuple[str, str]]:
    """(status class, row HTML) of every verdict row of a task page."""
    return re.findall(r'<tr class="(met|not_met|unjudged|error)">(.*?)</tr>', page, re.DOTALL)


@pytest.mark.slow
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
                  "--out", str(run), env=openai_env(server.base_url), columns=250)
        assert ran.returncode == 0, ran.stderr
        assert headline((run / "report.html").read_text(), "APR") == "100.0%"
        before = json.loads((run / "run.json").read_text())
        graded = vtb("grade", str(run), "--judge", f"openai:{STRICT}", env=openai_env(server.base_url), columns=250)
    assert graded.returncode == 0, graded.stderr
    after = json.loads((run / "run.json").read_text())  # the regrade is a grading pass of its own, of the same run
    assert before["grading_id"] == before["run_id"] and after["run_id"] == before["run_id"]
    assert after["grading_id"] == next_grading_id(before["grading_id"]) != before["grading_id"]
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


class HeldAgent:
    """The scripted vision model, whose first request for task ``held`` waits until ``release`` is set."""

    def __init__(self, held: str) -> None:
        self.vision, self.held = VisionModel(), held
        self.reached, self.release = threading.Event(), threading.Event()

    def __call__(self, body: dict[str, Any]) -> Any:
        if f"({self.held})" in json.dumps(body["messages"]) and not self.reached.is_set():
            self.reached.set()
            self.release.wait(120)
        return self.vision(body)


@pytest.mark.slow
def test_an_interrupted_resume_rewrites_the_report_the_run_has(tmp_path: Path) -> None:
    """Ctrl-C during a resume that added results: the run's existing report shows them (not the old ones)."""
    root, run = tmp_path / "tasks", tmp_path / "run"
    ids = ("t0", "t1", "t2", "t3")
    for task_id in ids:
        folder = write_task(root, task_id)
        task = json.loads((folder / "task.json").read_text())
        task["turns"][0]["prompt"] += f" ({task_id})"
        (folder / "task.json").write_text(json.dumps(task))
    common = ["run", "--tasks", str(root), "--model", "openai:vision-test", "--judge", "rule", "--out", str(run)]
    agent = HeldAgent("t2")
    with OpenAIServer(agent) as server:
        first = vtb(*common, "--task-id", "t0", env=openai_env(server.base_url), columns=250)
        assert first.returncode == 0, first.stderr
        assert headline((run / "report.html").read_text(), "tasks") == "1"
        resumed = start_vtb(*common, "--resume", env=openai_env(server.base_url), columns=250,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert agent.reached.wait(180), "task t2 never started"
            resumed.send_signal(signal.SIGINT)  # t2 finishes, t3 never starts
            time.sleep(1)
        finally:
            agent.release.set()
        _, stderr = resumed.communicate(timeout=180)
    assert resumed.returncode == 130, stderr
    summary = json.loads((run / "summary.json").read_text())
    assert summary["tasks"] == 3 and summary["missing"] == 1
    report = (run / "report.html").read_text()
    assert headline(report, "tasks") == "3"
    assert all(task_page_file(run, task_id).is_file() for task_id in ids[:3])
    assert not task_page_file(run, "t3").exists()
