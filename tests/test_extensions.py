"""Extensions in one file each: a judge, a tool and a sandbox backend written as one file of a
temporary package and named ``module:attr`` on ``vtb run``; and a tiny installed package whose entry
points show up in the listings and run (docs/how-to/write-a-plugin.md)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from support.openai_server import OpenAIServer
from support.cli import vtb
from support.together import together
from vtb_agents.extensions import load_extension
from vtb_agents.rundir.read import read_record

ROOT = Path(__file__).resolve().parents[1]
TASK = "ht-engineering-circuit"  # one turn; one rubric without a deterministic check goes to the judge

JUDGE = '''
from vtb_agents.judges import Judgement


class StrictJudge:
    """Met only when the answer quotes the looked-up code; asks no model."""

    name = "strict"
    calls_model = False

    def judge(self, *, task, turn, rubric, answer):
        met = "code-of-" in answer
        return Judgement("met" if met else "not_met", f"strict judge saw {answer!r}")


JUDGE = StrictJudge()
'''
TOOL = '''
from langchain_core.tools import tool


@tool
def {name}(word: str) -> str:
    """Look up the secret code of a word."""
    return f"code-of-{{word}}"
'''
SANDBOX = '''
import os
from vtb_agents.sandbox import LocalSandbox


class {name}(LocalSandbox):
    """The local sandbox, leaving a line in $MARKER each time one opens."""

    def __init__(self, workdir=None, **options):
        super().__init__(workdir, **options)
        with open(os.environ["MARKER"], "a") as marker:
            marker.write("opened\\n")
'''


def calls_tool(name: str) -> Any:
    """A model that calls tool ``name`` once, then answers with what it returned."""

    def respond(body: dict[str, Any]) -> Any:
        if body["messages"][-1]["role"] == "tool":
            return "Final answer: " + body["messages"][-1]["content"]
        return {"tool_calls": [{"name": name, "arguments": {"word": "circuit"}}]}

    return respond


def ext_env(lib: Path, server: OpenAIServer | None = None, marker: Path | None = None) -> dict[str, str]:
    """The variables of a ``vtb`` run of the extensions under ``lib``: a wide terminal, the file the test
    sandbox marks (``MARKER``) and the local OpenAI server as the provider."""
    return {"COLUMNS": "250", "OPENAI_API_KEY": "k", "MARKER": str(marker or lib / "marker"),
            **({"OPENAI_BASE_URL": server.base_url} if server else {})}


def check_run(out: Path, server: OpenAIServer, *, tool: str, judge_name: str, marker: Path) -> dict[str, Any]:
    """Assert the tool was offered and called, the judge decided and was no model call, the sandbox opened."""
    offered = [t["function"]["name"] for t in server.requests[0]["tools"]]
    assert tool in offered and "python_image_processing" in offered
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tool_metrics"]["by_tool"] == {tool: 1}
    result = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    mine = [v for v in result["grade"]["verdicts"] if v["judge"] == judge_name]
    assert len(mine) == 1 and mine[0]["status"] == "met" and "code-of-circuit" in mine[0]["justification"]
    assert mine[0]["model_call"] is False
    assert summary["judge"]["calls"] == 0 and summary["judge"]["checks"] == 4
    assert summary["cost"]["judge"] == 0.0  # no judge tokens, whatever its name's prices
    assert all("response_format" not in body for body in server.requests)  # nobody asked a model to judge
    assert marker.read_text().splitlines() == ["opened"] * 2  # the pre-run check's sandbox, then the episode's
    return summary


@pytest.mark.slow
def test_judge_tool_and_sandbox_each_one_file_named_module_attr(tmp_path: Path) -> None:
    package = tmp_path / "lib" / "myext"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "judges.py").write_text(JUDGE)
    (package / "tools.py").write_text(TOOL.format(name="lookup_code"))
    (package / "boxes.py").write_text(SANDBOX.format(name="MarkedSandbox"))
    out, marker = tmp_path / "run", tmp_path / "marker"
    flags = ["--tasks", "sample", "--task-id", TASK, "--model", "openai:gpt-4o", "--out", str(out),
             "--judge", "myext.judges:JUDGE", "--tool", "myext.tools:lookup_code",
             "--sandbox", "myext.boxes:MarkedSandbox"]
    with OpenAIServer(calls_tool("lookup_code")) as server:
        done = vtb("run", *flags, path=[tmp_path / "lib"], cwd=ROOT, env=ext_env(tmp_path / "lib", server, marker))
    assert done.returncode == 0, done.stderr
    check_run(out, server, tool="lookup_code", judge_name="strict", marker=marker)
    config = read_record(out).config
    assert (config.judge, config.extra_tools, config.sandbox) == (
        "myext.judges:JUDGE", ("myext.tools:lookup_code",), "myext.boxes:MarkedSandbox")
    resumed = vtb("run", *flags, "--resume", path=[tmp_path / "lib"], cwd=ROOT,
                  env=ext_env(tmp_path / "lib", marker=marker))  # the CLI resumes it
    assert resumed.returncode == 0, resumed.stderr
    assert marker.read_text().splitlines() == ["opened"] * 3  # the check's sandbox only: nothing left to run


@pytest.mark.slow
def test_bad_extension_specs_are_refused_naming_them(tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    (lib / "myext").mkdir(parents=True)
    (lib / "myext" / "__init__.py").write_text("not_a_tool = 3\n")
    (lib / "myext" / "j.py").write_text("class Undeclared:\n    name = 'x'\n\n    def judge(self, **kw):\n"
                                        "        return None\n")
    cases = {("--tool", "myext:not_a_tool"): "tool 'myext:not_a_tool' is a int, not a LangChain BaseTool",
             ("--tool", "myext:missing"): "tool 'myext:missing': cannot load it: AttributeError",
             ("--judge", "myext.nope:J"): "judge 'myext.nope:J': cannot load it: ModuleNotFoundError",
             ("--judge", "myext.j:Undeclared"): "it does not declare 'calls_model' (True or False",
             ("--sandbox", "nowhere"): "unknown sandbox kind 'nowhere': allowed kinds are local, e2b, 'module:Class' "
                                       "or an installed sandbox"}  # the plan decodes it, before anything is written

    def refused(option: str, spec: str) -> Callable[[], subprocess.CompletedProcess[str]]:
        return lambda: vtb("run", "--tasks", "sample", "--limit", "1", option, spec, "--out", str(tmp_path / "out"),
                           path=[lib], cwd=ROOT, env=ext_env(lib))

    runs = together(*(refused(option, spec) for option, spec in cases))  # side by side: each is refused alone
    for ((_, spec), message), done in zip(cases.items(), runs):
        assert done.returncode != 0 and message in done.stderr, (spec, done.stderr)
    assert not (tmp_path / "out").exists()  # refused before anything was written


PYPROJECT = '''
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "vtbext-installed"
version = "0.0.1"

[tool.setuptools]
packages = ["vtbext_installed"]

[project.entry-points."vtb_agents.judges"]
lenient = "vtbext_installed.judges:JUDGE"
[project.entry-points."vtb_agents.tools"]
shout = "vtbext_installed.tools:shout"
[project.entry-points."vtb_agents.sandboxes"]
marked = "vtbext_installed.boxes:Marked"
[project.entry-points."vtb_agents.strategies"]
hasty = "vtbext_installed.strategy:HASTY"
'''


@pytest.mark.slow
def test_an_installed_package_is_listed_and_usable(tmp_path: Path) -> None:
    source = tmp_path / "src"
    package = source / "vtbext_installed"
    package.mkdir(parents=True)
    (source / "pyproject.toml").write_text(PYPROJECT)
    (package / "__init__.py").write_text("")
    (package / "judges.py").write_text(JUDGE)
    (package / "tools.py").write_text(TOOL.format(name="shout"))
    (package / "boxes.py").write_text(SANDBOX.format(name="Marked"))
    (package / "strategy.py").write_text(textwrap.dedent('''
        import dataclasses
        from vtb_agents.strategies.react import react

        HASTY = dataclasses.replace(react, summary="react, installed under another name")
    '''))
    target = tmp_path / "site"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                          "--no-index", "--target", str(target), str(source)], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert pip.returncode == 0, pip.stderr
    listings = {"judges": "lenient", "tools": "shout", "sandboxes": "marked", "strategies": "hasty"}
    out, marker = tmp_path / "run", tmp_path / "marker"
    with OpenAIServer(calls_tool("shout")) as server:  # the four listings and the run side by side
        *shown_all, done = together(
            *(partial(vtb, listing, path=[target], cwd=ROOT, env=ext_env(target)) for listing in listings),
            lambda: vtb("run", "--tasks", "sample", "--task-id", TASK, "--model", "openai:gpt-4o", "--out", str(out),
                        "--judge", "lenient", "--tool", "shout", "--sandbox", "marked", "--strategy", "hasty",
                        path=[target], cwd=ROOT, env=ext_env(target, server, marker)))
    for name, shown in zip(listings.values(), shown_all, strict=True):
        assert shown.returncode == 0, shown.stderr
        line = next(line for line in shown.stdout.splitlines() if f" {name} " in line)
        assert "installed: vtbext-installed" in line or "installed: vtbext_installed" in line, shown.stdout
    assert "hasty" not in shown_all[0].stdout  # each listing shows its own kind (`vtb judges`: no strategy)
    assert done.returncode == 0, done.stderr
    summary = check_run(out, server, tool="shout", judge_name="strict", marker=marker)
    assert summary["strategy"] == "hasty"


def test_the_loader_names_the_kind_and_the_installed_names() -> None:
    with pytest.raises(ValueError, match=r"sandbox 'nope': not 'module:attr' and no installed sandbox of that "
                                         r"name \(entry point group vtb_agents.sandboxes"):
        load_extension("sandboxes", "nope")
    assert load_extension("tools", "vtb_agents.tools.calculator:calculator").name == "calculator"


def test_the_python_api_takes_the_same_specs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import vtb_agents

    lib = tmp_path / "lib"
    (lib / "apiext").mkdir(parents=True)
    (lib / "apiext" / "__init__.py").write_text("")
    (lib / "apiext" / "judges.py").write_text(JUDGE)
    (lib / "apiext" / "tools.py").write_text(TOOL.format(name="lookup_code"))
    (lib / "apiext" / "boxes.py").write_text(SANDBOX.format(name="MarkedSandbox"))
    marker = tmp_path / "marker"
    monkeypatch.syspath_prepend(str(lib))
    monkeypatch.setenv("MARKER", str(marker))
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    with OpenAIServer(calls_tool("lookup_code")) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        summary = vtb_agents.evaluate(tasks=vtb_agents.load_tasks("sample", task_id=TASK), model="openai:gpt-4o",
                                      judge="apiext.judges:JUDGE", tools=["apiext.tools:lookup_code"],
                                      sandbox="apiext.boxes:MarkedSandbox", out=tmp_path / "run")
    check_run(tmp_path / "run", server, tool="lookup_code", judge_name="strict", marker=marker)
    assert summary.judge.calls == 0
    assert read_record(tmp_path / "run").config.extra_tools == ("apiext.tools:lookup_code",)
