"""The ``replay`` agent: replays a task's reference trajectory through the real graph and tools,
then answers with the golden answer. A self-test of the whole pipeline and the offline default.
"""

from __future__ import annotations

from typing import Any, Sequence

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from vtb_agents.tasks.model import Task

TURN_MESSAGE_PREFIX = "turn-"
"""Id prefix of the HumanMessage that opens a turn (``turn-0``, ``turn-1``, ...)."""


def turn_message_id(turn: int) -> str:
    """The message id the episode driver gives to the prompt of turn ``turn`` (0-based)."""
    return f"{TURN_MESSAGE_PREFIX}{turn}"


def current_turn(messages: Sequence[BaseMessage]) -> tuple[int, int]:
    """(turn index, model calls already made in it), read from the conversation so far."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, HumanMessage) and (message.id or "").startswith(TURN_MESSAGE_PREFIX):
            turn = int((message.id or "")[len(TURN_MESSAGE_PREFIX):])
            calls = sum(isinstance(m, AIMessage) for m in messages[i + 1:])
            return turn, calls
    raise ValueError("replay model: no turn message (id 'turn-N') in the conversation")


class ReplayChatModel(BaseChatModel):
    """Calls the reference trajectory's tools one per round, then gives the golden answer.

    Steps naming a tool the graph does not offer are skipped (for example under ``--no-tools``).
    """

    task: Task
    bound_tools: tuple[str, ...] | None = None

    @property
    def _llm_type(self) -> str:
        return "vtb-replay"

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> ReplayChatModel:
        """Remember which tool names the graph offers (the rest of the trajectory is skipped); a
        ``tool_choice`` of "none" offers none."""
        if tool_choice == "none":
            return self.model_copy(update={"bound_tools": ()})
        names = []
        for tool in tools:
            if isinstance(tool, dict):
                names.append(tool.get("function", tool).get("name"))
            else:
                names.append(getattr(tool, "name", None))
        return self.model_copy(update={"bound_tools": tuple(n for n in names if n)})

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        turn, calls_made = current_turn(messages)
        if turn >= len(self.task.turns):
            raise ValueError(f"replay model: task {self.task.id!r} has no turn {turn + 1}")
        offered = set(self.bound_tools or ())
        steps = [s for s in self.task.turns[turn].trajectory if s.tool in offered]
        if calls_made < len(steps):
            step = steps[calls_made]
            call = {"name": step.tool, "args": dict(step.args), "id": f"call_{turn}_{calls_made}", "type": "tool_call"}
            message = AIMessage(content="", tool_calls=[call])
        else:
            message = AIMessage(content=self.task.turns[turn].golden_answer)
        return ChatResult(generations=[ChatGeneration(message=message)])
