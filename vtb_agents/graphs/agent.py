"""The agent graph: a model node routing to a vision tool node, a general tool node and (for
follow-up tasks) a clarification node; observations return to the model.

```
START -> model --vision calls---> vision_tools  --\\
              \\--other calls----> general_tools --+--> observe -> model ...
              \\--question--------> clarify (interrupt) -> model     (follow_up only)
              \\--round cap hit---> round_cap -> END                 (status "tool_round_cap")
              \\--final answer----> END                              (status "answered")
```
Parallel calls of mixed kinds in one round go to both tool nodes at once (``Send``), and
``observe`` runs once after all of them: one text ToolMessage per call, then one HumanMessage
holding the round's new images (as artifact references), which keeps parallel tool calls legal
for the OpenAI API. With ``native_tool_images`` the images go inside the tool results instead.
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
from langgraph.types import RetryPolicy, Send

from vtb_agents.artifacts import image_ref_block
from vtb_agents.graphs.clarify import clarify, wants_clarification
from vtb_agents.graphs.materialize import materialize_messages
from vtb_agents.graphs.retry import model_retry_policy
from vtb_agents.graphs.state import AgentState, EpisodeContext, TurnInput, TurnOutput
from vtb_agents.tools import VISION_TOOLS

VISION_TOOL = "python_image_processing"
ROUND_CAP_MESSAGE = "Not run: the limit of {cap} tool rounds for this turn is reached. Answer with what you have."


def recursion_limit(max_tool_rounds: int) -> int:
    """Graph steps one turn may take: three per tool round (model, tools, observe) plus slack."""
    return 3 * max_tool_rounds + 8


def round_messages(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
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


def call_model_node(tools: Sequence[BaseTool]):
    """The model node: bind ``tools``, materialise image references, call the model once."""

    def call_model(state: AgentState, runtime: Runtime[EpisodeContext]) -> dict[str, Any]:
        ctx = runtime.context
        model = ctx.model.bind_tools(tool_specs(tools, ctx.sandbox.list_files())) if tools else ctx.model
        history = materialize_messages(state["messages"], ctx.artifacts, ctx.max_image_side)
        reply = model.invoke([SystemMessage(ctx.system_prompt), *history])
        update: dict[str, Any] = {"messages": [reply]}
        if not getattr(reply, "tool_calls", None):
            update["status"] = "answered"
        elif state.get("tool_rounds", 0) >= ctx.max_tool_rounds:
            update["status"] = "tool_round_cap"  # decided here, so routing needs no runtime context
        return update

    return call_model


def observe(state: AgentState, runtime: Runtime[EpisodeContext]) -> dict[str, Any]:
    """Count the round and show its new images: after all tool results, or inside them (native)."""
    results = [m for m in round_messages(state["messages"]) if isinstance(m, ToolMessage)]
    update: dict[str, Any] = {"tool_rounds": state.get("tool_rounds", 0) + 1}
    if runtime.context.native_tool_images:
        rewritten = [_with_native_images(m) for m in results if _images_of(m)]
        if rewritten:
            update["messages"] = rewritten
        return update
    images = [image for m in results for image in _images_of(m)]
    if images:
        blocks: list[Any] = [{"type": "text", "text": "Images saved by your tool calls in this round:"}]
        for image in images:
            blocks += _image_blocks(image)
        update["messages"] = [HumanMessage(content=blocks)]
    return update


def _images_of(message: ToolMessage) -> list[dict[str, Any]]:
    return message.artifact.get("images", []) if isinstance(message.artifact, dict) else []


def _image_blocks(image: dict[str, Any]) -> list[dict[str, Any]]:
    width, height = image["size"]
    return [{"type": "text", "text": f"{image['name']} ({width}x{height}):"}, image_ref_block(image["ref"], image["name"])]


def _with_native_images(message: ToolMessage) -> ToolMessage:
    blocks: list[Any] = [{"type": "text", "text": message.text}]
    for image in _images_of(message):
        blocks += _image_blocks(image)
    return message.model_copy(update={"content": blocks})


def round_cap(state: AgentState, runtime: Runtime[EpisodeContext]) -> dict[str, Any]:
    """Answer the unrun calls with an error and end the turn with status ``tool_round_cap``."""
    last = state["messages"][-1]
    note = ROUND_CAP_MESSAGE.format(cap=runtime.context.max_tool_rounds)
    closing = [ToolMessage(content=note, tool_call_id=call["id"], name=call["name"], status="error")
               for call in last.tool_calls]
    return {"messages": closing, "status": "tool_round_cap"}


def route_after_model(clarification: bool):
    """Route a model reply: tool calls by kind (Send), round cap, clarification, or the end.

    Reads state only (the model node decides the round cap), so ``graph.update_state(...,
    as_node="model")`` can route without an episode's runtime context.
    """

    def route(state: AgentState) -> list[Send] | str:
        last = state["messages"][-1]
        if not (isinstance(last, AIMessage) and last.tool_calls):
            return "clarify" if clarification and wants_clarification(state) else END
        if state.get("status") == "tool_round_cap":
            return "round_cap"
        vision = [c for c in last.tool_calls if c["name"] in VISION_TOOLS]
        general = [c for c in last.tool_calls if c["name"] not in VISION_TOOLS]
        return [Send(node, calls) for node, calls in (("vision_tools", vision), ("general_tools", general)) if calls]

    return route


def build_agent_graph(tools: Sequence[BaseTool], *, clarification: bool = False, checkpointer: Any = None,
                      name: str = "vtb_agent", retry_policy: RetryPolicy | None = None) -> CompiledStateGraph:
    """Compile the model/tool loop for ``tools`` (empty: the model answers without tools).

    Per-episode resources (model, sandbox, artifact store, limits) come from an
    :class:`EpisodeContext` passed as ``context=`` to ``invoke``. Input is a :class:`TurnInput`
    (the turn's opening message, its index and the task's turn count); output a :class:`TurnOutput`.
    With ``clarification`` a final question goes to the clarification node (an interrupt).
    ``retry_policy`` governs model calls (default: :func:`~vtb_agents.graphs.retry.model_retry_policy`).

    Example:
        >>> from vtb_agents.tools.calculator import calculator
        >>> graph = build_agent_graph([calculator], clarification=True)
        >>> sorted(graph.get_graph().nodes)  # doctest: +NORMALIZE_WHITESPACE
        ['__end__', '__start__', 'clarify', 'general_tools', 'model', 'observe', 'round_cap', 'vision_tools']
    """
    tools = list(tools)
    builder = StateGraph(AgentState, context_schema=EpisodeContext, input_schema=TurnInput, output_schema=TurnOutput)
    builder.add_node("model", call_model_node(tools), retry_policy=retry_policy or model_retry_policy())
    # Both tool nodes know every tool, so a call to an unknown tool gets ToolNode's error message.
    builder.add_node("vision_tools", ToolNode(tools, name="vision_tools"))
    builder.add_node("general_tools", ToolNode(tools, name="general_tools"))
    builder.add_node("observe", observe)
    builder.add_node("round_cap", round_cap)
    destinations = ["vision_tools", "general_tools", "round_cap", END]
    if clarification:
        builder.add_node("clarify", clarify)
        builder.add_edge("clarify", "model")
        destinations.append("clarify")
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", route_after_model(clarification), destinations)
    builder.add_edge("vision_tools", "observe")
    builder.add_edge("general_tools", "observe")
    builder.add_edge("observe", "model")
    builder.add_edge("round_cap", END)
    return builder.compile(checkpointer=checkpointer, name=name)
