"""The episode driver: feed a task's turns, in order and with their images, through its category graph.

The one driver for every strategy, a user's own agent included: the strategy answers each turn
inside the category graph; the driver does the rest, the same way for all of them.
One thread per episode, that is per task and epoch (checkpointed when a checkpointer is given, e.g.
SQLite in a run directory).
The sandbox receives each turn's images when the turn starts. With ``history="golden"`` (the
reference harness's default) the assistant's earlier answers are replaced by the golden answers
before the next turn; with ``history="model"`` the model's own answers stay. When a follow-up
graph interrupts with a clarifying question, the resumer's reply opens the next turn.
"""

from __future__ import annotations

from typing import Any, Sequence, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, RemoveMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphInterrupt
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Durability

from vtb_agents.artifacts import ArtifactStore, image_ref_block, to_png
from vtb_agents.config import EpisodeSettings
from vtb_agents.episodes.recorder import TranscriptRecorder
from vtb_agents.graphs.categories import build_category_graph
from vtb_agents.graphs.partial import keeping_partial
from vtb_agents.graphs.prompts import system_prompt
from vtb_agents.episodes.regions import shown_regions
from vtb_agents.graphs.resumers import Resumer, ScriptedResumer
from vtb_agents.models.deadline import task_time_limit
from vtb_agents.models.replay import turn_message_id
from vtb_agents.models.usage import TURN_METADATA_KEY
from vtb_agents.results import Episode, EpisodeRecordSettings, ToolCallRecord, TurnRecord, TurnStatus
from vtb_agents.sandbox.base import Sandbox, sandbox_settings
from vtb_agents.strategies.base import EpisodeContext, Strategy
from vtb_agents.strategies.loop import recursion_limit
from vtb_agents.strategies.react import react
from vtb_agents.tasks.model import Task
from vtb_agents.tools import bind_episode_tools

CHECKPOINT_DURABILITY: Durability = "exit"
"""LangGraph durability of episode threads: the state is saved when each ``invoke`` ends (BENCHMARKS.md)."""


def turn_message(task: Task, turn: int, sandbox: Sandbox, artifacts: ArtifactStore,
                 text: str | None = None) -> HumanMessage:
    """The user message opening ``turn``: its prompt (or ``text``) and its images, which also go
    to the sandbox."""
    blocks: list[Any] = [{"type": "text", "text": task.turns[turn].prompt if text is None else text}]
    for index in task.turns[turn].images:
        blocks += place_image(task.image_name(index), task.images[index].read_bytes(), sandbox, artifacts)
    return HumanMessage(content=blocks, id=turn_message_id(turn))


def place_image(name: str, data: bytes, sandbox: Sandbox, artifacts: ArtifactStore) -> list[dict[str, Any]]:
    """Put one image (as PNG) into the sandbox as ``name`` and return the blocks that show it in a
    user message: a ``[name]`` label and the image's artifact reference."""
    png = to_png(data)
    sandbox.put_file(name, png)
    return [{"type": "text", "text": f"[{name}]"}, image_ref_block(artifacts.put(png), name)]


def episode_context(model: BaseChatModel | None, tools: Sequence[BaseTool], sandbox: Sandbox,
                    artifacts: ArtifactStore, settings: EpisodeSettings) -> EpisodeContext:
    """The runtime context of one episode: ``tools`` with their code tools bound to ``sandbox``,
    the system prompt of the settings' prompt level (naming no tools when there are none) and their limits."""
    return EpisodeContext(
        model=model, sandbox=sandbox, artifacts=artifacts,
        system_prompt=system_prompt(settings.prompt_level, tools=bool(tools)),
        tools=bind_episode_tools(tools, sandbox, artifacts, settings.code_timeout_s),
        max_tool_rounds=settings.max_tool_rounds, max_image_side=settings.max_image_side,
        code_timeout_s=settings.code_timeout_s, native_tool_images=settings.native_tool_images,
        prompt_cache=settings.prompt_cache,
    )


def turn_record(messages: Sequence[AnyMessage], turn: int, status: TurnStatus) -> TurnRecord:
    """Summarise one turn's messages (from its opening message to the next turn's) into a record,
    with the crops of task images shown to the model (``episodes/regions.py``)."""
    start = next(i for i, m in enumerate(messages) if m.id == turn_message_id(turn))
    end = next((i for i, m in enumerate(messages) if m.id == turn_message_id(turn + 1)), len(messages))
    window = messages[start:end]
    results = {m.tool_call_id: m for m in window if isinstance(m, ToolMessage)}
    calls, rounds, answer = [], 0, ""
    for message in window:
        if not isinstance(message, AIMessage):
            continue
        answer = message.text
        for call in message.tool_calls:
            call_id = call["id"] or ""  # providers give every call an id; LangChain's type allows none
            result = results.get(call_id)
            artifact = result.artifact if result is not None and isinstance(result.artifact, dict) else {}
            ok = result is not None and result.status != "error" and artifact.get("ok", True) is not False
            calls.append(ToolCallRecord(
                turn=turn, round=rounds, id=call_id, name=call["name"], args=call["args"],
                ok=ok, output=result.text if result else "",
                images=artifact.get("images", []), duration_s=artifact.get("duration_s"),
            ))
        rounds += bool(message.tool_calls)
    return TurnRecord(index=turn, answer=answer, status=status, tool_rounds=rounds, tool_calls=calls,
                      regions=shown_regions(window, calls))


def golden_rewrite(last: AnyMessage, golden_answer: str) -> list[AnyMessage]:
    """The message that makes ``golden_answer`` the assistant's answer to the turn just ended.

    It replaces the final answer in place (same id); after a round cap there is none, so it is added.
    """
    replace_id = last.id if isinstance(last, AIMessage) and not last.tool_calls else None
    return [AIMessage(id=replace_id, content=golden_answer)]


def opening_messages(task: Task, turn: int, previous: AnyMessage | None, history: str | None, sandbox: Sandbox,
                     artifacts: ArtifactStore, reply: str | None = None) -> list[AnyMessage]:
    """The messages that open ``turn``: under golden history the previous turn's answer (``previous``,
    the conversation's last message) rewritten to its golden answer, then the turn's user message
    (its prompt, or ``reply`` to a question) with its images, which also go to the sandbox."""
    rewrite: list[AnyMessage] = []
    if turn > 0 and history == "golden" and previous is not None:
        rewrite = golden_rewrite(previous, task.turns[turn - 1].golden_answer)
    return [*rewrite, turn_message(task, turn, sandbox, artifacts, reply)]


def record_settings(strategy: str, settings: EpisodeSettings, *, tools: Sequence[str], resumer: str,
                    sandbox: Sandbox, graph: str) -> EpisodeRecordSettings:
    """How an episode ran, in the one shape its record states it (``vtb run`` and Studio's task graph)."""
    return EpisodeRecordSettings.model_validate({**settings.model_dump(), "strategy": strategy, "tools": list(tools),
                                                 "resumer": resumer, "graph": graph, **sandbox_settings(sandbox)})


def episode_thread_id(task_id: str, epoch: int = 1) -> str:
    """The checkpoint thread of one episode: the task's id for epoch 1 (as a run without epochs has
    it), ``<id>#epoch<k>`` for later epochs, so that a task's epochs never share a thread."""
    return task_id if epoch == 1 else f"{task_id}#epoch{epoch}"


def episode_config(task: Task, model_name: str, strategy: str, settings: EpisodeSettings,
                   thread_id: str | None = None, epoch: int = 1) -> dict[str, Any]:
    """The LangGraph config of one episode: its thread (default: :func:`episode_thread_id` of the
    task and ``epoch``), limits, run name, tags and metadata (the epoch too, from 2 on)."""
    return {
        "configurable": {"thread_id": thread_id or episode_thread_id(task.id, epoch)},
        "recursion_limit": recursion_limit(settings.max_tool_rounds),
        "run_name": f"vtb:{task.id}" + ("" if epoch == 1 else f"#epoch{epoch}"),
        "tags": [task.category, task.domain, model_name, f"strategy:{strategy}", f"prompt:{settings.prompt_level}",
                 f"history:{settings.history}", *settings.tags],
        "metadata": {"task_id": task.id, "category": task.category, "domain": task.domain, "model": model_name,
                     "strategy": strategy, **({"epoch": epoch} if epoch != 1 else {})},
    }


def run_episode(task: Task, model: BaseChatModel | None, tools: Sequence[BaseTool], *, sandbox: Sandbox,
                artifacts: ArtifactStore, model_name: str, settings: EpisodeSettings = EpisodeSettings(),
                checkpointer: Any = None, resumer: Resumer | None = None, strategy: Strategy = react,
                graph: CompiledStateGraph[Any, EpisodeContext, Any, Any] | None = None, epoch: int = 1,
                recorder: TranscriptRecorder | None = None) -> Episode:
    """Run every turn of ``task`` with ``strategy`` inside its category graph and return the episode.

    ``tools`` are the run's tools; their code tools are bound here to ``sandbox``. ``model`` is
    None for strategies that bring their own (a user's agent). ``graph`` is the category graph
    already compiled for ``strategy`` and ``checkpointer`` (a run compiles each category once); by
    default it is compiled here. ``epoch`` (``vtb run --epochs``) picks the episode's own checkpoint
    thread (:func:`episode_thread_id`). ``recorder`` records the task's transcript (every model call,
    tool call and strategy step, whatever the agent; the runner passes one and writes it), one of
    the graph's callbacks; the episode's ``strategy_image_ops`` are counted from it, and its tool
    events are given the episode's own tool call records (:meth:`TranscriptRecorder.adopt`). Errors raised
    by the model or graph propagate: the runner records them per task.
    """
    recorder = recorder or TranscriptRecorder(artifacts)
    resumer = resumer or ScriptedResumer()
    graph = graph or build_category_graph(task.category, strategy, checkpointer=checkpointer or InMemorySaver())
    context = episode_context(model, tools, sandbox, artifacts, settings)
    config = episode_config(task, model_name, strategy.name, settings, epoch=epoch)
    episode = Episode(task_id=task.id, model=model_name, settings=record_settings(
        strategy.name, settings, tools=[t.name for t in tools], resumer=resumer.name, sandbox=sandbox,
        graph=graph.name))
    with keeping_partial(episode), task_time_limit(settings.task_timeout_s, sandbox, config) as limited:
        # one of the callbacks of every run of the episode; a call the time limit cuts off may stay
        # open in it (LangChain does not promise the handlers' order), and the transcript says so
        recorded = {**limited, "callbacks": [*limited.get("callbacks", []), recorder]}
        try:
            drive_turns(task, graph, recorded, context, episode, resumer)
        finally:  # a partial episode (a timeout) keeps the count of what its strategy made too
            episode.strategy_image_ops = recorder.strategy_image_ops()
            recorder.adopt(episode.tool_calls)  # one record per call: the transcript's events carry the result's
        return episode


def drive_turns(task: Task, graph: CompiledStateGraph[Any, EpisodeContext, Any, Any], config: dict[str, Any],
                context: EpisodeContext, episode: Episode, resumer: Resumer) -> None:
    """Feed the turns through ``graph`` until the last one is answered, filling ``episode``: the one
    turn loop of the package; Studio's task graph steps through the same :func:`turn_input` and
    :func:`drive_turn`, one turn per step. A clarifying question is answered by ``resumer``.
    """
    messages: list[AnyMessage] = []
    question: str | None = None
    while len(episode.turns) < len(task.turns):
        turn = len(episode.turns)
        reply = None if question is None else resumer.reply(task, turn, question)
        history = episode.settings.history if episode.settings is not None else None
        step = turn_input(task, turn, messages, history, context, reply, asked=question is not None)
        messages, question = drive_turn(graph, config, context, episode, step)


def turn_input(task: Task, turn: int, messages: Sequence[AnyMessage], history: str | None, context: EpisodeContext,
               reply: str | None = None, *, asked: bool = False) -> Any:
    """What opens ``turn`` on the episode's thread, given the conversation so far (``messages``): its
    user message (or ``reply``) with its images, which also go to the sandbox; after a clarifying
    question (``asked``) it resumes the graph that asked. Turn 0 clears a thread's earlier conversation."""
    opening = opening_messages(task, turn, messages[-1] if messages else None, history, context.sandbox,
                               context.artifacts, reply)
    if asked:
        return Command(resume={"messages": opening})
    clear: list[BaseMessage] = [RemoveMessage(id=REMOVE_ALL_MESSAGES)] if turn == 0 else []
    return {"messages": [*clear, *opening], "turn": turn, "num_turns": len(task.turns), "tool_rounds": 0,
            "status": "running"}


def drive_turn(graph: CompiledStateGraph[Any, EpisodeContext, Any, Any], config: dict[str, Any],
               context: EpisodeContext, episode: Episode, step: Any) -> tuple[list[AnyMessage], str | None]:
    """Run one turn (``step``, from :func:`turn_input`) through ``graph`` and add its record to
    ``episode``; return the conversation and the clarifying question the model asked (None: answered).

    Run inside a node with the node's config (Studio's task graph), ``graph`` is a subgraph of that
    run: it streams and checkpoints there, and raises its question as LangGraph's interrupt.
    """
    turn = len(episode.turns)
    # the turn in the run's metadata: token usage is summed per turn from it (models/usage.py)
    turn_config = cast(RunnableConfig, {**config, "metadata": {**config.get("metadata", {}), TURN_METADATA_KEY: turn}})
    try:
        # checkpoint when the turn's graph run ends (answer or clarifying question), not after every
        # step: nothing reads intermediate steps (a task re-run after a crash starts afresh, and
        # results.jsonl is what is durable), and a write per step costs ~40% of the graph's CPU per round
        state = graph.invoke(step, turn_config, context=context, durability=CHECKPOINT_DURABILITY)
        interrupts = state.get("__interrupt__")
    except GraphInterrupt as raised:  # a subgraph raises its interrupt for the run it is part of
        state, interrupts = graph.get_state(turn_config).values, raised.args[0]
    messages: list[AnyMessage] = state["messages"]
    if interrupts:  # the model asked a clarifying question
        episode.turns.append(turn_record(messages, turn, "asked_user"))
        return messages, interrupts[0].value["question"]
    status: TurnStatus = "tool_round_cap" if state.get("status") == "tool_round_cap" else "answered"
    episode.turns.append(turn_record(messages, turn, status))
    return messages, None
