"""Property-based tests of the task loaders: random mutations of a valid task folder and of a valid
dataset row either load into a task or fail with the project's task error (never another
exception), validation and import never raise, and nothing outside the temporary folder is opened
or written (checked with a real audit hook on every ``open``)."""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import write_task
from vtb_agents.tasks.convert import import_tasks
from vtb_agents.tasks.errors import TaskLoadError
from vtb_agents.tasks.model import Task
from vtb_agents.tasks.parquet import iter_parquet, rows_to_tasks, task_to_row
from vtb_agents.tasks.sources import iter_source, load_tasks
from vtb_agents.tasks.validate import validate_tasks

OPENED: list[str] | None = None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "open" and OPENED is not None and isinstance(args[0], (str, bytes, os.PathLike)):
        OPENED.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
JSON = st.recursive(st.none() | st.booleans() | st.integers(-10, 10) | st.floats(allow_nan=True)
                    | st.text(max_size=12),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                    max_leaves=8)
NAMES = st.sampled_from(["image_0.png", "../../outside/secret.png", "/etc/passwd", "sub/../../outside/secret.png",
                         "", ".", "link.png", "dirlink/secret.png", "fifo.png", "dir.png", "missing.png",
                         "image_0.png/x", "x\x00y", "a" * 300, "nested/ok.png"]) | st.text(max_size=20)
CHECKS = st.fixed_dictionaries({"type": st.sampled_from(["regex", "number", "contains_any", "bogus"])}, optional={
    "pattern": st.text(max_size=8), "value": st.floats(allow_nan=True), "tolerance": st.floats(allow_nan=True),
    "values": st.lists(st.text(max_size=4), max_size=2), "case_sensitive": JSON})
MUTATION = st.one_of(
    st.tuples(st.just("top"), st.sampled_from(["id", "images", "turns", "metadata", "category", "domain"]), JSON),
    st.tuples(st.just("file"), st.just(0), NAMES),
    st.tuples(st.just("turn"), st.sampled_from(["prompt", "images", "golden_answer", "trajectory", "rubrics"]), JSON),
    st.tuples(st.just("rubric"), st.sampled_from(["weight", "critical", "description", "final_answer"]), JSON),
    st.tuples(st.just("check"), st.just(0), CHECKS),
    st.tuples(st.just("delete"), st.sampled_from(["id", "images", "turns"]), st.none()),
    st.tuples(st.just("text"), st.just(0), st.sampled_from(["[" * 5000, "{", "", "null", "\ufeff{}", "[1]"])),
    st.tuples(st.just("image"), st.sampled_from(["fifo", "dir", "link", "garbage", "missing", "huge"]), st.none()),
)


def mutate(folder: Path, mutation: tuple[str, Any, Any]) -> None:
    """Apply one mutation to the task folder (its task.json or its image file)."""
    kind, key, value = mutation
    task_file, image = folder / "task.json", folder / "image_0.png"
    if kind == "text":
        task_file.write_text(value)
        return
    if kind == "image":
        if image.is_file() and not image.is_symlink():
            image.unlink()
            {"fifo": lambda: os.mkfifo(image), "dir": lambda: image.mkdir(),
             "link": lambda: image.symlink_to(folder.parent.parent / "outside" / "secret.png"),
             "garbage": lambda: image.write_bytes(b"\x89PNG\r\n\x1a\n garbage"), "missing": lambda: None,
             "huge": lambda: image.write_bytes(HUGE_PNG)}[key]()
        return
    try:
        data = json.loads(task_file.read_text())
    except (ValueError, RecursionError):
        return
    if not isinstance(data, dict):
        return
    turn = (data.get("turns") or [{}])[0] if isinstance(data.get("turns"), list) else {}
    rubrics = turn.get("rubrics") if isinstance(turn, dict) else None
    rubric = rubrics.get("r1") if isinstance(rubrics, dict) else None
    if kind == "top":
        data[key] = value
    elif kind == "delete":
        data.pop(key, None)
    elif kind == "file" and isinstance(data.get("images"), list) and data["images"] \
            and isinstance(data["images"][0], dict):
        data["images"][0]["file"] = value
    elif kind == "turn" and isinstance(turn, dict):
        turn[key] = value
    elif kind == "rubric" and isinstance(rubric, dict):
        rubric[key] = value
    elif kind == "check" and isinstance(rubric, dict):
        rubric["check"] = value
    task_file.write_text(json.dumps(data))


def _huge_png() -> bytes:
    import io

    from PIL import Image

    out = io.BytesIO()
    Image.new("1", (9000, 9000)).save(out, format="PNG")
    return out.getvalue()


HUGE_PNG = _huge_png()


def sandbox_tree() -> tempfile.TemporaryDirectory[str]:
    """root/{tasks/t, outside/secret.png, dirlink -> outside}: a valid task and a target outside it."""
    tmp = tempfile.TemporaryDirectory()
    root = Path(tmp.name)
    folder = write_task(root / "tasks", "t")
    (root / "outside").mkdir()
    (root / "outside" / "secret.png").write_bytes((folder / "image_0.png").read_bytes())
    (folder / "link.png").symlink_to(root / "outside" / "secret.png")
    (folder / "dirlink").symlink_to(root / "outside")
    os.mkfifo(folder / "fifo.png")
    (folder / "dir.png").mkdir()
    (folder / "nested").mkdir()
    (folder / "nested" / "ok.png").write_bytes((folder / "image_0.png").read_bytes())
    return tmp


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


def assert_nothing_outside_opened(opened: list[str], root: Path) -> None:
    outside = (root / "outside").resolve()
    for name in opened:
        path = Path(name)
        assert ".." not in path.parts, name
        if path.is_absolute():
            assert not path.resolve().is_relative_to(outside) and name != "/etc/passwd", name


def load_everything(spec: Path | str) -> list[Task | TaskLoadError]:
    items = list(iter_source(spec))
    assert all(isinstance(i, (Task, TaskLoadError)) for i in items), items
    return items


@pytest.mark.slow
@SETTINGS
@given(st.lists(MUTATION, min_size=1, max_size=3))
def test_mutated_task_folders_load_or_fail_with_a_task_error(mutations):
    global OPENED
    with sandbox_tree() as tmp:
        root = Path(tmp)
        folder = root / "tasks" / "t"
        for mutation in mutations:
            mutate(folder, mutation)
        before = files_under(root)
        OPENED = []
        try:
            items = load_everything(root / "tasks")
            problems = validate_tasks(items)
            report = import_tasks(items, root / "out")
        finally:
            opened, OPENED = OPENED, None
        assert all(p.severity in ("error", "warning") for p in problems)
        errors = [p for p in problems if p.severity == "error"]
        assert report.written == (0 if errors else 1)
        assert {p for p in files_under(root) - before if not p.is_relative_to(root / "out")} == set()
        assert_nothing_outside_opened(opened, root)
        if report.written:  # what import wrote loads back into the same task
            again = load_tasks(root / "out")
            assert [t.id for t in again] == [t.id for t in items if isinstance(t, Task)]


ROW_VALUES = JSON | st.binary(max_size=16) | st.lists(st.fixed_dictionaries(
    {"bytes": st.none() | st.binary(max_size=8) | st.just(b"\x89PNG\r\n\x1a\n"),
     "path": st.none() | NAMES}), max_size=2)


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(["id", "turn_prompts", "turn_golden_answers", "rubrics_by_turn",
                                           "turn_tool_trajectories", "images", "images_by_turn", "num_turns",
                                           "eval_focus", "task_metadata", "prompt", "image", "extra"]),
                          ROW_VALUES), min_size=1, max_size=3), st.booleans())
def test_mutated_dataset_rows_load_or_fail_with_a_task_error(changes, as_parquet):
    global OPENED
    with sandbox_tree() as tmp:
        root = Path(tmp)
        row = task_to_row(load_tasks(root / "tasks")[0])
        for column, value in changes:
            row[column] = value
        OPENED = []
        try:
            if as_parquet:
                try:
                    pq.write_table(pa.Table.from_pylist([row]), root / "data.parquet")
                except (pa.ArrowException, TypeError, ValueError, OverflowError):
                    return  # arrow cannot hold this row: no parquet file can carry it
                items = list(iter_parquet(root / "data.parquet"))
            else:  # the Hugging Face loader's path: image paths are read inside the dataset folder only
                items = list(rows_to_tasks([row], "rows", image_root=root / "tasks" / "t"))
            assert all(isinstance(i, (Task, TaskLoadError)) for i in items), items
            problems = validate_tasks(items)
        finally:
            opened, OPENED = OPENED, None
        assert_nothing_outside_opened(opened, root)
        for item in items:
            if isinstance(item, Task):
                for rubric in (r for _, r in item.rubrics if r.check is not None):
                    assert rubric.check.value is None or math.isfinite(rubric.check.value)
        assert isinstance(problems, list)
