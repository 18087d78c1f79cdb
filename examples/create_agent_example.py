"""Grade your own LangChain agent on VisualToolBench tasks.

    export OPENAI_API_KEY=...                       # or OPENAI_BASE_URL for a local server
    VTB_EXAMPLE_MODEL=openai:gpt-4o \\
        PYTHONPATH=. .venv/bin/vtb run --tasks sample --model agent:examples.create_agent_example:build \\
            --out runs/my-agent

``build`` receives the tools of one episode, already bound to that task's sandbox (the task's
images are ``image_0.png``, ... in its working directory), the system prompt of the run's
``--prompt-level`` and ``middleware`` that shows the model the images its tool calls save, and
returns any Runnable that maps ``{"messages": [...]}`` to ``{"messages": [...]}``. Final answers and
the tool trace are read from the returned messages and graded exactly like the built-in strategies.
The run's ``--max-tool-rounds`` and ``--task-timeout`` hold for it as for them (docs/tutorials/write-a-strategy.md).
"""

from __future__ import annotations

import os

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain.chat_models import init_chat_model
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool


def build(tools: list[BaseTool], *, system_prompt: str, middleware: list[AgentMiddleware]) -> Runnable:
    """A plain ``create_agent`` agent over the episode's tools, prompt and image middleware."""
    model = init_chat_model(os.environ.get("VTB_EXAMPLE_MODEL", "openai:gpt-4o"), temperature=0)
    return create_agent(model, tools, system_prompt=system_prompt, middleware=middleware)
