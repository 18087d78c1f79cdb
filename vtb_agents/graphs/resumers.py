"""Who answers the model's clarifying question: the task's next turn, a simulated user, or a human.

A resumer returns the user's reply text; the episode driver adds the next turn's images and
resumes the interrupted graph with it.
"""

from __future__ import annotations

from typing import Callable, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage

from vtb_agents.tasks.model import Task


class Resumer(Protocol):
    """Produces the user's reply to ``question`` for turn ``next_turn`` (0-based) of ``task``."""

    name: str

    def reply(self, task: Task, next_turn: int, question: str) -> str:
        """The reply text."""
        ...


class ScriptedResumer:
    """Replies with the task's next turn prompt, as the dataset scripted it (the default)."""

    name = "scripted"

    def reply(self, task: Task, next_turn: int, question: str) -> str:
        """The next turn's prompt, whatever the question was."""
        return task.turns[next_turn].prompt


SIMULATED_USER_PROMPT = (
    "You are role-playing the user of an AI assistant that looks at images for you. You asked a "
    "question that was missing some detail; the assistant has now asked you to clarify. What you "
    "actually want is described below. Answer the assistant's question briefly and naturally, in the "
    "first person, giving only the information it asked for. Never give away the answer to your own "
    "request, never ask it a new question, and do not mention that you are simulated.\n\n"
    "Your original request: {original}\n\nWhat you meant (your clarification, as you would say it): {intended}"
)


class SimulatedResumer:
    """An LLM user that knows the task and answers only what it is asked (tau-bench / openevals style)."""

    name = "simulated"

    def __init__(self, model: BaseChatModel) -> None:
        self.model = model

    def reply(self, task: Task, next_turn: int, question: str) -> str:
        """Ask the user model to answer ``question`` in character."""
        system = SIMULATED_USER_PROMPT.format(original=task.turns[next_turn - 1].prompt,
                                              intended=task.turns[next_turn].prompt)
        answer = self.model.invoke([SystemMessage(system), HumanMessage(question)])
        text = answer.text.strip()
        if not text:
            raise ValueError(f"simulated user gave an empty reply to {question!r}")
        return text


class HumanResumer:
    """Asks a person at the terminal (``ask`` prompts and reads a line)."""

    name = "human"

    def __init__(self, ask: Callable[[str], str] = input) -> None:
        self.ask = ask

    def reply(self, task: Task, next_turn: int, question: str) -> str:
        """Show the question and read the reply."""
        return self.ask(f"\n[{task.id}] The model asks: {question}\nYour reply: ").strip()


def load_resumer(kind: str, user_model: BaseChatModel | None = None) -> Resumer:
    """The resumer named ``kind``: ``scripted`` (default), ``simulated`` (needs ``user_model``) or ``human``."""
    if kind == "scripted":
        return ScriptedResumer()
    if kind == "human":
        return HumanResumer()
    if kind == "simulated":
        if user_model is None:
            raise ValueError("--resumer simulated needs a user model (--user-model provider:model)")
        return SimulatedResumer(user_model)
    raise ValueError(f"unknown resumer {kind!r}: choose scripted, simulated or human")
