"""A run checks its parts before it spends anything (docs/how-to/doctor.md).

Through the real ``vtb`` in a subprocess: a sandbox whose PIL cannot import its PNG plugin, and
every kind of broken plugin (sandbox, judge, tool, strategy, agent), stop ``vtb run`` and ``vtb
ablate`` before the first task with exit status 2, one ``error:`` line naming the part and the
cause, no traceback, and no run directory; ``vtb doctor`` names the same part and shows the
isolation reached and the library versions inside the sandbox. A sandbox that can no longer be
built during a task is ``sandbox_error``.
"""

from __future__ import annotations

import json
import subprocess
from functools import partial
from pathlib import Path

import PIL
import pytest

import vtb_agents
from support.docs_blocks import page_blocks
from support.cli import vtb
from support.together import together
from vtb_agents.runner.preflight import PreflightError

ROOT = Path(__file__).resolve().parents[1]
DOCTOR_PAGE = "docs/how-to/doctor.md"
PLUGIN_PAGE = "docs/how-to/write-a-plugin.md"

PLUGINS = '''
import os
from pathlib import Path

from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool, tool
from vtb_agents.models.scripted import ScriptedChatModel
from vtb_agents.sandbox import LocalSandbox

BLOCK_PNG_PLUGIN = """
import sys
class _NoPngPlugin:
    def find_spec(self, name, path=None, target=None):
        if name == "PIL.PngImagePlugin":
            raise ImportError("PIL.PngImagePlugin is not importable in this environment")
        return None
sys.meta_path.insert(0, _NoPngPlugin())
sys.modules.pop("PIL.PngImagePlugin", None)
"""


class NoPngSandbox(LocalSandbox):
    """The local sandbox in an environment where PIL's PNG plugin cannot be imported (as in a venv
    the sandbox cannot see: PIL itself imports, its lazily loaded plugins do not)."""

    def run(self, code, timeout=30.0):
        if not getattr(self, "_environment_set", False):
            self._environment_set = True
            super().run(BLOCK_PNG_PLUGIN)
        return super().run(code, timeout)


class NoProtocol:
    """Built fine, but no sandbox: no run, no files."""

    def __init__(self, workdir=None, **options):
        self.options = options


class MakesItsFolder:
    """Follows `Class(workdir, **options)` assuming a folder is always given."""

    def __init__(self, workdir, **options):
        self.workdir = Path(workdir)


class NeedsDocker:
    def __init__(self, workdir=None, **options):
        raise RuntimeError("cannot reach the docker daemon")


class BuildsOnce(LocalSandbox):
    """Builds the first time (the check before the run), then its backend is gone."""

    def __init__(self, workdir=None, **options):
        marker = Path(os.environ["MARKER"])
        if marker.exists():
            raise ConnectionError("the sandbox service went away")
        marker.write_text("built once")
        super().__init__(workdir, **options)


class BrokenJudge:
    name = "broken"
    calls_model = False

    def __init__(self):
        raise RuntimeError("judge settings file missing")

    def judge(self, *, task, turn, rubric, answer):
        raise AssertionError("never asked")


class BrokenTool(BaseTool):
    name: str = "broken_tool"
    description: str = "never built"

    def __init__(self, **kwargs):
        raise RuntimeError("tool needs an API key")

    def _run(self, *args, **kwargs):
        return ""


@tool("look up")
def spaced(word: str) -> str:
    """A tool whose name no provider accepts."""
    return word


def broken_strategy():
    raise RuntimeError("strategy graph has a dangling edge")


def not_a_graph():
    return "a graph, promised"


def failing_factory(tools, *, system_prompt, middleware):
    raise RuntimeError("factory needs MY_AGENT_KEY")


COMPILED = create_agent(ScriptedChatModel(script=lambda messages: AIMessage("42")), [spaced])
'''


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the plugin modules: ``pf.plugins`` and ``pf.badagent`` (raises on import)."""
    root = tmp_path_factory.mktemp("preflight-lib")
    (root / "pf").mkdir()
    (root / "pf" / "__init__.py").write_text("")
    (root / "pf" / "plugins.py").write_text(PLUGINS)
    (root / "pf" / "badagent.py").write_text('raise RuntimeError("agent module broken at import")\n')
    return root


def lib_env(lib: Path, marker: Path | None = None) -> dict[str, str]:
    """The variables of a ``vtb`` run of the plugins under ``lib``: a wide terminal and the file a plugin marks."""
    return {"COLUMNS": "250", "MARKER": str(marker or lib / "unused-marker")}


def assert_refused(done: subprocess.CompletedProcess[str], out: Path, *expected: str) -> str:
    """Exit 2, exactly one ``error:`` line holding every ``expected`` text, no traceback, no run directory."""
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    assert len(errors) == 1, done.stderr
    assert "Traceback" not in done.stderr + done.stdout and "╭" not in done.stderr, done.stderr
    for text in expected:
        assert text in errors[0], (text, errors[0])
    assert not out.exists(), sorted(p.name for p in out.iterdir())
    return errors[0]


@pytest.mark.slow
def test_a_sandbox_whose_pil_plugins_cannot_be_imported_stops_the_run_and_doctor_names_it(lib, tmp_path):
    out = tmp_path / "run"
    done, doctor, ablate = together(  # side by side: each checks the sandbox on its own
        lambda: vtb("run", "--tasks", "sample", "--limit", "2", "--sandbox", "pf.plugins:NoPngSandbox", "--out",
                    str(out), path=[lib], cwd=ROOT, env=lib_env(lib)),
        lambda: vtb("doctor", "--sandbox", "pf.plugins:NoPngSandbox", path=[lib], cwd=ROOT, env=lib_env(lib)),
        lambda: vtb("ablate", "--tasks", "sample", "--limit", "1", "--sandbox", "pf.plugins:NoPngSandbox",
                    "--out", str(tmp_path / "ablation"), path=[lib], cwd=ROOT, env=lib_env(lib)))
    line = assert_refused(done, out, "sandbox 'pf.plugins:NoPngSandbox'", 'the canary cell failed at "open a PNG '
                          'with PIL"', "UnidentifiedImageError", "nothing was run or written")
    assert "vtb_canary.png" in line
    documented = page_blocks(DOCTOR_PAGE, "text")[0].code.strip()  # the page's example, for a sandbox of its own
    assert documented == line.replace("pf.plugins:NoPngSandbox", "my_pkg.boxes:Docker")
    assert doctor.returncode == 1, doctor.stderr
    assert "FAILED  sandbox 'pf.plugins:NoPngSandbox'" in doctor.stdout
    assert [line for line in doctor.stderr.splitlines() if line.startswith("error:")] == [
        line.removesuffix(" (checked before the first task: nothing was run or written)")]
    assert_refused(ablate, tmp_path / "ablation", "sandbox 'pf.plugins:NoPngSandbox'", "open a PNG with PIL")


def test_the_same_sandbox_stops_evaluate_with_a_runtime_error(lib, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(lib))
    with pytest.raises(PreflightError, match=r"sandbox 'pf.plugins:NoPngSandbox': the canary cell failed at "
                                             r"\"open a PNG with PIL\": UnidentifiedImageError") as refused:
        vtb_agents.evaluate(tasks=vtb_agents.load_tasks("sample", limit=1), sandbox="pf.plugins:NoPngSandbox",
                            out=tmp_path / "run")
    assert isinstance(refused.value, RuntimeError)
    assert not (tmp_path / "run").exists()


BROKEN = {
    "sandbox without the protocol": (("--sandbox", "pf.plugins:NoProtocol"), (
        "sandbox 'pf.plugins:NoProtocol' built a NoProtocol, which lacks the Sandbox protocol's workdir, isolation, "
        "run, put_file, get_file, list_files, close",)),
    "sandbox expecting a folder": (("--sandbox", "pf.plugins:MakesItsFolder"), (
        "sandbox 'pf.plugins:MakesItsFolder' could not be built as MakesItsFolder(None): TypeError",
        "a run builds it with workdir None")),
    "sandbox whose constructor raises": (("--sandbox", "pf.plugins:NeedsDocker"), (
        "sandbox 'pf.plugins:NeedsDocker' could not be built as NeedsDocker(None): RuntimeError: cannot reach the "
        "docker daemon",)),
    "judge class whose __init__ raises": (("--judge", "pf.plugins:BrokenJudge"), (
        "judge 'pf.plugins:BrokenJudge': building it failed: RuntimeError: judge settings file missing",)),
    "tool class whose __init__ raises": (("--tool", "pf.plugins:BrokenTool"), (
        "tool 'pf.plugins:BrokenTool': building it failed: RuntimeError: tool needs an API key",)),
    "tool whose name no provider accepts": (("--tool", "pf.plugins:spaced"), (
        "tool 'look up': its name must be 1 to 64 letters, digits, '_' or '-'",)),
    "strategy whose build raises": (("--strategy", "pf.plugins:broken_strategy"), (
        "strategy 'pf.plugins:broken_strategy': building its turn graph failed: RuntimeError: strategy graph has a "
        "dangling edge",)),
    "strategy that builds no graph": (("--strategy", "pf.plugins:not_a_graph"), (
        "strategy 'pf.plugins:not_a_graph': its build returned a str, not a compiled LangGraph graph",)),
    "agent module that raises on import": (("--model", "agent:pf.badagent:build"), (
        "agent spec 'agent:pf.badagent:build': cannot load it: RuntimeError: agent module broken at import",)),
    "agent factory that raises": (("--model", "agent:pf.plugins:failing_factory"), (
        "agent 'agent:pf.plugins:failing_factory': its factory failed when called with the run's tools: "
        "RuntimeError: factory needs MY_AGENT_KEY",)),
    "compiled agent without the run's tools": (("--model", "agent:pf.plugins:COMPILED"), (
        "agent 'agent:pf.plugins:COMPILED': a ready CompiledStateGraph cannot be given the episode's tools",
        "lacks the run's tools browser_get_page_text, calculator, historical_weather, python_image_processing, "
        "python_interpreter, web_search", "has tools the run does not offer: look up")),
}


@pytest.fixture(scope="module")
def refusals(lib: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[subprocess.CompletedProcess[str],
                                                                                     Path]]:
    """Each case of ``BROKEN``: ``vtb run`` with its flags and the folder it was told to write, all side by side
    (each is refused on its own, before anything is written)."""
    root = tmp_path_factory.mktemp("refused")

    def refused(number: int, flags: tuple[str, ...]) -> tuple[subprocess.CompletedProcess[str], Path]:
        out = root / str(number) / "run"
        return vtb("run", "--tasks", "sample", "--limit", "1", *flags, "--out", str(out), path=[lib], cwd=ROOT,
                   env=lib_env(lib)), out

    runs = together(*(partial(refused, n, flags) for n, (flags, _) in enumerate(BROKEN.values())))
    return dict(zip(BROKEN, runs, strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_plugin_refuses_the_run_in_one_line_before_anything_is_written(case, refusals):
    done, out = refusals[case]
    assert_refused(done, out, *BROKEN[case][1])


@pytest.mark.slow
def test_doctor_shows_the_isolation_and_the_versions_inside_the_sandbox(lib):
    done = vtb("doctor", path=[lib], cwd=ROOT, env=lib_env(lib))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for part in ("judge 'rule'", "tool 'python_image_processing'", "strategy 'react'", "sandbox 'local'"):
        assert any(line.startswith("ok") and part in line for line in lines), (part, done.stdout)
    facts = dict(line.strip().split(": ", 1) for line in lines if line.startswith("  ") and ": " in line)
    assert facts["isolation"] in ("bwrap", "fallback", "process")
    assert facts["fork server"] in ("yes", "no") and facts["memory cap"] and facts["syscall filter"]
    assert facts["pillow"] == f"{PIL.__version__} / {PIL.__version__}"  # the same interpreter, here and inside
    assert facts["python"].split(" / ")[0] == facts["python"].split(" / ")[1]
    assert facts["opencv"].split(" / ")[1] != "-" and facts["langgraph"].split(" / ")[1] == "-"
    assert lines[-1].startswith("all ") and lines[-1].endswith("check(s) passed")


def test_doctor_names_every_failed_part_and_still_checks_the_sandbox(lib):
    done = vtb("doctor", "--judge", "pf.plugins:BrokenJudge", "--sandbox", "pf.plugins:NoProtocol", path=[lib],
               cwd=ROOT, env=lib_env(lib))
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 2, done.stderr
    assert "judge 'pf.plugins:BrokenJudge': building it failed: RuntimeError" in errors[0]
    assert "sandbox 'pf.plugins:NoProtocol' built a NoProtocol, which lacks the Sandbox protocol's" in errors[1]
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_a_sandbox_that_cannot_be_built_during_a_task_is_a_sandbox_error(lib, tmp_path):
    out, marker = tmp_path / "run", tmp_path / "built"
    done = vtb("run", "--tasks", "sample", "--task-id", "rs-finance-invoice", "--sandbox", "pf.plugins:BuildsOnce",
               "--out", str(out), path=[lib], cwd=ROOT, env=lib_env(lib, marker))
    assert done.returncode == 3, done.stderr  # infrastructure: the run is incomplete
    (line,) = (json.loads(raw) for raw in (out / "results.jsonl").read_text().splitlines())
    assert line["outcome"] == "sandbox_error"
    assert "sandbox 'pf.plugins:BuildsOnce' could not be built as BuildsOnce(None): ConnectionError: the sandbox " \
           "service went away" in line["episode"]["error"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["infrastructure_errors"]["count"] == 1


def test_the_docs_document_doctor_and_the_sandbox_contract() -> None:
    page = (ROOT / DOCTOR_PAGE).read_text()
    for text in ("canary", "PngImagePlugin", "vtb doctor", "exit status 1", "nothing was run or written"):
        assert text in page, text
    assert "built as `Class(workdir, **options)` with `workdir=None`" in (ROOT / PLUGIN_PAGE).read_text()
