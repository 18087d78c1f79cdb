"""The held-out-style workload of the rate-limit bench, as a plan every contender follows.

Five tasks of the bundled sample suite, one per category, three of them with a rubric that only the
LLM judge grades (the other rubrics are rule-checked), x 12 epochs = 60 episodes, as the issue's
measurement (#33: "the held-out tasks x 12 epochs", 60 episodes). Per epoch: 11 agent calls (one
per turn; the scripted agent answers at once) and 3 judge calls, 168 requests in all.

``plan.json`` tells the other contenders (``bench/rate_limit_loop.py``, ``bench/inspect_rate_limits.py``,
each in its own interpreter) what ``vtb run`` does with the same tasks: per task its turns' prompts
and image files and how many judge calls grade it. Standard library only: the inspect_ai
environment imports it too.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

HELD_OUT = ("fu-medical-labs", "ht-engineering-circuit", "pr-finance-ledger", "rs-generalist-street",
            "te-physics-gauge")
EPOCHS = 12
SUITE = Path(__file__).resolve().parents[1] / "vtb_agents" / "tasks" / "sample"


def build_plan(task_ids: tuple[str, ...] = HELD_OUT, epochs: int = EPOCHS) -> dict[str, Any]:
    """Each task's turns (prompt, image files) and judge calls, and the epochs to run them."""
    tasks = []
    for task_id in task_ids:
        task = json.loads((SUITE / task_id / "task.json").read_text())
        turns = [{"prompt": turn["prompt"], "images": [str(SUITE / task_id / f"image_{index}.png")
                                                       for index in turn.get("images", [])]}
                 for turn in task["turns"]]
        judged = [rubric["description"] for turn in task["turns"] for rubric in turn["rubrics"].values()
                  if not rubric.get("check")]
        tasks.append({"id": task_id, "turns": turns, "judged": judged})
    return {"epochs": epochs, "tasks": tasks}


def image_url(path: str) -> str:
    """A PNG file as the data URL a chat-completions request carries."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode()


def requests_per_epoch(plan: dict[str, Any]) -> int:
    """Agent calls (one per turn) and judge calls (one per judged rubric) of one epoch of the plan."""
    return sum(len(task["turns"]) + len(task["judged"]) for task in plan["tasks"])
