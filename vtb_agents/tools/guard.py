"""One wrapper for every tool: whatever a tool raises becomes an error ToolMessage for the model.

Tool errors are the model's to read and act on (DESIGN.md "Tool errors"), never an episode crash:
``guard_tool(tool)`` returns the same tool (same class, name, description, args schema, response
format, injected arguments) whose ``run``/``arun`` turn any exception into
``ToolMessage(status="error")``, whether it comes from the arguments, the tool's own code or
turning its result into text (``calculator("2**100000")``: Python refuses to print a 30,103-digit
integer). Three kinds pass through, because they are not the tool's failure:

- LangGraph's control flow (``GraphBubbleUp``: interrupts, ``Command`` jumps);
- exceptions whose class sets ``passes_tool_guard = True``: the task's time limit
  (``TaskTimeout``) and a sandbox that cannot run at all (``SandboxError``);
- ``KeyboardInterrupt`` and other ``BaseException`` that are not ``Exception``.

Example:
    >>> from vtb_agents.tools.calculator import calculator
    >>> message = guard_tool(calculator).invoke(
    ...     {"type": "tool_call", "id": "c1", "name": "calculator", "args": {"expression": "2**100000"}})
    >>> message.status
    'error'
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langgraph.errors import GraphBubbleUp
from pydantic import ValidationError

if TYPE_CHECKING:
    from pydantic.v1 import ValidationError as ValidationErrorV1

ERROR_CHARS = 2_000
"""Longest error text a guarded tool returns."""


def passes_guard(exc: BaseException) -> bool:
    """True for exceptions that must leave a tool call: graph control flow and those marked
    ``passes_tool_guard`` (time limit, unusable sandbox), and anything that is not an Exception."""
    return (not isinstance(exc, Exception) or isinstance(exc, GraphBubbleUp)
            or bool(getattr(exc, "passes_tool_guard", False)))


def error_text(tool_name: str, exc: BaseException) -> str:
    """The error ToolMessage content: JSON ``{"error": "<tool> failed: <Type>: <message>"}``."""
    try:
        message = str(exc)
    except Exception as str_error:  # a message that cannot be printed is reported as such
        message = f"<message not printable: {type(str_error).__name__}>"
    text = f"{tool_name} failed: {type(exc).__name__}: {message}"
    if len(text) > ERROR_CHARS:
        text = text[:ERROR_CHARS] + f" [... {len(text) - ERROR_CHARS} more characters cut]"
    return json.dumps({"error": text}, ensure_ascii=False)


def invalid_arguments(error: ValidationError | ValidationErrorV1) -> str:
    """The error text for arguments that do not fit a tool's schema: where and what, never the
    values (which could echo injected state back to the model)."""
    problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in error.errors())
    return json.dumps({"error": f"invalid arguments: {problems}"}, ensure_ascii=False)


def _error_result(tool: BaseTool, exc: BaseException, tool_call_id: str | None) -> ToolMessage | str:
    content = invalid_arguments(exc) if isinstance(exc, ValidationError) else error_text(tool.name, exc)
    if tool_call_id is None:
        return content  # called without a tool call (plain invoke): the text, as BaseTool returns
    return ToolMessage(content=content, tool_call_id=tool_call_id, name=tool.name, status="error")


class _Guarded:
    """Mixed in before the tool's own class: ``run``/``arun`` answer errors instead of raising."""

    __slots__ = ()
    guarded = True

    def run(self, tool_input: Any, *args: Any, tool_call_id: str | None = None, **kwargs: Any) -> Any:
        try:
            return super().run(tool_input, *args, tool_call_id=tool_call_id, **kwargs)  # type: ignore[misc]
        except BaseException as exc:
            if passes_guard(exc):
                raise
            return _error_result(self, exc, tool_call_id)  # type: ignore[arg-type]

    async def arun(self, tool_input: Any, *args: Any, tool_call_id: str | None = None, **kwargs: Any) -> Any:
        try:
            return await super().arun(tool_input, *args, tool_call_id=tool_call_id, **kwargs)  # type: ignore[misc]
        except BaseException as exc:
            if passes_guard(exc):
                raise
            return _error_result(self, exc, tool_call_id)  # type: ignore[arg-type]


@cache
def _guarded_class(cls: type[BaseTool]) -> type[BaseTool]:
    return type(f"Guarded{cls.__name__}", (_Guarded, cls), {"__module__": __name__, "__slots__": ()})


def guard_tool(tool: BaseTool) -> BaseTool:
    """``tool`` whose exceptions become error ToolMessages (see the module docstring); idempotent."""
    if getattr(tool, "guarded", False):
        return tool
    cls = _guarded_class(type(tool))
    fields = {name: getattr(tool, name) for name in type(tool).model_fields}
    return cls.model_construct(_fields_set=set(tool.model_fields_set), **fields)


def guard_tools(tools: Sequence[BaseTool]) -> list[BaseTool]:
    """:func:`guard_tool` applied to each of ``tools``."""
    return [guard_tool(tool) for tool in tools]
