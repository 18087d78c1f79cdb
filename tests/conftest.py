"""Shared fixtures: small real tasks on disk and a run-wide artifact store. The tests' helpers live in
``tests/support/`` (``support.cli``: this checkout's ``vtb`` in a subprocess; ``support.servers``: the local
HTTP server every stand-in is built on)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageDraw

from support.cli import PROJECT, checkout_env  # noqa: F401 (also importable from here, as test modules long did)
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


EXPECTED_S = {"cluster": 40.0, "browser": 5.0, "slow": 5.0}
"""About how long a test of each mark takes (seconds; others about 0.1 s), to hand out the costly files first."""


def expected_seconds(item: pytest.Item) -> float:
    """A rough cost of ``item`` from its marks (the largest that applies)."""
    return max((s for mark, s in EXPECTED_S.items() if item.get_closest_marker(mark)), default=0.1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that take a ``browser`` fixture (a Playwright Chromium) are marked ``browser``. Then the test
    files are ordered by their expected cost, the costliest first (a file's own order kept): `make test`'s
    workers take one file at a time in this order (``--dist loadfile --no-loadscope-reorder``), so the
    last files handed out are short ones and no worker is left running a long file alone at the end."""
    for item in items:
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
    cost: dict[str, float] = {}
    for item in items:
        cost[item.nodeid.split("::")[0]] = cost.get(item.nodeid.split("::")[0], 0.0) + expected_seconds(item)
    items.sort(key=lambda item: -cost[item.nodeid.split("::")[0]])
