"""The names of the benchmark's six tools, as the paper names them (standard library only).

Kept on the lowest layer so that the modules that only need a name (metrics, region tracking, the
tool loop) do not import the LangChain tools that carry it.
"""

from __future__ import annotations

from typing import Final

VISION_TOOL_NAME: Final = "python_image_processing"
"""The tool that runs the model's code on the task's images (saved transforms are shown to it)."""
INTERPRETER_TOOL_NAME: Final = "python_interpreter"
"""The general Python tool (same sandbox, no images collected)."""
CODE_TOOL_NAMES: Final = (VISION_TOOL_NAME, INTERPRETER_TOOL_NAME)
"""The tools whose argument is code run in the task's sandbox."""
NETWORK_TOOL_NAMES: Final = ("web_search", "browser_get_page_text", "historical_weather")
"""The tools that reach the network (recorded and replayed by the tool cassette)."""
