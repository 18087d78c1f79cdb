"""The model/tool loop every built-in strategy runs on, as reusable nodes.

```
model --vision calls---> vision_tools  --\\
      \\--other calls----> general_tools --+--> observe -> model ...
      \\--round cap hit---> round_cap (closing tool results, one last call without tools) -> END
      \\--final answer----> END
```
Parallel calls of mixed kinds in one round go to both tool nodes at once (``Send``); ``observe``
runs once after all of them and adds the round's images by the observation rule
(:mod:`vtb_agents.strategies.observe`). Tools are the episode's own (``EpisodeContext.tools``,
bound to its sandbox), so one compiled graph serves every episode of a run.
"""

from __future__ import annotations

from typing import Any, Sequence, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, SystemMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import END, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import RetryPolicy, Send
from typing_extensions import TypedDict

from vtb_agents.models.prompt_cache import mark_prefix, wants_breakpoints
from vtb_agents.models.retry import model_retry_policy
from vtb_agents.strategies.base import EpisodeContext, TurnState, as_node
from vtb_agents.strategies.observe import observation_message, round_messages, with_native_images
from vtb_agents.tools import VISION_TOOLS, guard_tool
from vtb_agents.transcript import STEP_METADATA_KEY

ROUND_CAP_MESSAGE = ("Not run: the limit of {cap} tool rounds for this turn is reached. "
                     "Give your final answer now with what you have.")


def recursion_limit(max_tool_rounds: int) -> int:
    """Graph steps one turn may take: three per tool round (model, tools, observe) plus slack."""
    return 3 * max_tool_rounds + 16


_SPEC_MEMO: dict[tuple[Any, ...], dict[str, Any]] = {}
_SPEC_MEMO_SIZE = 256


def openai_tool_spec(tool: BaseTool) -> dict[str, Any]:
    """``convert_to_openai_tool(tool)``, memoised by what the spec is made of (kind, name,
    description, argument schema): converting walks the JSON schema and costs more CPU per model
    call than the rest of the request. The result is shared: copy before changing it."""
    schema = tool.args_schema
    if not isinstance(schema, type):  # a dict schema is not hashable: convert every time
        return convert_to_openai_tool(tool)
    key = (type(tool), tool.name, tool.description, schema)
    spec = _SPEC_MEMO.get(key)
    if spec is None:
        if len(_SPEC_MEMO) >= _SPEC_MEMO_SIZE:  # bounded: tools made afresh per episode cannot grow it
            _SPEC_MEMO.clear()
        spec = _SPEC_MEMO[key] = convert_to_openai_tool(tool)
    return spec


def tool_specs(tools: Sequence[BaseTool]) -> list[dict[str, Any]]:
    """OpenAI-format tool specs, the same in every request of an episode (the prompt-cache prefix:
    the files the tools save are named in the conversation, never in the tools' descriptions)."""
    return [openai_tool_spec(tool) for tool in tools]


def no_tool_choice(model: BaseChatModel) -> str | dict[str, str]:
    """The ``tool_choice`` that lets ``model`` call none of its bound tools, in its client's form
    (LangChain's Anthropic client reads the string "none" as the name of a tool to force)."""
    return {"type": "none"} if wants_breakpoints(model) else "none"


def call_model(ctx: EpisodeContext, messages: Sequence[AnyMessage], *, tools: bool = True,
               config: RunnableConfig | None = None, step: str | None = None) -> AIMessage:
    """One model call: the system prompt, the conversation with its images materialised and the
    episode's tools; with ``tools`` False the tools stay in the request and ``tool_choice`` forbids
    calling them, so that the request keeps the prefix of the ones before it (docs/concepts/prompt-caching.md).
    A step's own instruction is a message of the conversation, never a change of the system prompt.
    With ``ctx.prompt_cache`` the prefix is marked for providers that need it
    (:mod:`vtb_agents.models.prompt_cache`). ``step`` names the strategy step making the call in its
    transcript (default: the graph node)."""
    if step is not None:
        config = merge_configs(config, {"metadata": {STEP_METADATA_KEY: step}})
    if ctx.model is None:
        raise ValueError("this strategy needs a model: pass --model provider:model (or replay)")
    model: Any = ctx.model
    if ctx.tools and tools:
        model = ctx.model.bind_tools(tool_specs(ctx.tools))
    elif ctx.tools:  # LangChain types tool_choice as a string; Anthropic's "none" is a dict
        model = ctx.model.bind_tools(tool_specs(ctx.tools), tool_choice=cast(Any, no_tool_choice(ctx.model)))
    system, conversation = SystemMessage(ctx.system_prompt), ctx.materialize(list(messages))
    if ctx.prompt_cache and wants_breakpoints(ctx.model):
        system, conversation = mark_prefix(system, conversation)
    reply = model.invoke([system, *conversation], config)
    return reply if isinstance(reply, AIMessage) else AIMessage(content=reply.content)


def model_node(state: TurnState, runtime: Runtime[EpisodeContext], config: RunnableConfig) -> dict[str, Any]:
    """Call the model with the tools; a reply with no tool calls ends the turn as answered, and
    tool calls past the round cap end it as ``tool_round_cap`` (decided here, so routing reads state only)."""
    reply = call_model(runtime.context, state["messages"], config=config)
    update: dict[str, Any] = {"messages": [reply]}
    if not reply.tool_calls:
        update["status"] = "answered"
    elif state.get("tool_rounds", 0) >= runtime.context.max_tool_rounds:
        update["status"] = "tool_round_cap"
    return update


def execute_tool_call(ctx: EpisodeContext, call: dict[str, Any], config: RunnableConfig | None = None) -> ToolMessage:
    """Run one tool call with the episode's tools; every failure becomes an error ToolMessage
    (tools are guarded, :mod:`vtb_agents.tools.guard`; a call to an unknown tool is answered here)."""
    tool = ctx.tool(call["name"])
    if tool is None:
        names = ", ".join(t.name for t in ctx.tools) or "none"
        return ToolMessage(f"Error: {call['name']} is not a valid tool, try one of [{names}].",
                           tool_call_id=call["id"], name=call["name"], status="error")
    output = guard_tool(tool).invoke({**call, "type": "tool_call"}, config)
    return output if isinstance(output, ToolMessage) else ToolMessage(str(output), tool_call_id=call["id"],
                                                                      name=call["name"])


class ToolBatch(TypedDict):
    """A round's tool calls of one kind, sent to one tool node."""

    tool_calls: list[dict[str, Any]]


def tools_node(batch: ToolBatch, runtime: Runtime[EpisodeContext], config: RunnableConfig) -> dict[str, Any]:
    """Run a round's calls of one kind (sent by :func:`route_after_model`), in order."""
    return {"messages": [execute_tool_call(runtime.context, call, config) for call in batch["tool_calls"]]}


def observe(state: TurnState, runtime: Runtime[EpisodeContext]) -> dict[str, Any]:
    """Count the round and show its new images: after all tool results, or inside them (native)."""
    results = [m for m in round_messages(state["messages"]) if isinstance(m, ToolMessage)]
    update: dict[str, Any] = {"tool_rounds": state.get("tool_rounds", 0) + 1}
    if runtime.context.native_tool_images:
        rewritten = [with_native_images(m) for m in results
                     if isinstance(m.artifact, dict) and m.artifact.get("images")]
        if rewritten:
            update["messages"] = rewritten
        return update
    observation = observation_message(results)
    if observation is not None:
        update["messages"] = [observation]
    return update


def cap_notice(call: ToolCall, cap: int) -> ToolMessage:
    """The result of a tool call made past the round cap of ``cap``: not run, an error telling the
    model to answer now."""
    return ToolMessage(content=ROUND_CAP_MESSAGE.format(cap=cap), tool_call_id=call["id"] or "", name=call["name"],
                       status="error")


def round_cap(state: TurnState, runtime: Runtime[EpisodeContext], config: RunnableConfig) -> dict[str, Any]:
    """Answer the unrun calls with the cap notice, then ask the model once more, without tools,
    for its final answer; the turn's status stays ``tool_round_cap``."""
    last = cast(AIMessage, state["messages"][-1])  # the router comes here only after tool calls
    closing: list[AnyMessage] = [cap_notice(call, runtime.context.max_tool_rounds) for call in last.tool_calls]
    final = call_model(runtime.context, [*state["messages"], *closing], tools=False, config=config)
    return {"messages": [*closing, final], "status": "tool_round_cap"}


def route_after_model(state: TurnState) -> list[Send] | str:
    """Route a model reply: tool calls by kind (Send), the round cap, or the end of the turn."""
    last = state["messages"][-1]
    if not (isinstance(last, AIMessage) and last.tool_calls):
        return END
    if state.get("status") == "tool_round_cap":
        return "round_cap"
    vision = [c for c in last.tool_calls if c["name"] in VISION_TOOLS]
    general = [c for c in last.tool_calls if c["name"] not in VISION_TOOLS]
    return [Send(node, {"tool_calls": calls})
            for node, calls in (("vision_tools", vision), ("general_tools", general)) if calls]


def add_tool_loop(builder: StateGraph[Any, EpisodeContext, Any, Any], *, after: str = END,
                  retry_policy: RetryPolicy | None = None) -> str:
    """Add the loop's nodes to ``builder``, leaving to ``after`` when the turn is answered or capped.

    Returns the loop's entry node (``model``); the caller adds the edge into it.
    """
    builder.add_node("model", as_node(model_node), retry_policy=retry_policy or model_retry_policy())
    builder.add_node("vision_tools", as_node(tools_node))
    builder.add_node("general_tools", as_node(tools_node))
    builder.add_node("observe", observe)
    builder.add_node("round_cap", as_node(round_cap), retry_policy=retry_policy or model_retry_policy())

    def route(state: TurnState) -> list[Send] | str:
        target = route_after_model(state)
        return after if target == END else target

    builder.add_conditional_edges("model", route, ["vision_tools", "general_tools", "round_cap", after])
    builder.add_edge("vision_tools", "observe")
    builder.add_edge("general_tools", "observe")
    builder.add_edge("observe", "model")
    builder.add_edge("round_cap", after)
    return "model"
