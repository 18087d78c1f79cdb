"""``plan``: plan-then-act.

One model call that may not call tools writes a short plan (which regions, which tools, what to
compute); then the tool loop carries it out. The request for the plan stays in the conversation, so
that every request extends the one before (docs/concepts/prompt-caching.md). Plan-and-Solve prompting
(Wang et al., 2023, arXiv 2305.04091) and LangChain's plan-and-execute agents, with the plan kept in
the conversation.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime

from vtb_agents.models.retry import model_retry_policy
from vtb_agents.strategies.base import EpisodeContext, Strategy, TurnGraph, TurnState
from vtb_agents.strategies.loop import call_model
from vtb_agents.strategies.react import build_step_then_loop
from vtb_agents.strategies.steps import record_step

PLAN_INSTRUCTION = (
    "Do not answer yet and do not call tools. Write a short numbered plan (at most 6 steps): which "
    "parts of which image you will inspect, how (crop, zoom, enhance), which tools you will use and "
    "what you will compute."
)
EXECUTE_REQUEST = ("Now carry out your plan step by step with the tools, revise it if a step fails, "
                   "and give the final answer.")


def write_plan(state: TurnState, runtime: Runtime[EpisodeContext], config: RunnableConfig) -> dict[str, Any]:
    """Ask for the plan (no tool call), keep the request and the plan, and ask for its execution."""
    request = HumanMessage(content=PLAN_INSTRUCTION)
    plan = call_model(runtime.context, [*state["messages"], request], tools=False, config=config, step="plan")
    record_step(config, "plan", text=plan.text)
    return {"messages": [request, AIMessage(content=plan.text), HumanMessage(content=EXECUTE_REQUEST)]}


def build_plan_graph() -> TurnGraph:
    """plan -> tool loop."""
    return build_step_then_loop("plan", write_plan, name="plan", retry_policy=model_retry_policy())


plan = Strategy(name="plan", build=build_plan_graph,
                summary="write a short plan without tools, then carry it out with the tool loop",
                source="Plan-and-Solve (Wang et al., 2023, arXiv 2305.04091); plan-and-execute agents")
