"""The task graph for Studio: one whole task through the episode driver of ``vtb run``, then its grade.

```
START -> load -> episode (one turn) --next turn--> episode
                                    --question--> ask (interrupt) -> episode
                                    --every turn answered--> grading -> END
```
Input ``{"task_id": "..."}`` (a task of the context's ``tasks`` suite, default the bundled sample)
or ``{"task": <task.json object>}`` with its images inline as base64 (``images[i].data``). Each
``episode`` step runs one turn with the driver's :func:`~vtb_agents.episodes.driver.turn_input`
and :func:`~vtb_agents.episodes.driver.drive_turn` (the steps of ``vtb run``'s turn loop) on the
thread's sandbox, invoking the category graph with the step's config: it is a subgraph of the run,
so Studio streams its model and tool steps, LangSmith nests its trace under the step, and its
conversation is kept in the thread's checkpoints (``checkpointer=True``). When a follow-up task's
answer asks the user something, the thread pauses in ``ask`` with ``{"question", "turn",
"next_prompt"}``: resume with an empty string to let the context's resumer reply (``scripted``: the
task's next prompt; LangGraph does not deliver a null resume), or with your own reply, and the
next ``episode`` step opens the next turn with it. The grading graph then gives per-rubric verdicts
and the score. The output's ``transcript`` holds the episode's transcript events so far (model and
tool calls, strategy steps: docs/reference/transcripts.md), recorded by each ``episode`` step as ``vtb run``
records them; the verdicts are in ``grade``.
"""

from __future__ import annotations

from typing import Annotated, Any, cast

from langchain_core.messages import AnyMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import merge_configs
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt
from typing_extensions import TypedDict

from vtb_agents.api import load_tasks
from vtb_agents.episodes.driver import drive_turn, episode_config, record_settings, turn_input
from vtb_agents.episodes.recorder import TranscriptRecorder
from vtb_agents.graphs.categories import build_category_graph
from vtb_agents.results import Episode, TurnRecord
from vtb_agents.runner.resources import RunResources
from vtb_agents.strategies.base import EpisodeContext, as_node
from vtb_agents.config import RunConfig
from vtb_agents.studio.context import context_of, resources_for
from vtb_agents.studio.grading import build_studio_grading_graph
from vtb_agents.studio.inputs import task_from_json, thread_images
from vtb_agents.studio.sessions import SESSIONS, thread_artifacts
from vtb_agents.studio.turns import live_context, reply_message, thread_id
from vtb_agents.tasks.model import Task

_GRAPHS: dict[tuple[str, str], CompiledStateGraph[Any, EpisodeContext, Any, Any]] = {}


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
    transcript: list[dict[str, Any]]


class TaskState(TypedDict, total=False):
    """Where the task's episode is: its turns so far, a pending question or reply, and the grade."""

    task_id: str
    task: dict[str, Any]
    images: list[str]
    messages: Annotated[list[AnyMessage], add_messages]
    question: str | None
    reply: str | None
    turns: list[dict[str, Any]]
    episode: dict[str, Any]
    answers: list[str]
    grade: dict[str, Any]
    transcript: list[dict[str, Any]]


def resolve_task(state: TaskState, ctx: RunConfig) -> Task:
    """The task the input names: ``task_id`` in the context's suite, else ``task`` inline. ``load``
    consumes ``task_id`` (sets it to None) and keeps the loaded task, without its image bytes, in
    ``task``: on a thread that ran a task before, an input naming a ``task_id`` is that suite task,
    and one giving only ``task`` is that inline task."""
    task_id = state.get("task_id")
    if not task_id:
        if state.get("task"):
            return task_from_json(state["task"])
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
    return {"task": task.model_dump(mode="json"), "task_id": None,
            "images": [artifacts.put(image.read_bytes()) for image in task.images],
            "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES)], "turns": [], "question": None, "reply": None,
            "transcript": []}


def episode_graph(resources: RunResources, category: str) -> CompiledStateGraph[Any, EpisodeContext, Any, Any]:
    """The category graph around the context's strategy, as a subgraph keeping its conversation in the
    task graph's thread (``checkpointer=True``: one history per thread, whichever ``episode`` step runs it)."""
    key = (resources.strategy.name, category)
    if key not in _GRAPHS:
        _GRAPHS[key] = build_category_graph(category, resources.strategy, checkpointer=True)
    return _GRAPHS[key]


def episode(state: TaskState, config: RunnableConfig, runtime: Runtime[RunConfig]) -> dict[str, Any]:
    """Run the task's next turn through the episode driver, as a subgraph of this run (so Studio
    streams its steps and LangSmith nests its trace); after a question, open it with the reply."""
    ctx = context_of(runtime.context)
    resources = resources_for(ctx, chat=False)
    task = stored_task(state, config)
    graph = episode_graph(resources, task.category)
    limits = episode_config(task, ctx.model, ctx.strategy_spec, ctx.episode)
    inner = {**config, **{key: value for key, value in limits.items() if key != "configurable"}}
    turns = [TurnRecord.model_validate(t) for t in state.get("turns", [])]
    asked, reply = bool(turns) and turns[-1].status == "asked_user", state.get("reply")
    if asked and reply is None:
        raise RuntimeError(f"task {task.id!r}: the episode paused on a question and has no reply to continue with")
    images = thread_images(state["messages"])
    with SESSIONS.use(thread_id(config), ctx.sandbox, resources.open_sandbox, images) as session:
        record = Episode(task_id=task.id, model=ctx.model, turns=turns,
                         settings=record_settings(ctx.strategy_spec, ctx.episode,
                                                  tools=[t.name for t in resources.tools],
                                                  resumer=resources.resumer.name if resources.resumer else ctx.resumer,
                                                  sandbox=session.sandbox, graph="task"))
        context = live_context(ctx, resources, session, task)
        step = turn_input(task, len(turns), state["messages"], ctx.episode.history, context, reply, asked=asked)
        recorder = TranscriptRecorder(session.artifacts)  # this turn's events, as the driver records a run's
        recorded = cast(dict[str, Any], merge_configs(cast(RunnableConfig, inner), {"callbacks": [recorder]}))
        messages, question = drive_turn(graph, recorded, context, record, step)
        recorder.adopt(record.turns[-1].tool_calls)  # the turn's events carry its records, as in a run
    events = [event.model_dump(mode="json") for event in recorder.transcript(task.id).events]
    update: dict[str, Any] = {"messages": messages, "turns": [t.model_dump(mode="json") for t in record.turns],
                              "question": question, "reply": None,
                              "transcript": [*state.get("transcript", []), *events]}
    if question is None and len(record.turns) == len(task.turns):
        update |= {"episode": record.model_dump(mode="json"), "answers": [t.answer for t in record.turns]}
    return update


def after_episode(state: TaskState) -> str:
    """Ask the user, answer the next turn, or grade the finished episode."""
    if state.get("question"):
        return "ask"
    return "episode" if len(state["turns"]) < len(state["task"]["turns"]) else "grading"


def ask(state: TaskState, runtime: Runtime[RunConfig]) -> dict[str, Any]:
    """Pause with the question; on resume the reply (or the resumer's, for null) opens the next turn."""
    turn, question = len(state["turns"]), state["question"] or ""
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


def build_task_graph() -> CompiledStateGraph[TaskState, RunConfig, TaskInput, TaskOutput]:
    """Compile the Studio task graph (any category: the task says which category graph answers)."""
    builder = StateGraph(TaskState, context_schema=RunConfig, input_schema=TaskInput, output_schema=TaskOutput)
    builder.add_node("load", as_node(load))
    builder.add_node("episode", as_node(episode))
    builder.add_node("ask", ask)
    builder.add_node("grading", build_studio_grading_graph())
    builder.add_edge(START, "load")
    builder.add_edge("load", "episode")
    builder.add_conditional_edges("episode", after_episode, ["ask", "episode", "grading"])
    builder.add_edge("ask", "episode")
    builder.add_edge("grading", END)
    return builder.compile(name="task")
