"""Where a turn looked: the crops of task images shown to the model, and the reference's crops.

Both sides come from the same place, the sandbox's image-region tracking (``sandbox/region_tracker.py``),
so that a model doing what the reference does gets the very same boxes:

* the model's regions are those of the images its tool calls saved and of the views its strategy
  showed it (zoom), as recorded with each image;
* the reference's regions come from *running* the reference trajectory's code steps, turn by turn
  with each turn's images placed as in an episode, in a fresh sandbox of the run's kind. Running
  rather than parsing: boxes are usually computed (``w // 2``, ``img.size``, loops over detected
  regions), crops of crops need the earlier step's result, and a parser would see boxes the
  tracker cannot (and the reverse), which would make the replay model disagree with itself.

Images made without Pillow (NumPy slicing, OpenCV) carry no tracked region: on both sides they are
located in the task's images from their pixels (``sandbox/locate.py``), and an image of the model's
that cannot be located is listed in its turn's ``not_located``.

Only proper crops count (a whole image resized is no crop).
"""

from __future__ import annotations

import hashlib
import json
import threading
from contextlib import AbstractContextManager
from pathlib import PurePosixPath
from typing import Callable, Sequence

from langchain_core.messages import AnyMessage, HumanMessage

from vtb_agents.artifacts import IMAGE_REF_TYPE, IMAGE_SUFFIXES, ArtifactStore, to_png
from vtb_agents.results import Episode, ImageRegion, ToolCallRecord
from vtb_agents.episodes.reference_store import ReferenceStore
from vtb_agents.sandbox.base import Sandbox
from vtb_agents.sandbox.locate import TaskImageLocator
from vtb_agents.sandbox.regions import read_region
from vtb_agents.strategies.observe import REGION_FIELD
from vtb_agents.tasks.model import Task
from vtb_agents.tool_names import CODE_TOOL_NAMES


def _crops(regions: list[ImageRegion]) -> list[ImageRegion]:
    """The proper crops among ``regions``, each once, in order."""
    return list(dict.fromkeys(r for r in regions if r.is_crop))


def shown_regions(window: Sequence[AnyMessage], calls: Sequence[ToolCallRecord]) -> list[ImageRegion]:
    """The crops shown to the model in a turn: its tool calls' saved images, then the image blocks of
    the turn's later user messages (a strategy's views; ``window[0]``, the turn's prompt, is skipped)."""
    regions = [image.region for call in calls for image in call.images if image.region is not None]
    for message in window[1:]:
        if isinstance(message, HumanMessage) and isinstance(message.content, list):
            regions += [ImageRegion.model_validate(block[REGION_FIELD]) for block in message.content
                        if isinstance(block, dict) and block.get("type") == IMAGE_REF_TYPE
                        and block.get(REGION_FIELD) is not None]
    return _crops(regions)


def task_locator(task: Task, upto_turn: int) -> TaskImageLocator:
    """A locator over the task's images that turns 0..``upto_turn`` have placed (the host's copies)."""
    indices = sorted({i for turn in task.turns[:upto_turn + 1] for i in turn.images})
    return TaskImageLocator([(task.image_name(i), task.images[i].read_bytes()) for i in indices])


def region_of(data: bytes, locator: TaskImageLocator) -> ImageRegion | None:
    """The region a saved image records, else the one found from its pixels (``located``), else None."""
    region = read_region(data)
    if region is not None:
        return region
    hit = locator.locate(data)
    return hit.region.model_copy(update={"located": True}) if hit is not None else None


def locate_untracked(task: Task, episode: Episode, artifacts: ArtifactStore) -> None:
    """Give each image the model's code saved without a tracked region the region found from its pixels,
    adding proper crops to its turn's ``regions``; those not located go to the turn's ``not_located``."""
    for turn in episode.turns:
        untracked = [image for call in turn.tool_calls for image in call.images if image.region is None]
        if not untracked:
            continue
        locator = task_locator(task, turn.index)
        for image in untracked:
            hit = locator.locate(artifacts.get(image.ref))
            if hit is None:
                turn.not_located.append(image.name)
                continue
            image.region = hit.region.model_copy(update={"located": True})
            turn.regions = _crops([*turn.regions, image.region])


def has_reference_code(task: Task) -> bool:
    """Whether any turn's reference trajectory runs code (else it crops nothing and needs no sandbox)."""
    return any(step.tool in CODE_TOOL_NAMES for turn in task.turns for step in turn.trajectory)


def reference_regions(task: Task, sandbox: Sandbox, timeout_s: float) -> list[list[ImageRegion]]:
    """The crops each turn's reference code makes, run in ``sandbox`` (fresh, of the run's kind).

    A step whose code fails still counts with what it saved before failing; non-code steps
    (calculator, search) are skipped. An image saved without Pillow is located from its pixels. A
    sandbox that cannot run code raises ``SandboxError``.
    """
    found: list[list[ImageRegion]] = []
    for number, turn in enumerate(task.turns):
        for index in turn.images:
            sandbox.put_file(task.image_name(index), to_png(task.images[index].read_bytes()))
        locator = task_locator(task, number)
        regions: list[ImageRegion] = []
        for step in turn.trajectory:
            if step.tool not in CODE_TOOL_NAMES:
                continue
            result = sandbox.run(str(step.args.get("code", "")), timeout=timeout_s)
            for name in result.new_files:
                if PurePosixPath(name).suffix.lower() in IMAGE_SUFFIXES:
                    region = region_of(sandbox.get_file(name), locator)
                    regions += [region] if region is not None else []
        found.append(_crops(regions))
    return found


class ReferenceRegionCache:
    """Reference crops by task content: they depend only on the task's code steps and images, so a
    run (one per process of a run: see ``RunResources``) runs each reference once, however many
    epochs or copies of a task it holds, not once per episode, and with a ``store`` on disk
    (:mod:`vtb_agents.episodes.reference_store`) once for every run of this vtb. Once also when many copies finish at
    the same moment (a run's first wave): the first caller runs it, the others wait for its result
    (if it fails, the next waiter runs it itself), instead of each starting a sandbox of its own."""

    def __init__(self, store: ReferenceStore | None = None) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._found: dict[str, list[list[ImageRegion]]] = {}
        self._running: dict[str, threading.Event] = {}

    @staticmethod
    def key(task: Task, sandbox_kind: str) -> str:
        """sha256 of the sandbox kind, each turn's images and code steps, and the image bytes (not the
        task id: two tasks with the same code on the same images crop the same regions)."""
        digest = hashlib.sha256(json.dumps([sandbox_kind, [
            [turn.images, [[s.tool, s.args] for s in turn.trajectory if s.tool in CODE_TOOL_NAMES]]
            for turn in task.turns]], sort_keys=True, default=str).encode())
        for image in task.images:
            digest.update(hashlib.sha256(image.read_bytes()).digest())
        return digest.hexdigest()

    def get(self, task: Task, sandbox_kind: str, open_sandbox: Callable[[], AbstractContextManager[Sandbox]],
            timeout_s: float) -> list[list[ImageRegion]]:
        """The task's reference crops per turn, run in a sandbox from ``open_sandbox`` the first time."""
        key = self.key(task, sandbox_kind)
        while True:
            with self._lock:
                if key in self._found:
                    return self._found[key]
                running = self._running.get(key)
                if running is None:
                    running = self._running[key] = threading.Event()
                    break
            running.wait()  # another caller runs this reference: its result, or our turn if it failed
        try:
            found = self._store.load(key) if self._store is not None else None
            if found is None:
                with open_sandbox() as sandbox:
                    found = reference_regions(task, sandbox, timeout_s)
                if self._store is not None:
                    self._store.save(key, found)
            with self._lock:
                self._found[key] = found
        finally:
            with self._lock:
                del self._running[key]
            running.set()
        return found
