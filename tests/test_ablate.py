"""vtb ablate: one run per setting, each with the setting applied, and the comparison page."""

from __future__ import annotations

import json

import typer
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


def _options(command: str) -> set[str]:
    click_app = typer.main.get_command(app)
    return {name for param in click_app.commands[command].params for name in param.opts}  # type: ignore[attr-defined]


def test_ablate_offers_every_run_option_but_the_ablated_and_single_run_ones():
    only_run = _options("run") - _options("ablate")
    # the ablation sets the prompt and the tools itself; a LangSmith experiment is per run
    assert only_run == {"--prompt-level", "--tools", "--vision-tool",
                        "--langsmith-experiment", "--langsmith-dataset"}
    assert _options("ablate") - _options("run") == {"--setting"}  # --judge-cache: one cache for every setting


def test_ablate_passes_the_run_options_to_every_setting(task_root, tmp_path):
    out = tmp_path / "ablation"
    result = CliRunner().invoke(app, ["ablate", "--tasks", str(task_root), "--out", str(out), "--setting", "no_tools",
                                      "--setting", "weak_prompt", "--task-timeout", "300", "--rps", "50",
                                      "--request-timeout", "30", "--max-image-side", "512", "--native-tool-images",
                                      "--sandbox", "local", "--resumer", "scripted"])
    assert result.exit_code == 0, result.output
    for setting in ("no_tools", "weak_prompt"):
        config = json.loads((out / setting / "run.json").read_text())["config"]
        assert config["requests_per_second"] == 50 and config["request_timeout_s"] == 30
        assert config["episode"]["task_timeout_s"] == 300 and config["episode"]["max_image_side"] == 512
        assert config["episode"]["native_tool_images"] is True
    weak = json.loads((out / "weak_prompt" / "run.json").read_text())["config"]
    assert weak["episode"]["prompt_level"] == "low" and not weak["no_tools"]


def test_ablate_names_the_flag_of_a_bad_option(task_root, tmp_path):
    result = CliRunner().invoke(app, ["ablate", "--tasks", str(task_root), "--out", str(tmp_path / "a"),
                                      "--sandbox-network"])
    assert result.exit_code == 2 and "--sandbox-network needs --sandbox e2b" in result.output


def test_a_resumed_ablation_rewrites_the_reports_its_settings_have(task_root, tmp_path):
    """A setting's report.html (written by `vtb report`) shows the setting's results after the ablation
    resumes with more tasks: no report is left with figures its run no longer has."""
    import re

    from conftest import write_task

    out = tmp_path / "ablation"
    runner = CliRunner()
    first = runner.invoke(app, ["ablate", "--tasks", str(task_root), "--out", str(out), "--setting", "no_tools"])
    assert first.exit_code == 0, first.output
    assert not (out / "no_tools" / "report.html").exists()  # an ablation writes no per-setting report itself
    assert runner.invoke(app, ["report", str(out / "no_tools")]).exit_code == 0

    def tasks_shown() -> str:
        found = re.search(r'<div class="kpi"><b>([^<]*)</b><span>tasks</span>', (out / "no_tools" / "report.html")
                          .read_text())
        assert found
        return found.group(1)

    assert tasks_shown() == "1"
    write_task(task_root, "t-second")
    again = runner.invoke(app, ["ablate", "--tasks", str(task_root), "--out", str(out), "--setting", "no_tools",
                                "--resume"])
    assert again.exit_code == 0, again.output
    assert json.loads((out / "no_tools" / "summary.json").read_text())["tasks"] == 2
    assert tasks_shown() == "2"
