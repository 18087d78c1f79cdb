"""The task graph for Studio: one whole task through the episode driver of ``vtb run``, then its grade.

```
START -> load -> episode (the driver's turn loop) --question--> ask (interrupt) -> episode
                                                  \\--every turn answered--> grading -> END
```
Input ``{"task_id": "..."}`` (a task of the context's ``tasks`` suite, default the bundled sample)
or ``{"task": <task.json object>}`` with its images inline as base64 (``images[i].data``). The
``episode`` node runs :func:`~vtb_agents.episodes.driver.drive_turns`, the one turn loop of the
package, on the thread's sandbox; the category graph keeps the conversation on a thread of the
Studio process. It runs with the node's callbacks, so its model and tool messages stream in the
run's ``messages`` mode and its trace nests under the ``episode`` step; being a run of its own (not
a subgraph of the task graph's run), its node updates are not in the run's ``updates`` stream.
When a follow-up task's answer asks the user something, the driver stops there and the thread
pauses in ``ask`` with ``{"question", "turn", "next_prompt"}``: resume with an empty string to let
the context's resumer reply (``scripted``: the task's next prompt; LangGraph does not deliver a
null resume), or with your own reply, and the driver continues from the next turn. The
grading graph then gives per-rubric verdicts and the score.
"""

from __future__ import annotations

from typing import Annotated, Any, cast

from langchain_core.messages import AnyMessage, RemoveMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt
from typing_extensions import TypedDict

from vtb_agents.api import load_tasks
from vtb_agents.episodes.driver import drive_turns, episode_config, record_settings
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

EPISODE_THREADS = InMemorySaver()
"""Where the category graphs of this Studio process keep each task thread's conversation between the
``episode`` node's runs (a question pauses the driver; the reply continues it on the same thread)."""
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
    EPISODE_THREADS.delete_thread(episode_thread(config))
    return {"task": task.model_dump(mode="json"), "task_id": task.id,
            "images": [artifacts.put(image.read_bytes()) for image in task.images],
            "messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES)], "turns": [], "question": None, "reply": None}


def episode_thread(config: RunnableConfig) -> str:
    """The category graph's thread of a Studio thread's task."""
    return f"studio:{thread_id(config)}"


def episode_graph(resources: RunResources, category: str) -> CompiledStateGraph[Any, EpisodeContext, Any, Any]:
    """The category graph around the context's strategy, checkpointed in :data:`EPISODE_THREADS`."""
    key = (resources.strategy.name, category)
    if key not in _GRAPHS:
        _GRAPHS[key] = build_category_graph(category, resources.strategy, checkpointer=EPISODE_THREADS)
    return _GRAPHS[key]


def episode(state: TaskState, config: RunnableConfig, runtime: Runtime[RunConfig]) -> dict[str, Any]:
    """Run the task's turns through the episode driver until the last is answered or one asks the
    user; after a question, continue with the reply from the turn after it."""
    ctx = context_of(runtime.context)
    resources = resources_for(ctx, chat=False)
    task = stored_task(state, config)
    graph = episode_graph(resources, task.category)
    inner = episode_config(task, ctx.model, ctx.strategy_spec, ctx.episode, thread_id=episode_thread(config))
    # the node's callbacks (the run's tracer and stream handlers): the episode is traced inside this step
    # and its model tokens and messages reach the run's `messages` stream
    inner["callbacks"] = config.get("callbacks")
    reply = state.get("reply")
    if state.get("turns") and reply is None:
        raise RuntimeError(f"task {task.id!r}: the episode paused on a question and has no reply to continue with")
    if state.get("turns") and not graph.get_state(cast(RunnableConfig, inner)).values:
        raise RuntimeError(f"task {task.id!r}: this Studio server no longer holds the thread's conversation (it "
                           "restarted since the question): run the task again on the thread")
    with SESSIONS.use(thread_id(config), ctx.sandbox, thread_images(state["messages"])) as session:
        record = Episode(task_id=task.id, model=ctx.model,
                         turns=[TurnRecord.model_validate(t) for t in state.get("turns", [])],
                         settings=record_settings(ctx.strategy_spec, ctx.episode,
                                                  tools=[t.name for t in resources.tools],
                                                  resumer=resources.resumer.name if resources.resumer else ctx.resumer,
                                                  sandbox=session.sandbox, graph="task"))
        question = drive_turns(task, graph, inner, live_context(ctx, resources, session, task), record, None, reply)
    messages = graph.get_state(cast(RunnableConfig, inner)).values["messages"]
    update: dict[str, Any] = {"messages": messages, "turns": [t.model_dump(mode="json") for t in record.turns],
                              "question": question, "reply": None}
    if question is None:  # the conversation is in the task graph's state now: the process keeps no copy
        EPISODE_THREADS.delete_thread(episode_thread(config))
        update |= {"episode": record.model_dump(mode="json"), "answers": [t.answer for t in record.turns]}
    return update


def after_episode(state: TaskState) -> str:
    """Ask the user, or grade the finished episode."""
    return "ask" if state.get("question") else "grading"


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
    builder.add_conditional_edges("episode", after_episode, ["ask", "grading"])
    builder.add_edge("ask", "episode")
    builder.add_edge("grading", END)
    return builder.compile(name="task")
