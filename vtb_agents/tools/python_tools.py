"""``python_image_processing`` and ``python_interpreter``: model-written code in the episode's sandbox.

Both run in the same stateful sandbox, so the interpreter can read what the vision tool saved.
Images the code writes become artifacts (the tool result's ``artifact``); every strategy, a user's
agent included, shows them to the model after the round (see :mod:`vtb_agents.strategies.observe`).
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from vtb_agents.artifacts import ArtifactStore
from vtb_agents.defaults import DEFAULT_CODE_TIMEOUT_S
from vtb_agents.sandbox.base import ExecResult, Sandbox
from vtb_agents.tools.images import collect_images, with_refusals
from vtb_agents.tool_names import CODE_TOOL_NAMES, INTERPRETER_TOOL_NAME, VISION_TOOL_NAME
from vtb_agents.tools.limits import MAX_CODE_CHARS



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
        payload["note_images"] = "the new images are shown to you after this round's tool results"
    if other:
        payload["new_files"] = other
    return json.dumps(payload, ensure_ascii=False)


def run_code(name: str, code: str, *, sandbox: Sandbox, artifacts: ArtifactStore,
             timeout_s: float) -> tuple[str, dict[str, Any]]:
    """Run one code call in ``sandbox``: the text the model reads, and an artifact holding the
    saved images (``{"name", "ref", "size"}``), whether the code ran without error and how long."""
    result = sandbox.run(code, timeout=timeout_s)
    collected = collect_images(sandbox, artifacts, result.new_files)  # images over the pixel limit are refused
    result, images = with_refusals(result, collected.refused), collected.images
    text = observation_text(result, [image["name"] for image in images])
    return text, {"images": images, "duration_s": round(result.duration_s, 4), "ok": result.ok}


class CodeTool(StructuredTool):
    """A code tool: its tool message has status ``error`` when the code failed (``artifact["ok"]``)."""

    def run(self, *args: Any, **kwargs: Any) -> Any:
        return _failed_as_error(super().run(*args, **kwargs))

    async def arun(self, *args: Any, **kwargs: Any) -> Any:
        return _failed_as_error(await super().arun(*args, **kwargs))


def _failed_as_error(output: Any) -> Any:
    if isinstance(output, ToolMessage) and isinstance(output.artifact, dict) and output.artifact.get("ok") is False:
        return output.model_copy(update={"status": "error"})
    return output


class UnboundToolError(RuntimeError):
    """A code tool was called without a sandbox to run in."""


def _code_tool(name: str, description: str, sandbox: Sandbox | None, artifacts: ArtifactStore | None,
               timeout_s: float) -> BaseTool:
    def run(code: str) -> tuple[str, dict[str, Any]]:
        if sandbox is None or artifacts is None:
            raise UnboundToolError(
                f"{name} has no sandbox to run in: use the tools of `with vtb_agents.task_tools(task) as tools:` "
                "or `bind_code_tools(sandbox, artifacts)`")
        return run_code(name, code, sandbox=sandbox, artifacts=artifacts, timeout_s=timeout_s)

    return CodeTool.from_function(func=run, name=name, description=description, args_schema=CodeArgs,
                                  response_format="content_and_artifact")


def bind_code_tools(sandbox: Sandbox, artifacts: ArtifactStore, timeout_s: float = DEFAULT_CODE_TIMEOUT_S,
                    names: tuple[str, ...] = CODE_TOOL_NAMES) -> list[BaseTool]:
    """The code tools called ``names``, bound to one sandbox: for our graphs and any LangChain agent.

    A tool call returns a ToolMessage whose text is what the model reads and whose artifact holds the
    saved images; invoked with plain arguments (``tool.invoke({"code": ...})``) it returns the text.

    Example:
        >>> from vtb_agents.sandbox import open_sandbox
        >>> with open_sandbox("local") as sandbox:  # doctest: +SKIP
        ...     tools = bind_code_tools(sandbox, ArtifactStore(Path("artifacts")))
        ...     tools[0].invoke({"code": "print(1 + 1)"})
        '{"ok": true, "stdout": "2\\n"}'
    """
    return [_code_tool(name, _DESCRIPTIONS[name], sandbox, artifacts, timeout_s) for name in names]


_DESCRIPTIONS = {VISION_TOOL_NAME: _VISION_DESCRIPTION, INTERPRETER_TOOL_NAME: _INTERPRETER_DESCRIPTION}
python_image_processing: BaseTool = _code_tool(VISION_TOOL_NAME, _VISION_DESCRIPTION, None, None,
                                                DEFAULT_CODE_TIMEOUT_S)
"""Unbound: it names what is missing when called. Run tools come from :func:`bind_code_tools`."""
python_interpreter: BaseTool = _code_tool(INTERPRETER_TOOL_NAME, _INTERPRETER_DESCRIPTION, None, None,
                                          DEFAULT_CODE_TIMEOUT_S)
