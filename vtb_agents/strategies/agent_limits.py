"""The built-in loop's limits and tool descriptions for a user's agent, which we did not write.

A user's agent brings its own model and loop, so the limits are enforced where every agent
passes: LangChain callbacks (handed down to every nested runnable, the agent's own model
included) and the tools it is given.

- **Tool-round cap.** :class:`AgentLimits` counts the agent's model replies with tool calls in a
  turn. A reply with tool calls past the cap gets, instead of running, the built-in loop's cap
  notice as the result of each call (:func:`~vtb_agents.strategies.loop.cap_notice`), so that the
  agent's next model call gives the final answer; a reply that still calls tools then ends the turn
  (:class:`RoundCapReached`), its text the answer. Either way the turn is ``tool_round_cap``, with
  the rounds the built-in loop records.
- **Time limit.** The task's ``TaskDeadline`` reaches the agent through the same callbacks
  (:mod:`vtb_agents.models.deadline`), which also refuses a reply that came after the limit; the
  turn ends at the limit even while the agent's own model client waits past it
  (:func:`~vtb_agents.models.deadline.within_task_limit`).
- **Tool descriptions** stay as they are for the whole episode, as the built-in loop's do, so that
  every request of the agent can extend the one before (docs/concepts/prompt-caching.md): the files
  the tools save are named in their results.
"""

from __future__ import annotations

import threading
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.tools import BaseTool

from vtb_agents.models.deadline import QuietHandlerErrors
from vtb_agents.strategies.base import EpisodeContext
from vtb_agents.strategies.loop import cap_notice


class RoundCapReached(Exception):
    """The agent called tools again after the cap notices: its turn ends (``tool_round_cap``)."""


QuietHandlerErrors.handlers.add("AgentLimits")


class AgentLimits(BaseCallbackHandler):
    """A user's agent's tools and tool-round cap for one episode; ``start_turn`` before each turn.

    Pass it in the agent's ``callbacks``; ``tools`` are what the agent gets. After the turn,
    ``capped`` says whether it reached the cap, and ``stopped`` holds the turn's messages when
    this handler ended it (the agent's own state is then lost with its run).
    """

    raise_error = True  # LangChain re-raises RoundCapReached instead of logging it
    run_inline = True

    def __init__(self, ctx: EpisodeContext) -> None:
        self.ctx = ctx
        self.tools: list[LimitedTool] = [
            LimitedTool(name=t.name, description=t.description, args_schema=t.args_schema,
                        response_format=t.response_format, inner=t, limits=self) for t in ctx.tools]
        self._lock = threading.Lock()
        self.start_turn()

    def start_turn(self) -> None:
        """Reset the turn's count."""
        with self._lock:
            self.rounds, self.capped = 0, False
            self.refused: set[str] = set()
            self.transcript: list[AnyMessage] = []
            self.stopped: list[AnyMessage] | None = None

    def refusal(self, tool_call_id: str | None, name: str) -> ToolMessage | None:
        """The cap notice for a call made past the cap (None for a call that may run)."""
        with self._lock:
            if tool_call_id is None or tool_call_id not in self.refused:
                return None
            notice = cap_notice({"name": name, "args": {}, "id": tool_call_id}, self.ctx.max_tool_rounds)
            self.transcript.append(notice)
            return notice

    def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
        if self.stopped is not None:  # an agent that retries after the end is ended again
            raise RoundCapReached(f"the limit of {self.ctx.max_tool_rounds} tool rounds for this turn is reached")

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        generation = response.generations[0][0] if response.generations and response.generations[0] else None
        if not isinstance(generation, ChatGeneration) or not isinstance(generation.message, AIMessage):
            return
        reply = generation.message
        with self._lock:
            if reply.tool_calls and self.capped:  # calls tools after the cap notices
                self.stopped = [*self.transcript, AIMessage(content=reply.content, id=reply.id)]
                raise RoundCapReached(f"the limit of {self.ctx.max_tool_rounds} tool rounds for this turn is "
                                      "reached and the model kept calling tools")
            self.transcript.append(reply)
            if not reply.tool_calls:
                return
            if self.rounds >= self.ctx.max_tool_rounds:
                self.capped = True
                self.refused |= {call["id"] for call in reply.tool_calls if call["id"]}
            self.rounds += 1

    def on_tool_end(self, output: Any, **kwargs: Any) -> None:
        if isinstance(output, ToolMessage):
            with self._lock:
                self.transcript.append(output)


class LimitedTool(BaseTool):
    """One of the episode's tools as a user's agent gets it: a call past the round cap is answered
    with the cap notice instead of running (see the module docstring)."""

    inner: BaseTool
    limits: AgentLimits

    def run(self, tool_input: Any, *args: Any, tool_call_id: str | None = None, **kwargs: Any) -> Any:
        refused = self.limits.refusal(tool_call_id, self.name)
        if refused is not None:
            return refused
        return self.inner.run(tool_input, *args, tool_call_id=tool_call_id, **kwargs)

    async def arun(self, tool_input: Any, *args: Any, tool_call_id: str | None = None, **kwargs: Any) -> Any:
        refused = self.limits.refusal(tool_call_id, self.name)
        if refused is not None:
            return refused
        return await self.inner.arun(tool_input, *args, tool_call_id=tool_call_id, **kwargs)

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("LimitedTool runs its inner tool through run/arun")
