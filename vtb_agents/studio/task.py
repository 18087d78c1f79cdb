"""The task graph for Studio: one whole task, turn by turn as ``vtb run`` plays it, then its grade.

```
START -> load -> open_turn -> turn (category graph) -> close_turn --more turns--> open_turn
                     ^                                       |--question--> ask (interrupt)
                     '---------------------------------------'  \\--last turn--> finish -> grading -> END
```
Input ``{"task_id": "..."}`` (a task of the context's ``tasks`` suite, default the bundled sample)
or ``{"task": <task.json object>}`` with its images inline as base64 (``images[i].data``). The turns
use the episode driver's own pieces: each turn's message and images (``turn_message``), the golden
history rewrite (``golden_rewrite``) and the turn records (``turn_record``). When a follow-up task's
answer asks the user something, the thread pauses in ``ask`` with ``{"question", "turn",
"next_prompt"}``: resume with an empty string to let the context's resumer reply (``scripted``: the
task's next prompt; LangGraph does not deliver a null resume), or with your own reply. The grading
graph then gives per-rubric verdicts and the score.
"""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.messages import AnyMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt
from typing_extensions import TypedDict

from vtb_agents.api import load_tasks
from vtb_agents.episodes.driver import opening_messages, record_settings, turn_record
from vtb_agents.graphs.categories import CLARIFYING
from vtb_agents.graphs.clarify import wants_clarification
from vtb_agents.results import Episode, TurnRecord, TurnStatus
from vtb_agents.strategies.base import TurnOutcome, as_node
from vtb_agents.config import RunConfig
from vtb_agents.studio.context import context_of, resources_for
from vtb_agents.studio.grading import build_studio_grading_graph
from vtb_agents.studio.inputs import task_from_json, thread_images
from vtb_agents.studio.sessions import SESSIONS, thread_artifacts
from vtb_agents.studio.turns import make_turn_node, reply_message, thread_id
from vtb_agents.tasks.model import Task


class TaskInput(TypedDict, total=False):
    """A task of the suite by id, or a task.json object with its images inline (base64)."""

    task_id: str
    task: dict[str, Any]


class TaskOutput(TypedDict, total=False):
    """The conversation, the episode (turn records) and the grade (per-rubric verdicts, score)."""

    messages: list[AnyMessage]
    episode: dict[str, Any]
    answers: list[str]
    grade: dict[str, Any]


class TaskState(TypedDict, total=False):
    """Where the task's episode is: its turns so far, a pending question or reply, and the grade."""

    task_id: str
    task: dict[str, Any]
    images: list[str]
    messages: Annotated[list[AnyMessage], add_messages]
    turn: int
    num_turns: int
    status: TurnOutcome
    question: str | None
    reply: str | None
    turns: list[dict[str, Any]]
    episode: dict[str, Any]
    answers: list[str]
    grade: dict[str, Any]


def resolve_task(state: TaskState, ctx: RunConfig) -> Task:
    """The task the input names: ``task`` inline, else ``task_id`` in the context's suite."""
    if state.get("task"):
        return task_from_json(state["task"])
    task_id = state.get("task_id")
    if not task_id:
        raise ValueError("input: give 'task_id' (a task of the suite) or 'task' (a task.json object)")
    found = load_tasks(ctx.tasks, task_id=task_id)
    if not found:
        raise ValueError(f"task_id {task_id!r}: no such task in suite {ctx.tasks!r}")
    return found[0]


def stored_task(state: TaskState, config: RunnableConfig) -> Task:
    """The state's task with its images' bytes from the thread's artifact store."""
    task = Task.model_validate(state["task"])
    artifacts = thread_artifacts(thread_id(config))
    for image, ref in zip(task.images, state["images"]):
        image.data = artifacts.get(ref)
    return task


def load(state: TaskState, config: RunnableConfig, runtime: Runtime[RunConfig]) -> dict[str, Any]:
    """Resolve the task, store its images with the thread and start from a clean conversation and,
    as every task of ``vtb run`` does, a fresh sandbox."""
    task = resolve_task(state, context_of(runtime.context))
    artifacts = thread_artifacts(thread_id(config))
    SESSIONS.discard(thread_id(config))
    return {"task": task.model_dump(mode="json"), "task_id": task.id,
            "images": [artifacts.put(image.read_bytes()) for image in task.images],
            "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES)], "turn": 0, "num_turns": len(task.turns),
            "turns": [], "question": None, "reply": None}


def open_turn(state: TaskState, config: RunnableConfig, runtime: Runtime[RunConfig]) -> dict[str, Any]:
    """The turn's user message (prompt or the reply to a question) with its images in the sandbox;
    under golden history the previous answer becomes the golden one first."""
    ctx = context_of(runtime.context)
    task, turn, messages = stored_task(state, config), state["turn"], state["messages"]
    with SESSIONS.use(thread_id(config), ctx.sandbox, thread_images(messages)) as session:
        opening = opening_messages(task, turn, messages[-1] if messages else None, ctx.episode.history,
                                   session.sandbox, session.artifacts, state.get("reply"))
    return {"messages": opening, "reply": None, "status": "running"}


def close_turn(state: TaskState) -> dict[str, Any]:
    """Record the turn; note the question if a follow-up answer asks one and a next turn can answer."""
    turn, task = state["turn"], state["task"]
    asked = task["category"] in CLARIFYING and wants_clarification(state)
    capped = state.get("status") == "tool_round_cap"
    status: TurnStatus = "asked_user" if asked else "tool_round_cap" if capped else "answered"
    record = turn_record(state["messages"], turn, status)
    last = turn + 1 >= state["num_turns"]
    return {"turns": [*state.get("turns", []), record.model_dump(mode="json")], "turn": turn if last else turn + 1,
            "question": record.answer if asked else None}


def after_turn(state: TaskState) -> str:
    """Ask the user, open the next turn, or finish."""
    if state.get("question"):
        return "ask"
    return "finish" if len(state.get("turns", [])) >= state["num_turns"] else "open_turn"


def ask(state: TaskState, runtime: Runtime[RunConfig]) -> dict[str, Any]:
    """Pause with the question; on resume the reply (or the resumer's, for null) opens the next turn."""
    turn, question = state["turn"], state["question"] or ""
    task = Task.model_validate(state["task"])
    reply = interrupt({"question": question, "turn": turn - 1, "next_prompt": task.turns[turn].prompt,
                       "resume": "an empty string lets the resumer reply (scripted: next_prompt); "
                                 "or send your own reply"})
    if isinstance(reply, str) and not reply.strip():
        resumer = resources_for(context_of(runtime.context), chat=False).resumer
        if resumer is None:
            raise RuntimeError("the task graph's resources have no resumer")
        text = resumer.reply(task, turn, question)
    else:
        text = reply_message(reply, f"task {task.id!r}, turn {turn + 1}").text
    return {"reply": text, "question": None}


def finish(state: TaskState, config: RunnableConfig, runtime: Runtime[RunConfig]) -> dict[str, Any]:
    """The episode of the task, its settings recorded as ``vtb run`` records them, and the answers
    the grading graph judges."""
    ctx = context_of(runtime.context)
    resources = resources_for(ctx, chat=False)
    turns = [TurnRecord.model_validate(t) for t in state["turns"]]
    with SESSIONS.use(thread_id(config), ctx.sandbox, thread_images(state["messages"])) as session:
        settings = record_settings(ctx.strategy_spec, ctx.episode, tools=[t.name for t in resources.tools],
                                   resumer=resources.resumer.name if resources.resumer else ctx.resumer,
                                   sandbox=session.sandbox, graph="task")
    episode = Episode(task_id=state["task"]["id"], model=ctx.model, turns=turns, settings=settings)
    return {"episode": episode.model_dump(mode="json"), "answers": [t.answer for t in turns]}


def build_task_graph() -> CompiledStateGraph[TaskState, RunConfig, TaskInput, TaskOutput]:
    """Compile the Studio task graph (any category: the task says which category graph answers)."""
    builder = StateGraph(TaskState, context_schema=RunConfig, input_schema=TaskInput, output_schema=TaskOutput)
    builder.add_node("load", as_node(load))
    builder.add_node("open_turn", as_node(open_turn))
    builder.add_node("turn", make_turn_node(None, chat=False))
    builder.add_node("close_turn", close_turn)
    builder.add_node("ask", ask)
    builder.add_node("finish", as_node(finish))
    builder.add_node("grading", build_studio_grading_graph())
    builder.add_edge(START, "load")
    builder.add_edge("load", "open_turn")
    builder.add_edge("open_turn", "turn")
    builder.add_edge("turn", "close_turn")
    builder.add_conditional_edges("close_turn", after_turn, ["ask", "open_turn", "finish"])
    builder.add_edge("ask", "open_turn")
    builder.add_edge("finish", "grading")
    builder.add_edge("grading", END)
    return builder.compile(name="task")
