"""The clarification node: when the model asks the user instead of answering, pause the graph.

Detection: in a graph built with clarification (the ``follow_up`` category), a final answer
(no tool calls) that contains a question (a sentence ending in "?") asks the user, provided the
task has a next turn to answer it. Clarifying questions often end with an offer ("Which item do
you mean? ... Tell me and I'll read its price."), so the question may be anywhere. A rhetorical
question also counts: with the scripted resumer that changes nothing (the next turn comes either
way); with a simulated or human user it gives them a say. The node calls ``interrupt()`` with the
question; the episode driver resumes it
with ``Command(resume={"messages": [...]})`` carrying the user's reply (and any history rewrite).
Nothing with side effects runs before ``interrupt()``: the node re-runs from the top on resume.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, AnyMessage
from langgraph.types import interrupt

from vtb_agents.graphs.state import EpisodeState

_QUESTION = re.compile(r"\w[^.!?\n]*\?")
_CODE = re.compile(r"```.*?```|`[^`]*`", re.DOTALL)


def asks_user(message: AnyMessage) -> str | None:
    """The whole answer if ``message`` is a final answer that asks the user something, else None.

    >>> asks_user(AIMessage("Which item do you mean? Tell me and I'll read its price."))
    "Which item do you mean? Tell me and I'll read its price."
    >>> asks_user(AIMessage("The total is 12.50.")) is None
    True
    """
    if not isinstance(message, AIMessage) or message.tool_calls:
        return None
    text = _CODE.sub("", message.text)
    return message.text.strip() if _QUESTION.search(text) else None


def wants_clarification(state: Mapping[str, Any]) -> bool:
    """Whether the turn just ended with a question that a next turn can answer."""
    has_next_turn = state.get("turn", 0) + 1 < state.get("num_turns", 1)
    return has_next_turn and asks_user(state["messages"][-1]) is not None


def clarify(state: EpisodeState) -> dict[str, Any]:
    """Pause with the model's question; on resume, add the user's reply and start the next turn."""
    question = asks_user(state["messages"][-1]) or ""
    reply = interrupt({"question": question, "turn": state.get("turn", 0)})
    return {"messages": reply["messages"], "turn": state.get("turn", 0) + 1, "tool_rounds": 0, "status": "running"}
