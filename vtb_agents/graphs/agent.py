"""The agent graph: a model node routing to a tool node, whose observations return to the model.

```
START -> model --tool calls--> tools -> observe -> model ...
              \\--no tool calls--> END              (status "answered")
              \\--round cap hit--> round_cap -> END (status "tool_round_cap")
```
Observations follow DESIGN.md: one text ToolMessage per call, then one HumanMessage holding the
round's new images (as artifact references) after all of that round's ToolMessages, which keeps
parallel tool calls legal for the OpenAI API.
"""

from __future__ import annotations

from typing import Any, Sequence

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode
from langgraph.runtime import Runtime
from langgraph.types import RetryPolicy

from vtb_agents.artifacts import image_ref_block
from vtb_agents.graphs.materialize import materialize_messages
from vtb_agents.graphs.state import AgentState, EpisodeContext

VISION_TOOL = "python_image_processing"
ROUND_CAP_MESSAGE = "Not run: the limit of {cap} tool rounds for this turn is reached. Answer with what you have."


def recursion_limit(max_tool_rounds: int) -> int:
    """Graph steps one turn may take: three per tool round (model, tools, observe) plus slack."""
    return 3 * max_tool_rounds + 6


def _round_messages(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """The messages after the last AIMessage (the current round's tool results)."""
    for i in range(len(messages) - 1, -1, -1):
        if isinstance(messages[i], AIMessage):
            return list(messages[i + 1:])
    return []


def tool_specs(tools: Sequence[BaseTool], files: list[str]) -> list[dict[str, Any]]:
    """OpenAI-format tool specs; the vision tool's description lists the working directory's files."""
    specs = []
    for tool in tools:
        spec = convert_to_openai_tool(tool)
        if tool.name == VISION_TOOL and files:
            spec["function"]["description"] += " Files in the working directory now: " + ", ".join(files) + "."
        specs.append(spec)
    return specs


def build_agent_graph(tools: Sequence[BaseTool], *, checkpointer: Any = None,
                      name: str = "vtb_agent") -> CompiledStateGraph:
    """Compile the model/tool loop for ``tools`` (empty: the model answers without tools).

    Per-episode resources (model, sandbox, artifact store, limits) come from an
    :class:`EpisodeContext` passed as ``context=`` to ``invoke``.

    Example:
        >>> from vtb_agents.tools.calculator import calculator
        >>> graph = build_agent_graph([calculator])
        >>> sorted(graph.get_graph().nodes)
        ['__end__', '__start__', 'model', 'observe', 'round_cap', 'tools']
    """
    tools = list(tools)

    def call_model(state: AgentState, runtime: Runtime[EpisodeContext]) -> dict[str, Any]:
        ctx = runtime.context
        model = ctx.model.bind_tools(tool_specs(tools, ctx.sandbox.list_files())) if tools else ctx.model
        history = materialize_messages(state["messages"], ctx.artifacts, ctx.max_image_side)
        reply = model.invoke([SystemMessage(ctx.system_prompt), *history])
        update: dict[str, Any] = {"messages": [reply]}
        if not getattr(reply, "tool_calls", None):
            update["status"] = "answered"
        return update

    def route(state: AgentState, runtime: Runtime[EpisodeContext]) -> str:
        last = state["messages"][-1]
        if not (isinstance(last, AIMessage) and last.tool_calls):
            return END
        if state.get("tool_rounds", 0) >= runtime.context.max_tool_rounds:
            return "round_cap"
        return "tools"

    def observe(state: AgentState) -> dict[str, Any]:
        results = [m for m in _round_messages(state["messages"]) if isinstance(m, ToolMessage)]
        images = [img for m in results if isinstance(m.artifact, dict) for img in m.artifact.get("images", [])]
        update: dict[str, Any] = {"tool_rounds": state.get("tool_rounds", 0) + 1}
        if images:
            blocks: list[Any] = [{"type": "text", "text": "Images saved by your tool calls in this round:"}]
            for image in images:
                width, height = image["size"]
                blocks.append({"type": "text", "text": f"{image['name']} ({width}x{height}):"})
                blocks.append(image_ref_block(image["ref"], image["name"]))
            update["messages"] = [HumanMessage(content=blocks)]
        return update

    def round_cap(state: AgentState, runtime: Runtime[EpisodeContext]) -> dict[str, Any]:
        last = state["messages"][-1]
        note = ROUND_CAP_MESSAGE.format(cap=runtime.context.max_tool_rounds)
        closing = [ToolMessage(content=note, tool_call_id=call["id"], name=call["name"], status="error")
                   for call in last.tool_calls]
        return {"messages": closing, "status": "tool_round_cap"}

    builder = StateGraph(AgentState, context_schema=EpisodeContext)
    builder.add_node("model", call_model, retry_policy=RetryPolicy(max_attempts=3))
    builder.add_node("tools", ToolNode(tools))  # also answers calls to unknown tools with an error
    builder.add_node("observe", observe)
    builder.add_node("round_cap", round_cap)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", route, ["tools", "round_cap", END])
    builder.add_edge("tools", "observe")
    builder.add_edge("observe", "model")
    builder.add_edge("round_cap", END)
    return builder.compile(checkpointer=checkpointer, name=name)
