"""vtb ablate: one run per setting, each with the setting applied, and the comparison page."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from vtb_agents.cli import app
from vtb_agents.runner.ablate import ABLATIONS


def test_ablate_runs_every_setting_and_writes_the_comparison(task_root, tmp_path):
    out = tmp_path / "ablation"
    result = CliRunner().invoke(app, ["ablate", "--tasks", str(task_root), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "ablation.html").exists() and "Runs compared" in result.output
    runs = {name: json.loads((out / name / "results.jsonl").read_text().splitlines()[0]) for name in ABLATIONS}
    settings = {name: run["episode"]["settings"] for name, run in runs.items()}
    assert settings["strong_prompt"]["prompt_level"] == "high" and settings["weak_prompt"]["prompt_level"] == "low"
    assert "python_image_processing" in settings["strong_prompt"]["tools"]
    assert "python_image_processing" not in settings["no_vision_tool"]["tools"]
    assert "calculator" in settings["no_vision_tool"]["tools"]
    assert settings["no_tools"]["tools"] == []
    summaries = {name: json.loads((out / name / "summary.json").read_text()) for name in ABLATIONS}
    # The replay agent skips the steps whose tool is not offered, so it uses no tool without vision.
    assert summaries["strong_prompt"]["tool_metrics"]["proactivity"] == 1.0
    assert summaries["no_vision_tool"]["tool_metrics"]["proactivity"] == 0.0
    assert summaries["no_tools"]["tool_metrics"]["calls"] == 0
    page = (out / "ablation.html").read_text()
    assert all(name in page for name in ABLATIONS) and "<svg" in page and "http://" not in page.split("<svg")[0]


def test_ablate_refuses_an_unknown_setting(task_root, tmp_path):
    result = CliRunner().invoke(app, ["ablate", "--tasks", str(task_root), "--out", str(tmp_path / "a"),
                                      "--setting", "no_brain"])
    assert result.exit_code == 2 and "--setting must be one of strong_prompt" in result.output
