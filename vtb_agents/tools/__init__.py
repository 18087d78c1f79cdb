"""The LangChain tools of VisualToolBench and the sandbox they run code in."""

from __future__ import annotations

from langchain_core.tools import BaseTool

from vtb_agents.tools.calculator import calculator
from vtb_agents.tools.python_tools import python_image_processing, python_interpreter

VISION_TOOLS = ("python_image_processing",)


def available_tools() -> dict[str, BaseTool]:
    """Every tool this build offers, by its VTB name."""
    return {t.name: t for t in (python_image_processing, python_interpreter, calculator)}


def select_tools(*, no_tools: bool = False, no_vision_tool: bool = False) -> list[BaseTool]:
    """The tools of a run under the paper's ablations (``no_tools``, ``no_vision_tool``)."""
    if no_tools:
        return []
    return [t for name, t in available_tools().items() if not (no_vision_tool and name in VISION_TOOLS)]


__all__ = ["available_tools", "calculator", "python_image_processing", "python_interpreter", "select_tools"]
