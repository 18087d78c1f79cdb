"""The six LangChain tools of VisualToolBench and the sandbox the code tools run in."""

from __future__ import annotations

from langchain_core.tools import BaseTool

from vtb_agents.tools.calculator import calculator
from vtb_agents.tools.guard import guard_tool, guard_tools
from vtb_agents.tools.network import NETWORK_TOOL_NAMES, NetworkSettings, make_network_tools
from vtb_agents.tools.python_tools import python_image_processing, python_interpreter

VISION_TOOLS = ("python_image_processing",)
TOOL_NAMES = ("python_image_processing", "python_interpreter", "calculator", *NETWORK_TOOL_NAMES)


def select_tools(*, no_tools: bool = False, no_vision_tool: bool = False,
                 network: NetworkSettings | None = None) -> list[BaseTool]:
    """The tools of a run under the paper's ablations (``no_tools``, ``no_vision_tool``).

    ``network`` configures web_search, browser_get_page_text and historical_weather (backend,
    record/replay cassette); by default they call the live services. Every tool is guarded
    (:mod:`vtb_agents.tools.guard`): its exceptions reach the model as error tool messages.
    """
    if no_tools:
        return []
    tools = [python_image_processing, python_interpreter, calculator, *make_network_tools(network)]
    return guard_tools([t for t in tools if not (no_vision_tool and t.name in VISION_TOOLS)])


__all__ = ["TOOL_NAMES", "VISION_TOOLS", "calculator", "guard_tool", "guard_tools", "python_image_processing",
           "python_interpreter", "select_tools"]
