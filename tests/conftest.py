"""Shared fixtures: small real tasks on disk and a run-wide artifact store. The tests' helpers live in
``tests/support/`` (``support.cli``: this checkout's ``vtb`` in a subprocess; ``support.servers``: the local
HTTP server every stand-in is built on)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageDraw

from vtb_agents.artifacts import ArtifactStore


def write_task(root: Path, task_id: str, **overrides: Any) -> Path:
    """Write a small valid single-turn task folder (an image with '42' in a corner) and return it."""
    folder = root / task_id
    folder.mkdir(parents=True, exist_ok=True)
    image = Image.new("RGB", (400, 300), "white")
    ImageDraw.Draw(image).text((360, 280), "42", fill="black")
    image.save(folder / "image_0.png")
    task: dict[str, Any] = {
        "id": task_id, "category": "Region Switch Q&A", "domain": "finance",
        "images": [{"file": "image_0.png"}],
        "turns": [{
            "prompt": "What number is printed in the bottom-right corner?", "images": [0],
            "golden_answer": "The number is 42.",
            "trajectory": [{"tool": "python_image_processing", "args": {"code": (
                "from PIL import Image\nim = Image.open('image_0.png')\n"
                "im.crop((340, 260, 400, 300)).resize((240, 160)).save('transformed_image_0.png')\nprint('ok')")}}],
            "rubrics": {
                "r1": {"description": "Says 42", "weight": 5, "critical": "yes", "objective/subjective": "objective",
                       "explicit/implicit": "explicit", "category": ["visual understanding"], "final_answer": "yes",
                       "check": {"type": "number", "value": 42}},
                "r2": {"description": "Is concise", "weight": 1, "critical": "no",
                       "category": ["writing style / presentation"]},
            },
        }],
    }
    task.update(overrides)
    (folder / "task.json").write_text(json.dumps(task), encoding="utf-8")
    return folder


@pytest.fixture
def task_root(tmp_path: Path) -> Path:
    """A folder holding one valid task folder, ``t-corner``."""
    root = tmp_path / "tasks"
    write_task(root, "t-corner")
    return root


@pytest.fixture
def artifacts(tmp_path: Path) -> ArtifactStore:
    return ArtifactStore(tmp_path / "artifacts")


@pytest.fixture
def retry_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits tenacity (LangChain's ``with_retry``) asks for, recorded instead of slept."""
    import tenacity.nap

    waits: list[float] = []
    monkeypatch.setattr(tenacity.nap.time, "sleep", waits.append)
    return waits


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that take a ``browser`` fixture (a Playwright Chromium) are marked ``browser``."""
    for item in items:
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
