"""The five category graphs: one builder, any strategy, differing only where the categories differ.

```
START -> answer (the strategy's turn graph, a subgraph) --question?--> clarify (interrupt) -> answer
                                                        \\-----------> END
```

| category        | turns  | what differs                                                  |
|-----------------|--------|---------------------------------------------------------------|
| region_switch   | single | nothing: the strategy answers                                 |
| hybrid_tool     | single | nothing: the strategy answers                                 |
| follow_up       | multi  | the clarification node (interrupt on a question)              |
| temporal        | multi  | each turn's input brings that turn's new images (the driver)  |
| progressive     | multi  | later turns build on the answers already in the thread         |

What makes temporal and progressive tasks what they are lives in the turns fed by the episode
driver, which every category and every strategy shares. Each graph takes
:class:`~vtb_agents.graphs.state.EpisodeInput`, returns
:class:`~vtb_agents.graphs.state.EpisodeOutput` and runs with an
:class:`~vtb_agents.strategies.base.EpisodeContext`.
"""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from vtb_agents.graphs.clarify import clarify, wants_clarification
from vtb_agents.graphs.state import EpisodeContext, EpisodeInput, EpisodeOutput, EpisodeState
from vtb_agents.strategies.base import Strategy
from vtb_agents.strategies.react import react
from vtb_agents.tasks.normalize import CATEGORIES

CLARIFYING = frozenset({"follow_up"})


def build_category_graph(category: str, strategy: Strategy = react, *, checkpointer: Any = None
                         ) -> CompiledStateGraph[EpisodeState, EpisodeContext, EpisodeInput, EpisodeOutput]:
    """Compile ``category``'s graph around ``strategy`` (unknown categories get the plain graph).

    Example:
        >>> graph = build_category_graph("follow_up")
        >>> sorted(graph.get_graph().nodes)
        ['__end__', '__start__', 'answer', 'clarify']
    """
    builder = StateGraph(EpisodeState, context_schema=EpisodeContext, input_schema=EpisodeInput,
                         output_schema=EpisodeOutput)
    builder.add_node("answer", strategy.build())
    builder.add_edge(START, "answer")
    if category in CLARIFYING:
        builder.add_node("clarify", clarify)
        builder.add_conditional_edges("answer", lambda s: "clarify" if wants_clarification(s) else END,
                                      ["clarify", END])
        builder.add_edge("clarify", "answer")
    else:
        builder.add_edge("answer", END)
    name = category if category in CATEGORIES else "region_switch"
    return builder.compile(checkpointer=checkpointer, name=name)
