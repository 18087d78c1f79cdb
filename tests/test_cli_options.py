"""The `vtb` command line reads naturally: no `--no-no-*` flags, the ablation switches keep their old
spellings, and `-v` shows the package's log messages on stderr."""

from __future__ import annotations

from functools import partial
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import typer.main

from vtb_agents.cli import app
from support import cli
from vtb_agents.rundir.read import read_record

ROOT = Path(__file__).resolve().parents[1]


vtb = partial(cli.vtb, cwd=ROOT, columns=250, timeout=240)
"""The real `vtb` command (python -m vtb_agents); a wide terminal so that log lines are not wrapped."""


def every_command(command: Any, path: str = "vtb") -> list[tuple[str, Any]]:
    """``command`` and all its subcommands, depth first, with their command lines."""
    found = [(path, command)]
    for name, sub in getattr(command, "commands", {}).items():
        found += every_command(sub, f"{path} {name}")
    return found


def test_no_option_of_any_command_starts_with_no_no() -> None:
    commands = every_command(typer.main.get_command(app))
    assert len(commands) > 20  # the whole tree was walked: run, ablate, tasks ..., sandbox exec, ...
    flags = {(path, flag) for path, command in commands for param in command.params
             for flag in [*param.opts, *param.secondary_opts]}
    assert not [(path, flag) for path, flag in flags if flag.startswith("--no-no-")]
    assert {("vtb run", "--tools"), ("vtb run", "--no-tools"), ("vtb run", "--vision-tool"),
            ("vtb run", "--no-vision-tool"), ("vtb run", "--resume"), ("vtb ablate", "--resume")} <= flags
    assert ("vtb run", "--no-resume") not in flags  # a plain switch, off unless given


def test_tools_and_vision_tool_default_on_and_turn_off_with_the_old_spellings() -> None:
    run = typer.main.get_command(app).commands["run"]
    defaults = run.make_context("run", []).params
    assert defaults["tools"] is True and defaults["vision_tool"] is True and defaults["resume"] is False
    off = run.make_context("run", ["--no-tools", "--no-vision-tool", "--resume"]).params
    assert off["tools"] is False and off["vision_tool"] is False and off["resume"] is True


@pytest.mark.slow
def test_no_tools_and_no_vision_tool_reach_the_recorded_run(tmp_path: Path) -> None:
    out = tmp_path / "ablated"
    done = vtb("run", "--tasks", "sample", "--model", "replay", "--judge", "rule", "--limit", "1",
               "--no-tools", "--no-vision-tool", "--out", str(out))
    assert done.returncode == 0, done.stderr
    config = json.loads((out / "run.json").read_text())["config"]
    assert config["no_tools"] is True and config["no_vision_tool"] is True

    assert read_record(out).config.no_tools is True


def test_verbose_shows_the_packages_info_messages_on_stderr(tmp_path: Path) -> None:
    # A sandbox folder whose owner process is gone: the first sandbox of the next run removes it
    # and says so at INFO level (vtb_agents' sandbox clean-up), which only -v shows.
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    temp = tmp_path / "tmp"
    temp.mkdir()
    code = tmp_path / "code.py"
    code.write_text("print(6 * 7)\n")
    message = "removed 1 sandbox folder(s) left by killed runs"

    (temp / f"vtb-sandbox-{gone.stdout.strip()}-quiet").mkdir()
    quiet = vtb("sandbox", "exec", "--code-file", str(code), env={"TMPDIR": str(temp)})
    assert quiet.returncode == 0, quiet.stderr
    assert "42" in quiet.stdout and message not in quiet.stderr
    assert not (temp / f"vtb-sandbox-{gone.stdout.strip()}-quiet").exists()  # removed all the same

    (temp / f"vtb-sandbox-{gone.stdout.strip()}-loud").mkdir()
    loud = vtb("-v", "sandbox", "exec", "--code-file", str(code), env={"TMPDIR": str(temp)})
    assert loud.returncode == 0, loud.stderr
    assert "42" in loud.stdout
    assert message in loud.stderr and "INFO" in loud.stderr and "vtb_agents" in loud.stderr, loud.stderr
    assert message not in loud.stdout  # logs go to stderr only


def test_verbose_is_counted_and_documented() -> None:
    done = vtb("--help")
    assert done.returncode == 0
    assert "--verbose" in done.stdout and "-v" in done.stdout
    callback = typer.main.get_command(app)
    assert callback.make_context("vtb", ["-vv", "models"]).params["verbose"] == 2


NOT_SETTINGS = {"--out", "--resume", "--retry-errors", "--concurrency", "--limit", "--category", "--task-id",
                "--status", "--skip-invalid", "--executor", "--workers", "--ray-address", "--judge-cache",
                "--langsmith-experiment", "--langsmith-dataset", "--tools", "--vision-tool", "--batch-poll", "--help"}
"""`vtb run`'s options that are no run setting: what runs, where it is written, how it is run."""


def test_every_run_setting_has_one_flag_and_every_run_flag_one_setting() -> None:
    """One table (CONFIG_FLAGS) maps RunConfig's fields to `vtb run`'s flags: a setting is one field and one row."""
    from vtb_agents.cli.options import CONFIG_FLAGS, NOT_FLAGS, config_help
    from vtb_agents.config import EpisodeSettings, RunConfig

    settings = (set(RunConfig.model_fields) - {"episode"}) | set(EpisodeSettings.model_fields)
    assert set(CONFIG_FLAGS) | set(NOT_FLAGS) == settings and not set(CONFIG_FLAGS) & set(NOT_FLAGS)
    for command in ("run", "ablate"):
        params = typer.main.get_command(app).commands[command].params
        flags = {flag: param for param in params for flag in [*param.opts, *param.secondary_opts]}
        own = {"prompt_level", "no_tools", "no_vision_tool"}  # `vtb ablate` sets them per condition
        assert {f for name, f in CONFIG_FLAGS.items() if command == "run" or name not in own} <= set(flags)
        primary = {param.opts[0]: param for param in params if param.opts}
        assert set(primary) - set(CONFIG_FLAGS.values()) - NOT_SETTINGS - {"--setting"} == set()
        for name, flag in CONFIG_FLAGS.items():
            if flag in primary:  # its own option (not the --no- side of --tools / --vision-tool)
                assert primary[flag].help == config_help(name) != "", name


def test_a_bad_setting_is_refused_naming_its_flag() -> None:
    done = vtb("run", "--history", "nope", "--limit", "1")
    assert done.returncode == 2 and "--history must be one of 'golden', 'model', not 'nope'" in done.stderr
    done = vtb("run", "--tools-mode", "record", "--limit", "1")
    assert done.returncode == 2 and "--tools-mode record needs --tools-cache PATH" in done.stderr


def test_workers_sizes_process_and_ray_executors_and_is_refused_for_threads(capsys) -> None:
    import pytest

    from vtb_agents.cli.options import make_executor

    assert make_executor("ray", None, 8, 3).workers == 3
    assert make_executor("ray", None, 8).workers is None  # one actor per node with CPUs
    assert make_executor("processes", None, 8, 2).workers == 2
    with pytest.raises(typer.Exit) as refused:
        make_executor("local", None, 8, 2)
    assert refused.value.exit_code == 2
    assert "--workers needs --executor processes or ray" in capsys.readouterr().err
