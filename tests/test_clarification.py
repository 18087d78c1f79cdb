"""Follow-up tasks: a clarifying question interrupts the graph; three resumers answer it."""

from __future__ import annotations

import json

import pytest
from conftest import write_task
from langchain_core.messages import AIMessage, HumanMessage

from vtb_agents.episodes.driver import run_episode
from vtb_agents.graphs.resumers import HumanResumer, SimulatedResumer, load_resumer
from vtb_agents.models.scripted import ScriptedChatModel
from vtb_agents.sandbox import open_sandbox
from vtb_agents.tasks.local import load_task_dir
from vtb_agents.tools import select_tools

QUESTION = "There are two prices on the shelf. Which item do you mean, the apples or the pears?"


@pytest.fixture
def follow_up_task(tmp_path):
    folder = write_task(tmp_path, "fu", category="Follow-up Test")
    data = json.loads((folder / "task.json").read_text())
    first = {**data["turns"][0], "prompt": "How much is it?", "golden_answer": QUESTION, "trajectory": []}
    second = {**data["turns"][0], "prompt": "I mean the pears.", "images": [], "golden_answer": "The pears cost 42."}
    data["turns"] = [first, second]
    (folder / "task.json").write_text(json.dumps(data))
    return load_task_dir(folder)


def run(task, model, artifacts, resumer=None, history="golden"):
    from vtb_agents.config import EpisodeSettings

    with open_sandbox("local") as sandbox:
        return run_episode(task, model, select_tools(), sandbox=sandbox, artifacts=artifacts, model_name="m",
                           resumer=resumer, settings=EpisodeSettings(history=history))


def last_human_text(messages) -> str:
    human = [m for m in messages if isinstance(m, HumanMessage)][-1]
    return human.content[0]["text"] if isinstance(human.content, list) else human.content


def test_question_interrupts_and_the_scripted_next_turn_resumes(follow_up_task, artifacts):
    model = ScriptedChatModel(replies=[AIMessage(QUESTION), AIMessage("The pears cost 42.")])
    episode = run(follow_up_task, model, artifacts)
    assert [t.status for t in episode.turns] == ["asked_user", "answered"]
    assert [t.answer for t in episode.turns] == [QUESTION, "The pears cost 42."]
    second_call = model.calls[1]
    assert isinstance(second_call[-2], AIMessage) and second_call[-2].content == QUESTION
    assert last_human_text(second_call) == "I mean the pears."
    assert episode.settings.graph == "follow_up" and episode.settings.resumer == "scripted"


def test_golden_history_rewrites_the_question_before_resuming(follow_up_task, artifacts):
    model = ScriptedChatModel(replies=[AIMessage("Apples or pears?"), AIMessage("42")])
    run(follow_up_task, model, artifacts, history="golden")
    assert [m.content for m in model.calls[1] if isinstance(m, AIMessage)] == [QUESTION]
    model = ScriptedChatModel(replies=[AIMessage("Apples or pears?"), AIMessage("42")])
    run(follow_up_task, model, artifacts, history="model")
    assert [m.content for m in model.calls[1] if isinstance(m, AIMessage)] == ["Apples or pears?"]


def test_simulated_user_answers_the_question_in_character(follow_up_task, artifacts):
    user = ScriptedChatModel(replies=[AIMessage("The pears, please.")])
    model = ScriptedChatModel(replies=[AIMessage(QUESTION), AIMessage("The pears cost 42.")])
    episode = run(follow_up_task, model, artifacts, resumer=SimulatedResumer(user))
    assert last_human_text(model.calls[1]) == "The pears, please."
    (user_call,) = user.calls
    assert "What you meant (your clarification, as you would say it): I mean the pears." in user_call[0].content
    assert user_call[1].content == QUESTION
    assert episode.settings.resumer == "simulated"


def test_human_resumer_reads_the_terminal(follow_up_task, artifacts):
    asked = []
    resumer = HumanResumer(ask=lambda prompt: asked.append(prompt) or "  pears  ")
    model = ScriptedChatModel(replies=[AIMessage(QUESTION), AIMessage("42")])
    run(follow_up_task, model, artifacts, resumer=resumer)
    assert QUESTION in asked[0] and "[fu]" in asked[0]
    assert last_human_text(model.calls[1]) == "pears"


def test_a_direct_answer_moves_on_to_the_next_turn_without_interrupting(follow_up_task, artifacts):
    model = ScriptedChatModel(replies=[AIMessage("Apples cost 3."), AIMessage("Pears cost 42.")])
    episode = run(follow_up_task, model, artifacts)
    assert [t.status for t in episode.turns] == ["answered", "answered"]


def test_a_question_in_the_last_turn_is_just_the_answer(follow_up_task, artifacts):
    model = ScriptedChatModel(replies=[AIMessage(QUESTION), AIMessage("Do you mean per kilo?")])
    episode = run(follow_up_task, model, artifacts)
    assert [t.status for t in episode.turns] == ["asked_user", "answered"]
    assert len(model.calls) == 2


def test_load_resumer_errors():
    with pytest.raises(ValueError, match="needs a user model"):
        load_resumer("simulated")
    with pytest.raises(ValueError, match="unknown resumer 'robot'"):
        load_resumer("robot")


def test_the_driver_steps_one_turn_at_a_time_and_a_reply_continues_after_the_question(follow_up_task, artifacts):
    """The turn steps Studio's task graph runs: a turn returns the question, the reply opens the next turn."""
    from langgraph.checkpoint.memory import InMemorySaver

    from vtb_agents.config import EpisodeSettings
    from vtb_agents.episodes.driver import drive_turn, episode_config, episode_context, record_settings, turn_input
    from vtb_agents.graphs.categories import build_category_graph
    from vtb_agents.results import Episode
    from vtb_agents.strategies.react import react

    model = ScriptedChatModel(replies=[AIMessage(QUESTION), AIMessage("The pears cost 42.")])
    settings = EpisodeSettings()
    graph = build_category_graph(follow_up_task.category, react, checkpointer=InMemorySaver())
    config = episode_config(follow_up_task, "m", react.name, settings)
    with open_sandbox("local") as sandbox:
        context = episode_context(model, select_tools(), sandbox, artifacts, settings)
        episode = Episode(task_id=follow_up_task.id, model="m", settings=record_settings(
            react.name, settings, tools=[], resumer="human", sandbox=sandbox, graph=graph.name))
        first = turn_input(follow_up_task, 0, [], settings.history, context)
        messages, question = drive_turn(graph, config, context, episode, first)
        assert question == QUESTION
        assert [t.status for t in episode.turns] == ["asked_user"] and len(model.calls) == 1
        reply = turn_input(follow_up_task, 1, messages, settings.history, context, "The pears, please.", asked=True)
        assert drive_turn(graph, config, context, episode, reply)[1] is None
    assert [(t.status, t.answer) for t in episode.turns] == [("asked_user", QUESTION),
                                                             ("answered", "The pears cost 42.")]
    assert last_human_text(model.calls[1]) == "The pears, please."
    assert [m.content for m in model.calls[1] if isinstance(m, AIMessage)] == [QUESTION]  # golden history
