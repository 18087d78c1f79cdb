"""Multi-turn episodes: images arrive with their turn, history is golden or the model's own."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import write_task
from langchain_core.messages import AIMessage, HumanMessage

from vtb_agents.config import EpisodeSettings
from vtb_agents.episodes.driver import run_episode
from vtb_agents.models import ReplayChatModel
from vtb_agents.models.scripted import ScriptedChatModel
from vtb_agents.sandbox import open_sandbox
from vtb_agents.tasks.local import load_task_dir
from vtb_agents.tools import select_tools

LIST_FILES = "import os\nprint(sorted(f for f in os.listdir('.') if f.startswith('image_')))"


def two_turn_task(root: Path):
    folder = write_task(root, "t-two", category="Temporal Visual Reasoning")
    data = json.loads((folder / "task.json").read_text())
    (folder / "image_1.png").write_bytes((folder / "image_0.png").read_bytes())
    data["images"].append({"file": "image_1.png"})
    first = data["turns"][0]
    first["trajectory"] = [{"tool": "python_image_processing", "args": {"code": LIST_FILES}}]
    second = {**first, "prompt": "And now?", "images": [1], "golden_answer": "Still 42."}
    data["turns"] = [first, second]
    (folder / "task.json").write_text(json.dumps(data))
    return load_task_dir(folder)


def test_later_turn_images_enter_the_sandbox_when_their_turn_starts(tmp_path, artifacts):
    task = two_turn_task(tmp_path)
    with open_sandbox("local") as sandbox:
        episode = run_episode(task, ReplayChatModel(task=task), select_tools(), sandbox=sandbox,
                              artifacts=artifacts, model_name="replay")
    outputs = [json.loads(c.output)["stdout"] for c in episode.tool_calls]
    assert outputs == ["['image_0.png']\n", "['image_0.png', 'image_1.png']\n"]
    assert [t.answer for t in episode.turns] == ["The number is 42.", "Still 42."]
    assert [t.status for t in episode.turns] == ["answered", "answered"]


def _second_turn_history(task, artifacts, history: str) -> list:
    model = ScriptedChatModel(replies=[AIMessage("my own first answer"), AIMessage("second answer")])
    with open_sandbox("local") as sandbox:
        run_episode(task, model, [], sandbox=sandbox, artifacts=artifacts, model_name="scripted",
                    settings=EpisodeSettings(history=history))
    return model.calls[1]


def test_history_golden_replaces_earlier_answers(tmp_path, artifacts):
    task = two_turn_task(tmp_path)
    sent = _second_turn_history(task, artifacts, "golden")
    assistant = [m.content for m in sent if isinstance(m, AIMessage)]
    assert assistant == ["The number is 42."]
    # Earlier turns' images stay in the history and are sent again.
    images = [b for m in sent if isinstance(m, HumanMessage) and isinstance(m.content, list)
              for b in m.content if isinstance(b, dict) and b.get("type") == "image"]
    assert len(images) == 2


def test_history_model_keeps_the_models_answers(tmp_path, artifacts):
    task = two_turn_task(tmp_path)
    sent = _second_turn_history(task, artifacts, "model")
    assert [m.content for m in sent if isinstance(m, AIMessage)] == ["my own first answer"]
