"""Shared fixtures: small real tasks on disk and a run-wide artifact store. The tests' helpers live in
``tests/support/`` (``support.cli``: this checkout's ``vtb`` in a subprocess; ``support.servers``: the local
HTTP server every stand-in is built on)."""

from __future__ import annotations

import compileall
import functools
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from PIL import Image, ImageDraw

from support.cli import PROJECT, checkout_env  # noqa: F401 (also importable from here, as test modules long did)
from vtb_agents.artifacts import ArtifactStore
from vtb_agents.episodes.reference_store import CACHE_DIR_ENV


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


def pytest_configure(config: pytest.Config) -> None:
    """Compile this checkout's modules to bytecode once, before the workers start (in the controller).

    Some 200 ``vtb`` subprocesses, process-executor workers and Ray workers import the package; where
    ``PYTHONDONTWRITEBYTECODE`` is set (as on the project's machine) none of them writes a ``.pyc``, and each
    compiled all ~200 modules from source again (about 0.2 s of CPU per process). The ``.pyc`` files are
    checked against their sources' modification times as usual: an edited module is compiled afresh.
    Runs keep the reference crops they measure in ``$VTB_CACHE_DIR`` (:mod:`vtb_agents.episodes.reference_store`):
    a folder of this session's, shared by its workers."""
    if not hasattr(config, "workerinput"):
        compileall.compile_dir(PROJECT / "vtb_agents", quiet=1)
        if CACHE_DIR_ENV not in os.environ:  # the run's reference crops: one folder per session, never the user's
            folder = tempfile.mkdtemp(prefix="vtb-test-cache-")
            os.environ[CACHE_DIR_ENV] = folder  # the workers, `vtb` subprocesses and in-process runs inherit it
            config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


EXPECTED_S = {"cluster": 40.0, "browser": 5.0, "slow": 5.0}
"""About how long a test of each mark takes (seconds; others about 0.1 s), to hand out the costly tests first."""
SHARED_FIXTURE = re.compile(r"""@pytest\.fixture\([^)]*scope=["'](?:module|class|package)["']""")
"""A fixture whose one value the tests of its file share (built once per worker that runs them)."""


def expected_seconds(item: pytest.Item) -> float:
    """A rough cost of ``item`` from its marks (the largest that applies)."""
    return max((s for mark, s in EXPECTED_S.items() if item.get_closest_marker(mark)), default=0.1)


@functools.cache
def shares_setup(file: str) -> bool:
    """True when the test file ``file`` (relative to the checkout) defines a module-, class- or package-scoped
    fixture: its tests go to one worker together, so that setup is built once."""
    return bool(SHARED_FIXTURE.search((PROJECT / file).read_text(encoding="utf-8")))


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its file if the file's tests share a fixture, else the test alone."""
    file = nodeid.split("::")[0]
    return file if shares_setup(file) else nodeid


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests that take a ``browser`` fixture (a Playwright Chromium) are marked ``browser``. Then the units
    of work (:func:`unit_of`) are ordered by their expected cost, the costliest first (a file's own order
    kept within its unit): `make test`'s workers take one unit at a time in this order (see
    :func:`pytest_xdist_make_scheduler`), so a file of several slow tests is spread over both workers and
    the last units handed out are short ones: no worker is left running a long test alone at the end."""
    for item in items:
        if "browser" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.browser)
    cost: dict[str, float] = {}
    for item in items:
        cost[unit_of(item.nodeid)] = cost.get(unit_of(item.nodeid), 0.0) + expected_seconds(item)
    items.sort(key=lambda item: -cost[unit_of(item.nodeid)])


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: `-p no:xdist` runs without it
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With ``--dist loadgroup`` (`make test`), hand out the units of :func:`unit_of` in collection order.

    pytest-xdist's own loadgroup groups tests by renaming them (``item._nodeid``), which pytest 9 no longer
    reads: every test went alone, and a module fixture was built by both workers. This scheduler is
    xdist's scope scheduler with the unit as the scope; other ``--dist`` modes are xdist's own."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return UnitScheduling(config, log)
