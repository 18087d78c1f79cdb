"""The episode driver: feed a task's turns, in order and with their images, through the agent graph.

One thread per task; the sandbox receives each turn's images when the turn starts. With
``history="golden"`` (the reference harness's default) the assistant's earlier turns are replaced
by the golden answers before the next turn; with ``history="model"`` the model's own answers stay.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver

from vtb_agents.artifacts import ArtifactStore, image_ref_block, to_png
from vtb_agents.graphs.agent import build_agent_graph, recursion_limit
from vtb_agents.graphs.prompts import PromptLevel, system_prompt
from vtb_agents.graphs.state import DEFAULT_MAX_IMAGE_SIDE, DEFAULT_MAX_TOOL_ROUNDS, EpisodeContext
from vtb_agents.models.replay import turn_message_id
from vtb_agents.results import Episode, ToolCallRecord, TurnRecord
from vtb_agents.tasks.model import Task
from vtb_agents.tools.sandbox.base import Sandbox

History = Literal["golden", "model"]


@dataclass(frozen=True)
class EpisodeSettings:
    """Knobs of one episode (recorded in the run so that results say how they were made)."""

    max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS
    prompt_level: PromptLevel = "high"
    history: History = "golden"
    max_image_side: int = DEFAULT_MAX_IMAGE_SIDE
    code_timeout_s: float = 60.0
    tags: tuple[str, ...] = field(default_factory=tuple)


def turn_message(task: Task, turn: int, sandbox: Sandbox, artifacts: ArtifactStore) -> HumanMessage:
    """The user message opening ``turn``: its prompt and images; the images also go to the sandbox."""
    blocks: list[Any] = [{"type": "text", "text": task.turns[turn].prompt}]
    for index in task.turns[turn].images:
        name = task.image_name(index)
        data = to_png(task.images[index].read_bytes())
        sandbox.put_file(name, data)
        blocks.append({"type": "text", "text": f"[{name}]"})
        blocks.append(image_ref_block(artifacts.put(data), name))
    return HumanMessage(content=blocks, id=turn_message_id(turn))


def turn_record(messages: Sequence[AnyMessage], turn: int, status: str) -> TurnRecord:
    """Summarise one turn's messages (from its opening message on) into a :class:`TurnRecord`."""
    start = next(i for i, m in enumerate(messages) if m.id == turn_message_id(turn))
    results = {m.tool_call_id: m for m in messages[start:] if isinstance(m, ToolMessage)}
    calls, rounds, answer = [], 0, ""
    for message in messages[start:]:
        if not isinstance(message, AIMessage):
            continue
        answer = message.text
        if not message.tool_calls:
            continue
        for call in message.tool_calls:
            result = results.get(call["id"])
            artifact = result.artifact if result is not None and isinstance(result.artifact, dict) else {}
            calls.append(ToolCallRecord(
                turn=turn, round=rounds, id=call["id"], name=call["name"], args=call["args"],
                ok=result is not None and result.status != "error", output=result.text if result else "",
                images=artifact.get("images", []), duration_s=artifact.get("duration_s"),
            ))
        rounds += 1
    final = "answered" if status == "answered" else "tool_round_cap"
    return TurnRecord(index=turn, answer=answer, status=final, tool_rounds=rounds, tool_calls=calls)


def golden_rewrite(last: AnyMessage, golden_answer: str) -> list[AnyMessage]:
    """The message that makes ``golden_answer`` the assistant's answer to the turn just ended.

    It replaces the final answer in place (same id); after a round cap there is none, so it is added.
    """
    replace_id = last.id if isinstance(last, AIMessage) and not last.tool_calls else None
    return [AIMessage(id=replace_id, content=golden_answer)]


def run_episode(task: Task, model: BaseChatModel, tools: Sequence[BaseTool], *, sandbox: Sandbox,
                artifacts: ArtifactStore, model_name: str, settings: EpisodeSettings = EpisodeSettings(),
                checkpointer: Any = None) -> Episode:
    """Run every turn of ``task`` and return the episode (answers, tool calls, statuses).

    Errors raised by the model or graph propagate: the runner records them per task.
    """
    graph = build_agent_graph(tools, checkpointer=checkpointer or InMemorySaver())
    context = EpisodeContext(
        model=model, sandbox=sandbox, artifacts=artifacts, system_prompt=system_prompt(settings.prompt_level),
        max_tool_rounds=settings.max_tool_rounds, max_image_side=settings.max_image_side,
        code_timeout_s=settings.code_timeout_s,
    )
    config: dict[str, Any] = {
        "configurable": {"thread_id": task.id},
        "recursion_limit": recursion_limit(settings.max_tool_rounds),
        "run_name": f"vtb:{task.id}",
        "tags": [task.category, task.domain, model_name, *settings.tags],
        "metadata": {"task_id": task.id, "category": task.category, "domain": task.domain, "model": model_name},
    }
    episode = Episode(task_id=task.id, model=model_name, settings={
        "max_tool_rounds": settings.max_tool_rounds, "prompt_level": settings.prompt_level,
        "history": settings.history, "tools": [t.name for t in tools],
        "sandbox_isolation": getattr(sandbox, "isolation", "unknown"),
    })
    carried: list[AnyMessage] = []  # history rewrites applied with the next turn's input
    for turn in range(len(task.turns)):
        opening = turn_message(task, turn, sandbox, artifacts)
        state = graph.invoke({"messages": [*carried, opening], "turn": turn, "tool_rounds": 0, "status": "running"},
                             config, context=context)
        episode.turns.append(turn_record(state["messages"], turn, state.get("status", "answered")))
        carried = golden_rewrite(state["messages"][-1], task.turns[turn].golden_answer) \
            if settings.history == "golden" else []
    return episode
