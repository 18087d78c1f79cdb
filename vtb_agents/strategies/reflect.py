"""``reflect``: answer, critique the answer against the question, revise once.

The tool loop answers; one model call that may not call tools reviews that answer against the question
(missed parts, unverified readings, arithmetic); the tool loop runs again to revise, sharing the
turn's tool-round budget. Self-Refine (Madaan et al., 2023, arXiv 2303.17651) and Reflexion
(Shinn et al., 2023, arXiv 2303.11366), limited to one revision.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START
from langgraph.runtime import Runtime

from vtb_agents.models.retry import model_retry_policy
from vtb_agents.strategies.base import EpisodeContext, Strategy, TurnGraph, TurnState, as_node
from vtb_agents.strategies.loop import call_model
from vtb_agents.strategies.react import build_react_graph, turn_graph_builder
from vtb_agents.strategies.steps import record_step

CRITIQUE_REQUEST = (
    "Review your answer above against the question, without calling tools: list every part of the "
    "question it misses, every value read from an image that you did not verify in a zoomed view, "
    "and every calculation not done with a tool. If it is correct and complete, say so."
)
REVISE_REQUEST = ("Revise your answer once in light of this review: check what it flagged with the tools if needed, "
                  "then state your final answer in full.")


def critique(state: TurnState, runtime: Runtime[EpisodeContext], config: RunnableConfig) -> dict[str, Any]:
    """Ask for a review of the first answer (no tools) and then for the revision."""
    request = HumanMessage(content=CRITIQUE_REQUEST)
    review = call_model(runtime.context, [*state["messages"], request], tools=False, config=config, step="critique")
    record_step(config, "critique", text=review.text)
    return {"messages": [request, AIMessage(content=review.text), HumanMessage(content=REVISE_REQUEST)]}


def build_reflect_graph() -> TurnGraph:
    """answer (tool loop) -> critique -> revise (tool loop)."""
    builder = turn_graph_builder()
    builder.add_node("answer", build_react_graph(name="answer"))
    builder.add_node("critique", as_node(critique), retry_policy=model_retry_policy())
    builder.add_node("revise", build_react_graph(name="revise"))
    builder.add_edge(START, "answer")
    builder.add_edge("answer", "critique")
    builder.add_edge("critique", "revise")
    builder.add_edge("revise", END)
    return builder.compile(name="reflect")


reflect = Strategy(name="reflect", build=build_reflect_graph,
                   summary="answer, critique the answer against the question, revise once",
                   source="Self-Refine (Madaan et al., 2023, arXiv 2303.17651); Reflexion (Shinn et al., 2023)")
