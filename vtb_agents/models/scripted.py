"""A scripted chat model for tests and benchmarks: answers from a script, records what it was sent.

LangChain's ``GenericFakeChatModel`` cannot bind tools; graphs need a model that can.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

Script = Callable[[list[BaseMessage]], AIMessage]


class ScriptedChatModel(BaseChatModel):
    """Replies with ``script(messages)``, or the next of ``replies``; keeps every request in ``calls``.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> model = ScriptedChatModel(replies=[AIMessage("4")])
        >>> model.invoke([HumanMessage("2+2?")]).content, len(model.calls)
        ('4', 1)
    """

    replies: list[AIMessage] = Field(default_factory=list)
    script: Script | None = None
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    bound_tools: list[Any] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "vtb-scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        """Record the tools; the same model (and its ``calls`` log) keeps answering."""
        self.bound_tools = list(tools)
        return self

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        self.calls.append(list(messages))
        if self.script is not None:
            reply = self.script(list(messages))
        elif len(self.calls) <= len(self.replies):
            reply = self.replies[len(self.calls) - 1]
        else:
            raise RuntimeError(f"scripted model: no reply left for call {len(self.calls)}")
        return ChatResult(generations=[ChatGeneration(message=reply)])
