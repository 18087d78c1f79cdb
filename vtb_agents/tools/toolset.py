"""The tool set of a run: which tools it offers (the paper's ablations), and its code tools bound to an
episode's sandbox."""

from __future__ import annotations

from typing import Sequence

from langchain_core.tools import BaseTool

from vtb_agents.artifacts import ArtifactStore
from vtb_agents.defaults import DEFAULT_CODE_TIMEOUT_S
from vtb_agents.extensions import build_extension, load_extension
from vtb_agents.sandbox.base import Sandbox
from vtb_agents.tools.calculator import calculator
from vtb_agents.tool_names import CODE_TOOL_NAMES, NETWORK_TOOL_NAMES, VISION_TOOL_NAME
from vtb_agents.tools.bounded import bound_tool
from vtb_agents.tools.guard import guard_tool, guard_tools
from vtb_agents.tools.network import NetworkSettings, make_network_tools
from vtb_agents.tools.python_tools import bind_code_tools, python_image_processing, python_interpreter

VISION_TOOLS = (VISION_TOOL_NAME,)
TOOL_NAMES = (*CODE_TOOL_NAMES, "calculator", *NETWORK_TOOL_NAMES)


def select_tools(*, no_tools: bool = False, no_vision_tool: bool = False,
                 network: NetworkSettings | None = None) -> list[BaseTool]:
    """The tools of a run under the paper's ablations (``no_tools``, ``no_vision_tool``).

    ``network`` configures web_search, browser_get_page_text and historical_weather (backend,
    record/replay cassette); by default they call the live services. The code tools in this list
    are unbound: :func:`bind_episode_tools` binds them to an episode's sandbox. Every tool is
    guarded (:mod:`vtb_agents.tools.guard`): its exceptions reach the model as error tool messages.
    """
    if no_tools:
        return []
    tools = [python_image_processing, python_interpreter, calculator, *make_network_tools(network)]
    return guard_tools([t for t in tools if not (no_vision_tool and t.name in VISION_TOOLS)])


def extension_tools(specs: Sequence[str]) -> list[BaseTool]:
    """The tools ``--tool`` names, guarded: each ``module:attr`` or an installed tool's name (entry
    point group ``vtb_agents.tools``) naming a LangChain ``BaseTool`` (``@tool``) or a ``BaseTool``
    class built with no arguments; anything else raises ValueError naming the spec."""
    tools = []
    for spec in specs:
        target = load_extension("tools", spec)
        tool = (build_extension("tools", spec, target) if isinstance(target, type) and issubclass(target, BaseTool)
                else target)
        if not isinstance(tool, BaseTool):
            raise ValueError(f"tool {spec!r} is a {type(tool).__name__}, not a LangChain BaseTool "
                             "(decorate a function with langchain_core.tools.tool)")
        tools.append(tool)
    return guard_tools(tools)


def bind_episode_tools(tools: Sequence[BaseTool], sandbox: Sandbox, artifacts: ArtifactStore,
                       timeout_s: float = DEFAULT_CODE_TIMEOUT_S) -> list[BaseTool]:
    """``tools`` with every code tool replaced by one bound to ``sandbox`` (order kept), all guarded;
    a tool that is not built in (``--tool``, tools given from Python) gets the built-in tools' bounds
    (:func:`~vtb_agents.tools.bounded.bound_tool`): ``timeout_s`` a call, its output capped.

    Example:
        >>> from vtb_agents.sandbox import open_sandbox
        >>> with open_sandbox("local") as sandbox:  # doctest: +SKIP
        ...     tools = bind_episode_tools(select_tools(), sandbox, ArtifactStore(Path("artifacts")))
    """
    names = tuple(t.name for t in tools if t.name in CODE_TOOL_NAMES)
    bound = {t.name: t for t in bind_code_tools(sandbox, artifacts, timeout_s, names)}
    return guard_tools([bound.get(t.name, t) if t.name in TOOL_NAMES else bound_tool(guard_tool(t), timeout_s)
                        for t in tools])

