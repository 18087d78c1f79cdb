"""A category graph as a chat graph for Studio: each run of a thread is one user turn.

```
START -> ingest -> turn (the category graph, a subgraph) -> END
                      \\--(follow_up: the answer asks something)--> ask (interrupt) -> ingest
```
Input ``{"messages": [...]}`` as for any chat graph. ``ingest`` turns the new user message into the
turn's message: its images go to the thread's sandbox as ``image_0.png``, ``image_1.png``, ... and
into the state as artifact references. In ``follow_up`` a question in the answer pauses the thread
in ``ask`` with ``{"question", "turn"}``; resume it with the reply (text or a user message), or
just send the next message.
"""

from __future__ import annotations

from typing import Annotated, Any, cast

from langchain_core.messages import AnyMessage, HumanMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt
from typing_extensions import TypedDict

from vtb_agents.episodes.driver import place_image
from vtb_agents.graphs.categories import CATEGORIES, CLARIFYING
from vtb_agents.graphs.clarify import asks_user
from vtb_agents.models.replay import TURN_MESSAGE_PREFIX, turn_message_id
from vtb_agents.strategies.base import TurnOutcome, as_node
from vtb_agents.config import RunConfig
from vtb_agents.studio.context import context_of, resources_for
from vtb_agents.studio.inputs import ingest_message, thread_images, user_image_count
from vtb_agents.studio.sessions import SESSIONS
from vtb_agents.studio.turns import make_turn_node, reply_message, thread_id


class ChatInput(TypedDict):
    """The user's turn: messages as for any chat model (images as image content blocks)."""

    messages: list[AnyMessage]


class ChatOutput(TypedDict, total=False):
    """The conversation (images as artifact references) and how the turn ended."""

    messages: list[AnyMessage]
    status: TurnOutcome


class ChatState(TypedDict, total=False):
    """Conversation, index of the current turn and how it ended."""

    messages: Annotated[list[AnyMessage], add_messages]
    turn: int
    status: TurnOutcome


def _is_turn_message(message: AnyMessage) -> bool:
    return (message.id or "").startswith(TURN_MESSAGE_PREFIX)


def new_user_messages(messages: list[AnyMessage]) -> list[AnyMessage]:
    """The user messages at the end of the conversation that no turn has taken in yet."""
    tail: list[AnyMessage] = []
    for message in reversed(messages):
        if not isinstance(message, HumanMessage) or _is_turn_message(message):
            break
        tail.insert(0, message)
    return tail


def ingest(state: ChatState, config: RunnableConfig, runtime: Runtime[RunConfig]) -> dict[str, Any]:
    """Make the new user message(s) the next turn's message, their images placed in the sandbox."""
    messages = state["messages"]
    fresh = new_user_messages(messages)
    if not fresh:
        raise ValueError("input: send a user message, "
                         "e.g. {\"messages\": [{\"role\": \"user\", \"content\": \"...\"}]}")
    turn = sum(_is_turn_message(m) for m in messages)
    merged = HumanMessage(content=[block for m in fresh for block in
                                   (m.content if isinstance(m.content, list) else [m.content])])
    ctx = context_of(runtime.context)
    opener = resources_for(ctx, chat=True).open_sandbox
    with SESSIONS.use(thread_id(config), ctx.sandbox, opener, thread_images(messages)) as session:
        message = ingest_message(merged, user_image_count(messages),
                                 lambda name, data: place_image(name, data, session.sandbox, session.artifacts),
                                 turn_message_id(turn))
    removed = [RemoveMessage(id=cast(str, m.id)) for m in fresh]  # add_messages gave every state message an id
    return {"messages": [*removed, message], "turn": turn, "status": "running"}


def ask(state: ChatState) -> dict[str, Any]:
    """Pause with the model's question; the reply becomes the next user message."""
    question = asks_user(state["messages"][-1]) or ""
    reply = interrupt({"question": question, "turn": state.get("turn", 0)})
    return {"messages": [reply_message(reply, "follow_up")]}


def build_chat_graph(category: str) -> CompiledStateGraph[ChatState, RunConfig, ChatInput, ChatOutput]:
    """The Studio chat graph of ``category`` (one of :data:`~vtb_agents.graphs.categories.CATEGORIES`)."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown category {category!r}: choose one of {', '.join(CATEGORIES)}")
    builder = StateGraph(ChatState, context_schema=RunConfig, input_schema=ChatInput, output_schema=ChatOutput)
    builder.add_node("ingest", as_node(ingest))
    builder.add_node("turn", make_turn_node(category))
    builder.add_edge(START, "ingest")
    builder.add_edge("ingest", "turn")
    if category in CLARIFYING:
        builder.add_node("ask", ask)
        builder.add_conditional_edges("turn", lambda s: "ask" if asks_user(s["messages"][-1]) else END, ["ask", END])
        builder.add_edge("ask", "ingest")
    else:
        builder.add_edge("turn", END)
    return builder.compile(name=category)
