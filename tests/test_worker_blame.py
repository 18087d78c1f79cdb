"""Whose doing a dead sandbox worker is (docs/concepts/outcomes.md, the blame rules), through the real `vtb run`:
code that kills its own worker is the model's (the call fails, the worker restarts, the model reads
it and the task is graded); a worker that dies because its fork server ended is the sandbox's
(``sandbox_error``: ``tests/test_sandbox_forkserver.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import write_task
from support.cli import vtb

KILLING_CODE = "import os\nos._exit(3)"
CROPPING_CODE = ("from PIL import Image\nim = Image.open('image_0.png')\n"
                 "im.crop((340, 260, 400, 300)).save('transformed_image_0.png')\nprint('ok')")


@pytest.mark.slow
def test_code_that_kills_its_worker_is_the_models_doing_and_graded(tmp_path: Path) -> None:
    root = tmp_path / "tasks"
    folder = write_task(root, "t-kill")
    task = json.loads((folder / "task.json").read_text())
    task["turns"][0]["trajectory"] = [{"tool": "python_image_processing", "args": {"code": KILLING_CODE}},
                                      {"tool": "python_image_processing", "args": {"code": CROPPING_CODE}}]
    (folder / "task.json").write_text(json.dumps(task))
    run = tmp_path / "run"
    done = vtb("run", "--tasks", root, "--model", "replay", "--out", run, cwd=tmp_path, path=[tmp_path])
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((run / "results.jsonl").read_text())
    assert result["outcome"] == "answered" and result["grade"]["graded"] is True
    killed, cropped = result["episode"]["turns"][0]["tool_calls"]
    assert not killed["ok"] and "exited with code 3" in killed["output"], killed["output"]
    assert cropped["ok"], cropped["output"]  # a fresh worker ran the next call
    summary = json.loads((run / "summary.json").read_text())
    assert summary["complete"] is True and summary["outcomes"] == {"answered": 1}
