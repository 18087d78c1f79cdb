"""The six LangChain tools of VisualToolBench and the sandbox the code tools run in.

The names below are imported on first use (PEP 562): ``vtb sandbox exec`` and ``vtb --help`` use
this package's light modules (``images``, ``limits``) without importing LangChain.
"""

from __future__ import annotations

import sys
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vtb_agents.tools.calculator import calculator
    from vtb_agents.tools.guard import guard_tool, guard_tools
    from vtb_agents.tools.python_tools import bind_code_tools, python_image_processing, python_interpreter
    from vtb_agents.tools.toolset import TOOL_NAMES, VISION_TOOLS, bind_episode_tools, extension_tools, select_tools

__all__ = ["TOOL_NAMES", "VISION_TOOLS", "bind_code_tools", "bind_episode_tools", "calculator", "extension_tools",
           "guard_tool",
           "guard_tools", "python_image_processing", "python_interpreter", "select_tools"]

_HOMES = {"TOOL_NAMES": "toolset", "VISION_TOOLS": "toolset", "bind_episode_tools": "toolset",
          "select_tools": "toolset", "extension_tools": "toolset",
          "bind_code_tools": "python_tools", "python_image_processing": "python_tools",
          "python_interpreter": "python_tools", "calculator": "calculator", "guard_tool": "guard",
          "guard_tools": "guard"}


def __getattr__(name: str) -> Any:
    """Import ``name`` from its module when it is first asked for."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_HOMES[name]}"), name)


class _ToolsPackage(ModuleType):
    """This package, keeping ``calculator`` the tool: loading the submodule of that name binds the
    module to the package's attribute, which the eager imports used to overwrite with the tool."""

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, ModuleType) and _HOMES.get(name) == name:
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _ToolsPackage
