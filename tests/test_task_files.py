"""Hostile and broken task files, through the real `vtb` command: every file a task names stays
inside its folder, bad data is caught by `vtb tasks validate`, and every error is one line."""

from __future__ import annotations

import json
import os
import subprocess
from functools import partial
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

from conftest import write_task
from support import cli
from vtb_agents.tasks import load_tasks
from vtb_agents.tasks.errors import TaskLoadError
from vtb_agents.tasks.local import load_task_dir
from vtb_agents.tasks.model import Task
from vtb_agents.tasks.parquet import SCHEMA, iter_parquet, task_to_row

vtb = partial(cli.vtb, env={"COLUMNS": "250"}, without=("VTB_DEBUG",), timeout=60)
"""The real command line (`python -m vtb_agents`), output captured; a wide terminal, no debug tracebacks."""


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The single error line a failed command printed (no traceback)."""
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert lines, result.stderr + result.stdout
    assert not lines[0].startswith("error: error:"), lines[0]
    return lines[0]


def set_image_file(folder: Path, name: str) -> None:
    data = json.loads((folder / "task.json").read_text())
    data["images"][0]["file"] = name
    (folder / "task.json").write_text(json.dumps(data))


def edit_rubric_check(folder: Path, check: dict) -> None:
    data = json.loads((folder / "task.json").read_text())
    data["turns"][0]["rubrics"]["r1"]["check"] = check
    (folder / "task.json").write_text(json.dumps(data))


@pytest.fixture
def crafted(tmp_path: Path) -> Path:
    """tasks/evil: a valid task folder, deep inside tmp_path so that '..' chains stay in it."""
    root = tmp_path / "a" / "b" / "c" / "tasks"
    write_task(root, "evil")
    return root


def test_import_of_a_task_naming_a_file_outside_its_folder_writes_nothing(crafted, tmp_path):
    folder = crafted / "evil"
    (tmp_path / "a" / "PWNED.txt").write_bytes((folder / "image_0.png").read_bytes())  # what '..' would reach
    set_image_file(folder, "../../../PWNED.txt")
    out = tmp_path / "a" / "b" / "c" / "out"
    result = vtb("tasks", "import", str(crafted), "--out", str(out))
    assert result.returncode != 0
    line = one_error_line(result)
    assert "task 'evil'" in line and "images[0].file" in line and "'..'" in line
    written = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert all(not str(p).startswith(("a/b/c/out", "a/b/PWNED", "a/b/c/PWNED")) for p in written), written
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("name, reason", [
    ("/etc/shadow", "absolute path"),
    ("../../../../etc/shadow", "'..'"),
    ("link.png", "symlink"),
    ("sub/image.png", "symlink"),
])
@pytest.mark.slow
def test_validate_and_run_refuse_files_outside_the_folder(crafted, tmp_path, name, reason):
    folder = crafted / "evil"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    Image.new("RGB", (40, 30), "red").save(outside / "image.png")
    (folder / "link.png").symlink_to(outside / "image.png")
    (folder / "sub").symlink_to(outside)  # a symlinked folder on the way
    set_image_file(folder, name)
    result = vtb("tasks", "validate", str(crafted))
    assert result.returncode != 0
    line = one_error_line(result)
    assert "task 'evil'" in line and "'images[0].file'" in line and reason in line, line
    run = vtb("run", "--tasks", str(crafted), "--out", str(tmp_path / "run"))
    assert run.returncode == 2
    assert reason in one_error_line(run)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_an_image_that_is_not_a_regular_file_is_refused_without_blocking(crafted, kind):
    image = crafted / "evil" / "image_0.png"
    image.unlink()
    os.mkfifo(image) if kind == "fifo" else image.mkdir()
    result = vtb("tasks", "validate", str(crafted), timeout=60)  # a FIFO opened for reading would hang
    line = one_error_line(result)
    assert "'images[0].file'" in line and ("a FIFO" if kind == "fifo" else "a directory") in line


def test_a_symlinked_task_file_is_refused(crafted, tmp_path):
    target = tmp_path / "task.json"
    (crafted / "evil" / "task.json").rename(target)
    (crafted / "evil" / "task.json").symlink_to(target)
    with pytest.raises(TaskLoadError, match="field 'task.json'.*symlink"):
        load_task_dir(crafted / "evil")


def test_import_never_writes_through_a_symlink_in_the_output_folder(tmp_path):
    rows = pa.Table.from_pylist([task_to_row(t) for t in load_tasks(write_task(tmp_path / "src", "t1").parent)],
                                schema=SCHEMA)
    pq.write_table(rows, tmp_path / "data.parquet")
    out, victim = tmp_path / "out", tmp_path / "victim"
    out.mkdir()
    victim.mkdir()
    (out / "t1").symlink_to(victim)
    result = vtb("tasks", "import", str(tmp_path / "data.parquet"), "--out", str(out))
    assert result.returncode == 1
    assert "symlink" in one_error_line(result)
    assert list(victim.iterdir()) == []


def test_import_writes_nothing_for_a_task_that_fails_validation(tmp_path):
    root = tmp_path / "src"
    write_task(root, "good")
    write_task(root, "bad")
    rows = [task_to_row(t) for t in load_tasks(root)]
    bad = next(r for r in rows if r["id"] == "bad")
    bad["images"] = bad["images_by_turn"][0] = [{"bytes": b"not an image at all", "path": "x.png"}]
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), tmp_path / "data.parquet")
    result = vtb("tasks", "import", str(tmp_path / "data.parquet"), "--out", str(tmp_path / "out"))
    assert result.returncode == 1
    line = one_error_line(result)
    assert "task 'bad'" in line and "cannot decode image: not a known image format" in line
    assert "BytesIO" not in result.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["good"]
    assert "wrote 1 task(s)" in result.stdout


@pytest.mark.parametrize("check, message", [
    ({"type": "regex", "pattern": "(unclosed"}, "not a valid regular expression"),
    ({"type": "number", "value": 42, "tolerance": float("nan")}, "finite number"),
    ({"type": "number", "value": float("inf")}, "finite number"),
])
def test_validate_catches_checks_that_would_fail_at_grading(crafted, check, message):
    edit_rubric_check(crafted / "evil", check)
    line = one_error_line(vtb("tasks", "validate", str(crafted)))
    assert "task 'evil'" in line and "turn 1" in line and message in line


def test_deeply_nested_json_is_a_task_error_not_a_recursion_error(crafted):
    text = (crafted / "evil" / "task.json").read_text()
    deep = "[" * 100_000 + "]" * 100_000
    (crafted / "evil" / "task.json").write_text(text[:-1] + ', "metadata": {"x": ' + deep + "}}")
    line = one_error_line(vtb("tasks", "validate", str(crafted)))
    assert "task.json" in line and "nested" in line
    deep = "[" * 70 + "]" * 70  # parses, but deeper than the bound
    (crafted / "evil" / "task.json").write_text(text[:-1] + ', "metadata": {"x": ' + deep + "}}")
    assert "nested deeper than 64 levels" in one_error_line(vtb("tasks", "validate", str(crafted)))


def test_a_parquet_file_without_rows_is_an_error(tmp_path):
    pq.write_table(pa.Table.from_pylist([], schema=SCHEMA), tmp_path / "empty.parquet")
    items = list(iter_parquet(tmp_path / "empty.parquet"))
    assert len(items) == 1 and isinstance(items[0], TaskLoadError) and "no rows" in str(items[0])
    line = one_error_line(vtb("tasks", "validate", str(tmp_path / "empty.parquet")))
    assert "empty.parquet" in line and "no rows" in line


def test_a_load_error_reads_error_once(crafted):
    set_image_file(crafted / "evil", "/etc/passwd")
    result = vtb("tasks", "list", str(crafted))
    assert result.returncode == 2
    assert one_error_line(result).startswith("error: task 'evil'")


def test_a_grading_error_is_the_tasks_own_and_the_run_goes_on(tmp_path):
    from vtb_agents.runner.run import RunConfig, run_suite

    root = tmp_path / "tasks"
    write_task(root, "broken")
    write_task(root, "fine")
    tasks = load_tasks(root)
    tasks[0].turns[0].rubrics[0].check.pattern = "(unclosed"  # what validation refuses, given in code
    tasks[0].turns[0].rubrics[0].check.type = "regex"
    summary = run_suite(tasks, RunConfig(model="replay"), tmp_path / "run")
    assert summary.tasks == 2  # the run went on; the broken task is ungraded, never silently
    assert not summary.complete and summary.infrastructure_errors.model_dump() == {"count": 1, "task_ids": ["broken"]}
    lines = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    broken = next(line for line in lines if line["task_id"] == "broken")
    assert broken["grade"]["graded"] is False and broken["grade"]["reason"].startswith("grading failed: ")
    assert broken["outcome"] == "harness_error"  # not the model's doing, nor the judge's: ours
    assert next(line for line in lines if line["task_id"] == "fine")["grade"]["passed"] is True


def test_dataset_image_paths_are_read_only_inside_the_dataset_folder(tmp_path):
    from vtb_agents.tasks.parquet import rows_to_tasks

    folder = write_task(tmp_path / "data", "t")
    row = task_to_row(load_tasks(folder)[0])
    inside = [{"bytes": None, "path": str(folder / "image_0.png")}]
    task = next(rows_to_tasks([{**row, "images": inside, "images_by_turn": [inside]}], "ds", image_root=folder))
    assert isinstance(task, Task) and task.images[0].read_bytes() == (folder / "image_0.png").read_bytes()
    for path in ("/etc/passwd", "../elsewhere.png"):
        outside = [{"bytes": None, "path": path}]
        error = next(rows_to_tasks([{**row, "images": outside, "images_by_turn": [outside]}], "ds", image_root=folder))
        assert isinstance(error, TaskLoadError) and "is refused" in str(error) and "field 'images'" in str(error)
