"""Shared fixtures: small real tasks on disk and a run-wide artifact store. The tests' helpers live in
``tests/support/`` (``support.cli``: this checkout's ``vtb`` in a subprocess; ``support.servers``: the local
HTTP server every stand-in is built on)."""

from __future__ import annotations

import compileall
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


UNIT = pytest.StashKey[str]()
"""The unit of work an item belongs to (see :func:`pytest_collection_modifyitems`)."""


def pytest_configure(config: pytest.Config) -> None:
    """Compile this checkout's modules to bytecode once, before the workers start (in the controller).

    Some 200 ``vtb`` subprocesses, process-executor workers and Ray workers import the package; where
    ``PYTHONDONTWRITEBYTECODE`` is set (as on the project's machine) none of them writes a ``.pyc``, and each
    compiled all ~200 modules from source again (about 0.2 s of CPU per process). The ``.pyc`` files are
    checked against their sources' modification times as usual: an edited module is compiled afresh."""
    if not hasattr(config, "workerinput"):
        compileall.compile_dir(PROJECT / "vtb_agents", quiet=1)


EXPECTED_S = {"cluster": 40.0, "browser": 5.0, "slow": 5.0}
"""About how long a test of each mark takes (seconds; others about 0.1 s), to hand out the costly tests first."""
SHARED_SCOPES = frozenset({"module", "class", "package"})
"""The fixture scopes whose one value several tests of a file share (built once per worker that runs them)."""


def expected_seconds(item: pytest.Item) -> float:
    """A rough cost of ``item`` from its marks (the largest that applies)."""
    return max((s for mark, s in EXPECTED_S.items() if item.get_closest_marker(mark)), default=0.1)


def shares_setup(item: pytest.Item) -> bool:
    """True when ``item`` uses a module-, class- or package-scoped fixture of the tests' own (not a plugin's):
    its file's tests share that setup."""
    info = getattr(item, "_fixtureinfo", None)
    return info is not None and any(defs and defs[-1].scope in SHARED_SCOPES and defs[-1].baseid
                                    for defs in info.name2fixturedefs.values())


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's worker reads the xdist_group marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that take a ``browser`` fixture (a Playwright Chromium) are marked ``browser``. Then the work
    is ordered for `make test`'s workers (``--dist loadgroup --no-loadscope-reorder``), which take one unit
    at a time in this order: a unit is one test, or the tests of a file that share a module- or
    class-scoped fixture (marked ``xdist_group`` by file, so that setup is built once). The costliest units
    go first (a file's own order kept within its unit), so a file of several slow tests is spread over both
    workers and the last units handed out are short ones: no worker is left running a long test alone at
    the end while the other idles."""
    for item in items:
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
    cost: dict[str, float] = {}
    for item in items:
        unit = item.nodeid.split("::")[0] if shares_setup(item) else item.nodeid
        if unit != item.nodeid:
            item.add_marker(pytest.mark.xdist_group(unit))
        cost[unit] = cost.get(unit, 0.0) + expected_seconds(item)
        item.stash[UNIT] = unit
    items.sort(key=lambda item: -cost[item.stash[UNIT]])
