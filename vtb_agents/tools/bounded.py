"""Tools we did not write (``--tool``, tools given from Python), held to the built-in tools' bounds.

The built-in tools bound themselves: code runs in the sandbox for ``--code-timeout`` with its
output cut to :data:`~vtb_agents.sandbox.base.OUTPUT_CAP_CHARS` characters per stream, the network
tools time out and cap what they download. ``bound_tool(tool, limit_s)`` gives any other tool
the same: a call gets ``limit_s`` (or what is left of the task's time limit, the current deadline
of :mod:`vtb_agents.timebox`) and then answers the model with an error tool message (the tool
itself is left running on its daemon thread: Python cannot stop it; the task's own limit ends the
episode at its next step); its text is cut to ``OUTPUT_CAP_CHARS`` characters in all, with a
note saying how much was cut, as the code tools' output is. Image blocks pass unchanged (the
artifact store's own limits apply to them).

Example:
    >>> from langchain_core.tools import tool
    >>> @tool
    ... def shout(text: str) -> str:
    ...     "Repeat the text very loudly."
    ...     return text.upper() * 100_000
    >>> len(bound_tool(shout, 5.0).invoke({"text": "a"})) < 20_100
    True
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Callable
from functools import cache
from typing import Any, ClassVar

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool

from vtb_agents.sandbox.base import OUTPUT_CAP_CHARS
from vtb_agents.sandbox.output import CappedText
from vtb_agents.timebox import CallTimedOut, call_within, time_left


def cap_text(text: str, cap: int = OUTPUT_CAP_CHARS) -> str:
    """``text`` cut to ``cap`` characters (head and tail, a note between), as code output is."""
    if len(text) <= cap:
        return text
    capped = CappedText(cap)
    capped.add(text)
    return capped.text()


def cap_content(content: Any, cap: int = OUTPUT_CAP_CHARS) -> Any:
    """A tool's output with its text cut to ``cap`` characters in all: a string, or the text of a
    list of content blocks (blocks past the budget keep only a note); anything else unchanged."""
    if isinstance(content, str):
        return cap_text(content, cap)
    if not isinstance(content, list):
        return content
    left, capped = cap, []
    for block in content:
        text = block if isinstance(block, str) else block.get("text") if isinstance(block, dict) else None
        if not isinstance(text, str):
            capped.append(block)
            continue
        cut = cap_text(text, max(left, 2)) if left > 0 else f"[... {len(text)} more characters cut]"
        left -= len(text)
        capped.append(cut if isinstance(block, str) else {**block, "text": cut})
    return capped


def capped_result(result: Any, response_format: str) -> Any:
    """What a tool's ``_run`` returned, its text capped (:func:`cap_content`): the content, the content
    of a (content, artifact) pair, or of a ToolMessage; anything else (a ``Command``) unchanged."""
    if isinstance(result, ToolMessage):
        return result.model_copy(update={"content": cap_content(result.content)})
    if response_format == "content_and_artifact" and isinstance(result, tuple) and len(result) == 2:
        return cap_content(result[0]), result[1]
    return cap_content(result)


def _timed_out(tool: BaseTool, seconds: float, tool_call_id: str | None) -> ToolMessage | str:
    content = json.dumps({"error": f"{tool.name} gave no result within its time limit ({seconds:.1f} s)"})
    if tool_call_id is None:
        return content
    return ToolMessage(content=content, tool_call_id=tool_call_id, name=tool.name, status="error")


class _Bounded:
    """Mixed in before the tool's own class: calls within ``limit_s``, output capped."""

    __slots__ = ()
    bounded = True
    limit_s: float = 0.0

    # The cap applies where the tool's own code returns (``_run``), before LangChain's callbacks
    # see the output: the transcript records what the model reads. ``wraps`` keeps the signature
    # LangChain inspects to pass ``run_manager`` and ``config``.
    @property
    def _run(self) -> Callable[..., Any]:
        inner = super()._run  # type: ignore[misc]
        response_format = self.response_format  # type: ignore[attr-defined]

        @functools.wraps(inner)
        def run(*args: Any, **kwargs: Any) -> Any:
            return capped_result(inner(*args, **kwargs), response_format)
        return run

    @property
    def _arun(self) -> Callable[..., Any]:
        inner = super()._arun  # type: ignore[misc]
        response_format = self.response_format  # type: ignore[attr-defined]

        @functools.wraps(inner)
        async def arun(*args: Any, **kwargs: Any) -> Any:
            return capped_result(await inner(*args, **kwargs), response_format)
        return arun

    def run(self, tool_input: Any, *args: Any, tool_call_id: str | None = None, **kwargs: Any) -> Any:
        seconds = time_left(self.limit_s)
        call = super().run  # type: ignore[misc]
        try:
            output = call_within(lambda: call(tool_input, *args, tool_call_id=tool_call_id, **kwargs), seconds,
                                 name=f"vtb-tool-{self.name}")  # type: ignore[attr-defined]
        except CallTimedOut:
            return _timed_out(self, seconds, tool_call_id)  # type: ignore[arg-type]
        return output

    async def arun(self, tool_input: Any, *args: Any, tool_call_id: str | None = None, **kwargs: Any) -> Any:
        seconds = time_left(self.limit_s)
        call = super().arun  # type: ignore[misc]
        try:
            output = await asyncio.wait_for(call(tool_input, *args, tool_call_id=tool_call_id, **kwargs), seconds)
        except TimeoutError as exc:  # wait_for's; the task's own limit (TaskTimeout) ends the episode
            if getattr(exc, "passes_tool_guard", False):
                raise
            return _timed_out(self, seconds, tool_call_id)  # type: ignore[arg-type]
        return output


@cache
def _bounded_class(cls: type[BaseTool], limit_s: float) -> type[BaseTool]:
    return type(f"Bounded{cls.__name__}", (_Bounded, cls),
                {"__module__": __name__, "__slots__": (), "__annotations__": {"limit_s": ClassVar[float]},
                 "limit_s": limit_s})


def bound_tool(tool: BaseTool, limit_s: float) -> BaseTool:
    """``tool`` whose calls end within ``limit_s`` (or the current deadline) and whose output is
    capped (see the module docstring); a tool bounded already is returned as it is."""
    if getattr(tool, "bounded", False):
        return tool
    cls = _bounded_class(type(tool), float(limit_s))
    fields = {name: getattr(tool, name) for name in type(tool).model_fields}
    return cls.model_construct(_fields_set=set(tool.model_fields_set), **fields)
