"""`vtb` starts light: `vtb --help`, `vtb tasks list` and every command's `--help` run the real CLI
in a fresh interpreter without importing the runner, LangChain, LangGraph, LangSmith, the provider
clients or the plotting and array libraries; `vtb sandbox exec` runs code with the sandbox alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main
from PIL import Image

from vtb_agents.cli import app
from vtb_agents.cli.options import RunOptions
from vtb_agents.config import DEFAULTS
from vtb_agents.tasks import load_tasks

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import json, sys
out_file, sys.argv = sys.argv[1], ["vtb", *sys.argv[2:]]
from vtb_agents.cli import main
try:
    main()
    code = 0
except SystemExit as exc:
    code = exc.code
with open(out_file, "w") as f:
    json.dump(sorted(sys.modules), f)
sys.exit(code)
"""
"""Runs ``vtb ARGS...`` through the entry point (``vtb = vtb_agents.cli:main``) and writes every
module the process imported to a file."""

HEAVY = ("langsmith", "langchain", "langchain_core", "langchain_openai", "langchain_anthropic", "langgraph", "openai",
         "anthropic", "matplotlib", "pandas", "numpy", "PIL", "pyarrow", "httpx", "vtb_agents.runner",
         "vtb_agents.episodes", "vtb_agents.strategies", "vtb_agents.graphs", "vtb_agents.judges",
         "vtb_agents.report", "vtb_agents.tools", "vtb_agents.sandbox", "vtb_agents.models.spec", "vtb_agents.api")
"""What no help screen and no task listing needs (a package counts with all its submodules)."""
LANGCHAIN = ("langsmith", "langchain", "langchain_core", "langgraph", "openai", "matplotlib", "vtb_agents.runner",
             "vtb_agents.tools.toolset", "vtb_agents.tools.python_tools", "vtb_agents.strategies")
"""What running code in the sandbox (``vtb sandbox exec``) must not import."""


def vtb_modules(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run the real ``vtb ARGS...`` in a fresh interpreter: its outcome and the modules it imported."""
    modules_file = tmp_path / "modules.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    done = subprocess.run([sys.executable, "-c", PROBE, str(modules_file), *args], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=120)
    return done, set(json.loads(modules_file.read_text()))


def imported(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    """The members of ``modules`` that are one of ``packages`` or inside one."""
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


def command_lines(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command line of the ``vtb`` tree (groups and leaves), as argument tuples."""
    found = [path]
    for name, sub in getattr(command, "commands", {}).items():
        found += command_lines(sub, (*path, name))
    return found


COMMANDS = command_lines(typer.main.get_command(app))


def test_the_tree_is_walked() -> None:
    assert len(COMMANDS) > 20 and ("sandbox", "exec") in COMMANDS and ("tasks", "list") in COMMANDS


def test_help_lists_every_command_without_heavy_imports(tmp_path: Path) -> None:
    done, modules = vtb_modules(tmp_path, "--help")
    assert done.returncode == 0, done.stderr
    top = [line[0] for line in COMMANDS if len(line) == 1]
    assert {"run", "tasks", "sandbox", "models", "report", "analyze", "langsmith"} <= set(top)
    listed = done.stdout.split("Commands:")[1]
    assert [name for name in top if f"\n  {name} " not in listed] == []
    assert imported(modules, HEAVY) == []
    assert "vtb_agents.cli.run" in modules  # the commands were mounted, not skipped


@pytest.mark.slow
@pytest.mark.parametrize("line", [line for line in COMMANDS if line], ids=" ".join)
def test_every_command_help_imports_nothing_heavy(tmp_path: Path, line: tuple[str, ...]) -> None:
    done, modules = vtb_modules(tmp_path, *line, "--help")
    assert done.returncode == 0, done.stderr
    assert f"Usage: vtb {' '.join(line)}" in done.stdout
    assert imported(modules, HEAVY) == []


def test_run_help_shows_the_run_defaults(tmp_path: Path) -> None:
    done, _ = vtb_modules(tmp_path, "run", "--help")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    for option, value in [("--max-tool-rounds", DEFAULTS.episode.max_tool_rounds),
                          ("--max-image-side", DEFAULTS.episode.max_image_side),
                          ("--request-timeout", DEFAULTS.request_timeout_s), ("--strategy", DEFAULTS.strategy)]:
        shown = text.split(f"{option} <", 1)[1].split("[default: ", 1)[1]  # the option's own default
        assert shown.startswith((f"{value}]", f"{value};")), (option, shown[:40])


def test_tasks_list_imports_only_the_task_model(tmp_path: Path) -> None:
    done, modules = vtb_modules(tmp_path, "tasks", "list", "--json")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()]
    assert [row["id"] for row in rows] == [task.id for task in load_tasks("sample")]
    assert imported(modules, HEAVY) == []
    assert "vtb_agents.tasks.model" in modules


def test_sandbox_exec_runs_code_without_langchain(tmp_path: Path) -> None:
    code = tmp_path / "crop.py"
    code.write_text("from PIL import Image\n"
                    "image = Image.open('image_0.png')\n"
                    "image.crop((0, 0, 8, 4)).save('transformed_image_0.png')\n"
                    "print(6 * 7, image.size)\n")
    Image.new("RGB", (16, 12), "red").save(tmp_path / "in.png")
    done, modules = vtb_modules(tmp_path, "sandbox", "exec", "--code-file", str(code), "--image",
                                str(tmp_path / "in.png"), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["ok"] and result["stdout"].strip() == "42 (16, 12)"
    assert result["images"] == [{"name": "transformed_image_0.png", "size": [8, 4]}]
    assert imported(modules, LANGCHAIN) == []
    assert "vtb_agents.sandbox.local" in modules  # the real sandbox ran it


def test_run_options_default_to_the_run_config() -> None:
    """The options and ``RunConfig`` name the same constants (vtb_agents.defaults): one definition."""
    run = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    defaults = {param.name: param.default for param in run.params}
    episode = DEFAULTS.episode
    expected = {"tasks": DEFAULTS.tasks, "judge": DEFAULTS.judge,
                "strategy": DEFAULTS.strategy, "critical_rule": DEFAULTS.critical_rule, "resumer": DEFAULTS.resumer,
                "sandbox": DEFAULTS.sandbox, "request_timeout_s": DEFAULTS.request_timeout_s,
                "max_tool_rounds": episode.max_tool_rounds, "history": episode.history,
                "native_tool_images": episode.native_tool_images, "max_image_side": episode.max_image_side,
                "prompt_level": episode.prompt_level}
    assert {name: defaults[name] for name in expected} == expected
    # --model is repeatable (many models in one command): none given is the default model
    assert defaults["model"] == [] and RunOptions.from_params(defaults).models == (DEFAULTS.model,)


def test_the_command_collects_garbage_less_often_and_not_at_exit(tmp_path: Path) -> None:
    """The entry point sets the collector's thresholds for a command and freezes the heap on the
    way out (vtb_agents/cli/collector.py); importing the CLI as a library changes neither."""
    from vtb_agents.cli.collector import THRESHOLDS

    probe = ("import gc, json, sys\nsys.argv = ['vtb', '--help']\nimport vtb_agents.cli\n"
             "library = list(gc.get_threshold())\nfrom vtb_agents.cli import main\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "print(json.dumps([library, list(gc.get_threshold()), gc.get_freeze_count()]))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    library, command, frozen = json.loads(done.stdout.strip().splitlines()[-1])
    assert library == [700, 10, 10] and command == list(THRESHOLDS) and frozen > 10_000


def test_top_level_help_loads_no_pydantic(tmp_path: Path) -> None:
    """`vtb --help` stays within 2x of `import typer, rich` (bench/cli_startup.py): the run options' types,
    defaults and help come from the table derived from RunConfig (vtb_agents/cli/run_settings.json), so
    building every command's options imports neither pydantic nor the config module, nor the extension
    loader (importlib.metadata)."""
    done, modules = vtb_modules(tmp_path, "--help")
    assert done.returncode == 0, done.stderr
    assert imported(modules, ("pydantic", "pydantic_core", "vtb_agents.config", "vtb_agents.extensions")) == []
    assert "vtb_agents.cli.run_settings" in modules  # the run options were built, from the table


def test_the_run_settings_table_is_the_run_configs() -> None:
    """The table the options read is what RunConfig's fields give (after changing a field, run
    `python -m vtb_agents.cli.run_settings`), and every option shows its field's help."""
    from vtb_agents.cli.run_settings import TABLE_FILE, run_settings, settings_from_run_config, table_text
    from vtb_agents.config import RunConfig

    derived = settings_from_run_config()
    assert TABLE_FILE.read_text(encoding="utf-8") == table_text(derived), \
        "run `python -m vtb_agents.cli.run_settings`: vtb_agents/cli/run_settings.json differs from RunConfig"
    assert run_settings() == derived and run_settings()["epochs"].minimum == 1
    run = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    helps = {param.name: param.help for param in run.params}
    assert helps["judge"] == RunConfig.model_fields["judge"].description
    assert helps["max_tool_rounds"] == "Tool rounds allowed per turn."


def test_a_stale_run_settings_table_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A table derived from other sources (a field added since, a merge that did not rewrite it) is
    never read: the options come from the model instead, so a stale table can make `vtb` slower,
    never wrong or broken."""
    from vtb_agents.cli import run_settings as table

    rows = json.loads(table.TABLE_FILE.read_text(encoding="utf-8"))
    del rows["settings"]["epochs"]  # as if written before the field existed
    rows["settings"]["judge"]["help"] = "stale"
    stale = tmp_path / "run_settings.json"
    stale.write_text(json.dumps({**rows, "sources": "0" * 64}), encoding="utf-8")
    monkeypatch.setattr(table, "TABLE_FILE", stale)
    table.run_settings.cache_clear()
    try:
        assert table.run_settings() == table.settings_from_run_config()
        stale.write_text(json.dumps({**rows, "sources": table.sources_hash()}), encoding="utf-8")
        table.run_settings.cache_clear()
        assert "epochs" not in table.run_settings()  # a fresh table is what is read
    finally:
        table.run_settings.cache_clear()
