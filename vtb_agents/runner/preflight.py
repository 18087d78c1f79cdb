"""Checks before a run spends anything: every part built once and checked against its kind's contract.

A run's parts come from specs and objects (:func:`~vtb_agents.runner.plan.plan_run`: a spec that
cannot be loaded or built already fails there, as ValueError naming it). Then, before
the first task and before the run directory is created or written:

- **judge**: it meets :class:`~vtb_agents.judges.RubricJudge` (``name``, ``calls_model``, ``judge``);
- **tools**: each is a LangChain tool whose schema a model can be sent (name of letters, digits,
  ``_`` and ``-``, at most 64, as OpenAI and Anthropic require);
- **strategy**: ``build()`` compiles a LangGraph graph; a strategy's own ``check`` runs with the
  run's tools and system prompt (a user's agent: a factory is called once and must return a
  Runnable, a ready Runnable must hold exactly the run's tools, :mod:`vtb_agents.strategies.agent`);
- **sandbox**: one sandbox is built as every task's is (``Class(None, **options)``), must have the
  :class:`~vtb_agents.sandbox.Sandbox` protocol, and runs the canary cell
  (:mod:`vtb_agents.sandbox.canary`: PIL open/crop/save of PNG and JPEG, NumPy, OpenCV), then closes.

:func:`require` stops at the first failure with :class:`PreflightError`, one line naming the part
and the cause; ``vtb doctor`` (:func:`doctor_checks`) runs every check and shows what each found:
the isolation the sandbox reached and the library versions inside it.
"""

from __future__ import annotations

import platform
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Literal

from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.pregel import Pregel

from vtb_agents.config import RunConfig
from vtb_agents.graphs.prompts import system_prompt
from vtb_agents.judges import RubricJudge, judge_problem
from vtb_agents.rundir.errors import RunError
from vtb_agents.runner.plan import NO_OBJECTS, RunObjects, RunPlan, SandboxOpener, plan_run, sandbox_opener
from vtb_agents.sandbox.base import SandboxError
from vtb_agents.sandbox.canary import run_canary
from vtb_agents.strategies.base import Strategy

TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
"""A tool name every provider accepts (OpenAI's and Anthropic's function-name rule)."""
HOST_LIBRARIES = {"langgraph": ("langgraph",), "langchain-core": ("langchain-core",), "langchain": ("langchain",),
                  "pillow": ("pillow",), "numpy": ("numpy",),
                  "opencv": ("opencv-python-headless", "opencv-python", "opencv-contrib-python-headless",
                             "opencv-contrib-python")}
"""The libraries ``vtb doctor`` reports for this process, by the distributions that provide them."""


PartKind = Literal["judge", "tool", "strategy", "agent", "sandbox", "specs"]
SANDBOX_FACTS = ("isolation", "fork server", "memory cap", "syscall filter", "network")
"""What the sandbox's check records of the confinement it reached."""


@dataclass(frozen=True)
class Check:
    """One part of a run checked: its ``kind`` and ``name`` (the spec or the object's name; ``specs``:
    the run's specs failed to load, the loader's message names which), ``problem`` (None: it passed)
    and what the check found (shown by ``vtb doctor``): ``facts`` (the sandbox's
    :data:`SANDBOX_FACTS`, whether a judge calls a model) and ``libraries`` (versions in the sandbox)."""

    kind: PartKind
    name: str
    problem: str | None = None
    facts: dict[str, str] = field(default_factory=dict)
    libraries: dict[str, str] = field(default_factory=dict)

    @property
    def part(self) -> str:
        """The part as errors name it: ``sandbox 'local'`` (empty for ``specs``)."""
        return "" if self.kind == "specs" else f"{self.kind} {self.name!r}"

    @property
    def line(self) -> str:
        """The one line of a failed check: the part, then the cause (not repeating the part's name)."""
        problem = self.problem or "passed"
        return problem if problem.startswith(self.part) else f"{self.part}: {problem}"  # "" starts every text


class PreflightError(RunError):
    """A part of the run failed its check before the first task: nothing was run or written."""

    def __init__(self, check: Check) -> None:
        self.check = check
        super().__init__(f"{check.line} (checked before the first task: nothing was run or written)")


def _failure(kind: PartKind, name: str, exc: BaseException) -> Check:
    """The failed check of a part that raised ``exc`` (the message of a ValueError or SandboxError
    says it all; other exceptions are named by their type too)."""
    said = isinstance(exc, (ValueError, SandboxError)) and str(exc)
    return Check(kind, name, str(exc) if said else f"{type(exc).__name__}: {exc}")


def check_judge(judge: RubricJudge, name: str) -> Check:
    """The judge meets the judge contract."""
    problem = judge_problem(judge)
    if problem is not None:
        return Check("judge", name, f"is not a judge (vtb_agents.judges.RubricJudge): {problem}")
    return Check("judge", name, facts={"calls a model": "yes" if judge.calls_model else "no"})


def check_tool(tool: BaseTool) -> Check:
    """``tool``'s name is one providers accept and its schema converts to a function definition."""
    if not TOOL_NAME.match(tool.name):
        return Check("tool", tool.name, "its name must be 1 to 64 letters, digits, '_' or '-' (what model "
                                        "providers accept)")
    try:
        convert_to_openai_tool(tool)
    except Exception as exc:  # the user's tool: its schema cannot be sent, named here
        return Check("tool", tool.name, f"its schema cannot be sent to a model: {type(exc).__name__}: {exc}")
    return Check("tool", tool.name)


def check_strategy(strategy: Strategy, tools: list[BaseTool], prompt: str) -> Iterator[Check]:
    """The strategy compiles a graph; its own check (a user's agent) passes with the run's tools."""
    try:
        graph = strategy.build()
    except Exception as exc:  # the user's build: named, not raised
        yield Check("strategy", strategy.name, f"building its turn graph failed: {type(exc).__name__}: {exc}")
        return
    if not isinstance(graph, Pregel):
        yield Check("strategy", strategy.name, f"its build returned a {type(graph).__name__}, not a compiled "
                                               "LangGraph graph (StateGraph(...).compile())")
        return
    yield Check("strategy", strategy.name)
    if strategy.check is not None:
        try:
            strategy.check(tools, prompt)
        except Exception as exc:  # the agent's check names what is wrong
            yield _failure("agent", strategy.name, exc)
            return
        yield Check("agent", strategy.name, facts={"tools": ", ".join(t.name for t in tools) or "none"})


def check_sandbox(open_sandbox: SandboxOpener, kind: str) -> Check:
    """One sandbox of the run's kind, built as a task's is, runs the canary cell; the check's facts are
    the confinement it reached and the library versions inside it."""
    try:
        with open_sandbox() as box:
            libraries = run_canary(box)
            facts = {"isolation": str(box.isolation), "fork server": _fork_server(box),
                     "memory cap": str(getattr(box, "memory_cap", "unknown")),
                     "syscall filter": str(getattr(box, "syscall_filter", "unknown")),
                     "network": str(getattr(box, "network", "unknown"))}
    except Exception as exc:  # anything the sandbox raises is its check's failure, named
        return _failure("sandbox", kind, exc)
    return Check("sandbox", kind, facts=facts, libraries=libraries)


def _fork_server(box: object) -> str:
    """Whether the sandbox's worker came from a fork server (a local sandbox's ``fork_server``)."""
    used = getattr(box, "fork_server", None)
    return "n/a" if used is None else "yes" if used else "no"


def check_plan(plan: RunPlan) -> Iterator[Check]:
    """Every check of ``plan``'s parts, the cheap ones first and the sandbox's canary last."""
    config = plan.config
    yield check_judge(plan.judge, config.judge)
    yield from (check_tool(tool) for tool in plan.tools)
    prompt = system_prompt(config.episode.prompt_level, tools=bool(plan.tools))
    yield from check_strategy(plan.strategy, plan.tools, prompt)
    yield check_sandbox(plan.open_sandbox, config.sandbox)


def require(checks: Iterable[Check]) -> None:
    """Run ``checks`` in order and stop at the first that fails, with :class:`PreflightError`."""
    for check in checks:
        if check.problem is not None:
            raise PreflightError(check)


def check_run(config: RunConfig, objects: RunObjects = NO_OBJECTS, resume_from: Path | None = None) -> RunPlan:
    """The run's plan (``resume_from``: as :func:`~vtb_agents.runner.plan.plan_run`'s), resolved and checked
    (:func:`require`): a spec that cannot be loaded raises ValueError, a part that fails its check
    :class:`PreflightError`."""
    plan = plan_run(config, objects, resume_from=resume_from)
    require(check_plan(plan))
    return plan


def doctor_checks(config: RunConfig) -> list[Check]:
    """Every check of a run of ``config``, all run (``vtb doctor``). A spec that cannot be loaded is one
    failed check (the loader's error names which); the sandbox is then checked on its own."""
    try:
        plan = plan_run(config)
    except ValueError as exc:
        checks = [Check("specs", "", str(exc))]  # the loader's message names the part
        try:
            opener = sandbox_opener(config)
        except ValueError as bad:
            return [*checks, Check("sandbox", config.sandbox, str(bad))]
        return [*checks, check_sandbox(opener, config.sandbox)]
    return list(check_plan(plan))


def host_libraries() -> dict[str, str]:
    """The versions of Python and of the libraries a run uses, in this process."""
    found = {"python": platform.python_version()}
    for name, distributions in HOST_LIBRARIES.items():
        found[name] = next((v for v in map(_version, distributions) if v is not None), "not installed")
    return found


def _version(distribution: str) -> str | None:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None
