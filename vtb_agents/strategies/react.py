"""``react``: the default strategy, the benchmark's own loop.

The model reasons and calls tools, sees their results (and the images they saved) and repeats
until it answers or reaches the tool-round cap, where it is asked once more, without tools, for
its final answer. This is ReAct (Yao et al., 2023, arXiv 2210.03629) as VisualToolBench's reference
harness runs it (at most 20 tool rounds per turn).
"""

from __future__ import annotations

from typing import Any, Callable

from langgraph.graph import START, StateGraph
from langgraph.types import RetryPolicy

from vtb_agents.strategies.base import EpisodeContext, Strategy, TurnGraph, TurnInput, TurnOutput, TurnState
from vtb_agents.strategies.loop import add_tool_loop


def turn_graph_builder() -> StateGraph[TurnState, EpisodeContext, TurnInput, TurnOutput]:
    """An empty turn graph with the strategy contract's state, input, output and context."""
    return StateGraph(TurnState, context_schema=EpisodeContext, input_schema=TurnInput, output_schema=TurnOutput)


def build_react_graph(*, retry_policy: RetryPolicy | None = None, name: str = "react") -> TurnGraph:
    """Compile the model/tool loop as a turn graph.

    Example:
        >>> graph = build_react_graph()
        >>> sorted(graph.get_graph().nodes)  # doctest: +NORMALIZE_WHITESPACE
        ['__end__', '__start__', 'general_tools', 'model', 'observe', 'round_cap', 'vision_tools']
    """
    builder = turn_graph_builder()
    builder.add_edge(START, add_tool_loop(builder, retry_policy=retry_policy))
    return builder.compile(name=name)


def build_step_then_loop(step_name: str, step: Callable[..., Any], *, name: str,
                         retry_policy: RetryPolicy | None = None) -> TurnGraph:
    """A turn graph with one step of a strategy's own (``step_name``) before the tool loop.

    ``retry_policy`` suits steps that call the model (a retry re-runs the whole step).
    """
    builder = turn_graph_builder()
    builder.add_node(step_name, step, retry_policy=retry_policy)
    builder.add_edge(START, step_name)
    builder.add_edge(step_name, add_tool_loop(builder))
    return builder.compile(name=name)


react = Strategy(
    name="react", build=build_react_graph,
    summary="reason and call tools until the answer (the benchmark's own loop; default)",
    source="ReAct (Yao et al., 2023, arXiv 2210.03629); VisualToolBench's reference harness",
)
