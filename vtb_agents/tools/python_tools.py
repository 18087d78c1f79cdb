"""``python_image_processing`` and ``python_interpreter``: model-written code in the episode's sandbox.

Both run in the same stateful sandbox, so the interpreter can read what the vision tool saved.
Images the code writes become artifacts; the graph shows them to the model after the round.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Protocol

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from langgraph.prebuilt import ToolRuntime
from pydantic import BaseModel, Field

from vtb_agents.artifacts import ArtifactStore
from vtb_agents.tools.images import collect_images, with_refusals
from vtb_agents.tools.sandbox.base import ExecResult, Sandbox

MAX_CODE_CHARS = 5_000
"""Longest code a call may carry (VTB's limit for the vision tool)."""


class ToolContext(Protocol):
    """What the Python tools need from the episode (LangGraph runtime context)."""

    sandbox: Sandbox
    artifacts: ArtifactStore
    code_timeout_s: float


class CodeArgs(BaseModel):
    code: str = Field(description="Python source to run. Variables persist between calls.",
                      max_length=MAX_CODE_CHARS)


_VISION_DESCRIPTION = (
    "Run Python code to inspect and transform the task's images. The working directory holds the "
    "images as image_0.png, image_1.png, ... PIL (Pillow), NumPy and OpenCV (cv2) are available. "
    "Crop, zoom (resize), rotate, enhance contrast or brightness, or annotate, then save each result "
    "as transformed_image_N.png (N = 0, 1, 2, ... never overwriting an earlier file); every image "
    "you save is shown to you after the call. Print values you want to read back. Variables and "
    "imports persist between calls."
)
_INTERPRETER_DESCRIPTION = (
    "Run general Python code (numpy, pandas, scipy, and the standard library) for data work and "
    "exact calculations; print the results you need. It shares the working directory and variables "
    "with python_image_processing, so it can read saved images. No network access."
)


def observation_text(result: ExecResult, images: list[str]) -> str:
    """The compact JSON text the model reads back from a code call."""
    payload: dict[str, Any] = {"ok": result.ok, "stdout": result.stdout}
    if result.stderr:
        payload["stderr"] = result.stderr
    if result.error:
        payload["error"] = result.error
    if result.state_lost:
        payload["note"] = "the Python state was reset: re-import modules and re-create variables"
    other = [name for name in result.new_files if name not in images]
    if images:
        payload["new_images"] = images
        payload["note_images"] = "the new images are shown in the next message"
    if other:
        payload["new_files"] = other
    return json.dumps(payload, ensure_ascii=False)


def run_code_call(name: str, code: str, *, sandbox: Sandbox, artifacts: ArtifactStore, timeout_s: float,
                  tool_call_id: str) -> ToolMessage:
    """Run one code call in ``sandbox`` and answer it: text for the model, new images as artifact."""
    result = sandbox.run(code, timeout=timeout_s)
    collected = collect_images(sandbox, artifacts, result.new_files)  # images over the pixel limit are refused
    result, images = with_refusals(result, collected.refused), collected.images
    return ToolMessage(
        content=observation_text(result, [image["name"] for image in images]),
        tool_call_id=tool_call_id,
        name=name,
        status="success" if result.ok else "error",
        artifact={"images": images, "duration_s": round(result.duration_s, 4), "ok": result.ok},
    )


def _code_tool(name: str, description: str) -> BaseTool:
    """The tool for our graphs: sandbox and artifact store come from the LangGraph runtime context."""

    def run(code: str, runtime: ToolRuntime) -> ToolMessage:
        ctx: ToolContext = runtime.context
        return run_code_call(name, code, sandbox=ctx.sandbox, artifacts=ctx.artifacts,
                             timeout_s=ctx.code_timeout_s, tool_call_id=runtime.tool_call_id or "")

    return StructuredTool.from_function(func=run, name=name, description=description, args_schema=CodeArgs)


def bound_code_tools(sandbox: Sandbox, artifacts: ArtifactStore, timeout_s: float = 60.0) -> list[BaseTool]:
    """Both code tools bound to one sandbox, for agents that are not our graphs (any LangChain agent).

    Example:
        >>> from vtb_agents.tools.sandbox import open_sandbox
        >>> with open_sandbox("local") as sandbox:  # doctest: +SKIP
        ...     tools = bound_code_tools(sandbox, ArtifactStore(Path("artifacts")))
        ...     agent = create_agent("openai:gpt-4o", tools)
    """
    tools = []
    for name, description in ((VISION_TOOL_NAME, _VISION_DESCRIPTION), (INTERPRETER_TOOL_NAME, _INTERPRETER_DESCRIPTION)):
        def run(code: str, tool_call_id: Annotated[str, InjectedToolCallId], _name: str = name) -> ToolMessage:
            return run_code_call(_name, code, sandbox=sandbox, artifacts=artifacts, timeout_s=timeout_s,
                                 tool_call_id=tool_call_id)

        tools.append(StructuredTool.from_function(func=run, name=name, description=description, args_schema=CodeArgs))
    return tools


VISION_TOOL_NAME = "python_image_processing"
INTERPRETER_TOOL_NAME = "python_interpreter"
python_image_processing: BaseTool = _code_tool(VISION_TOOL_NAME, _VISION_DESCRIPTION)
python_interpreter: BaseTool = _code_tool(INTERPRETER_TOOL_NAME, _INTERPRETER_DESCRIPTION)
