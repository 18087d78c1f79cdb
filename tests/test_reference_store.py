"""A run keeps the reference crops it measured on disk (``$VTB_CACHE_DIR/reference-regions``) and a later
run of the same task content on the same vtb reads them instead of running the reference code again
(vtb_agents/episodes/reference_store.py); other code, a file that cannot be read, or ``off`` measure anew."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from conftest import write_task
from vtb_agents.config import RunConfig
from vtb_agents.episodes import reference_store as store_module
from vtb_agents.episodes.reference_store import CACHE_DIR_ENV, ReferenceStore, reference_store
from vtb_agents.runner.run import run_suite
from vtb_agents.tasks import load_tasks

TASK = "t-corner"  # its reference crops (340, 260, 400, 300) of image_0.png


def reference_boxes(run_dir: Path) -> list[list[float]]:
    """The reference crops the run's one turn recorded, as boxes."""
    (line,) = (run_dir / "results.jsonl").read_text().splitlines()
    (turn,) = json.loads(line)["episode"]["turns"]
    return [region["box"] for region in turn["reference_regions"]]


def run(root: Path, out: Path) -> list[list[float]]:
    run_suite(load_tasks(str(root)), RunConfig(tasks=str(root), model="replay", judge="rule"), out)
    return reference_boxes(out)


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(CACHE_DIR_ENV, str(folder))
    return folder / "reference-regions"


@pytest.fixture
def task_root(tmp_path: Path) -> Path:
    write_task(tmp_path / "tasks", TASK)
    return tmp_path / "tasks"


def stored_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.json"))


def test_a_second_run_reads_the_crops_the_first_stored(cache_dir: Path, task_root: Path, tmp_path: Path) -> None:
    measured = run(task_root, tmp_path / "first")
    assert measured == [[340, 260, 400, 300]]
    (stored,) = stored_files(cache_dir)
    data = json.loads(stored.read_text())
    assert data["format_version"] == 1 and [r["box"] for r in data["regions"][0]] == measured[:1]
    data["regions"][0][0]["box"] = [0, 0, 60, 40]  # what a second run reads, if it reads the file
    stored.write_text(json.dumps(data))
    assert run(task_root, tmp_path / "second") == [[0, 0, 60, 40]]


def test_other_code_or_another_task_content_measures_anew(cache_dir: Path, task_root: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    run(task_root, tmp_path / "first")
    (stored,) = stored_files(cache_dir)
    data = json.loads(stored.read_text())
    data["regions"][0][0]["box"] = [0, 0, 60, 40]
    stored.write_text(json.dumps(data))
    monkeypatch.setattr(store_module, "code_fingerprint", lambda: "an edited vtb")
    assert run(task_root, tmp_path / "edited") == [[340, 260, 400, 300]]  # measured, not read
    assert len(stored_files(cache_dir)) == 2
    other = tmp_path / "other"
    write_task(other, TASK, images=[{"file": "image_0.png"}], domain="sports")  # same content: same crops
    assert run(other, tmp_path / "same-content") == [[340, 260, 400, 300]]
    assert len(stored_files(cache_dir)) == 2  # the key is the content (images, code), not the task's id or domain


def test_a_file_that_cannot_be_read_is_measured_anew_and_replaced(cache_dir: Path, task_root: Path, tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    run(task_root, tmp_path / "first")
    (stored,) = stored_files(cache_dir)
    stored.write_text('{"format_version": 1, "regions": [[{"box": "torn')
    with caplog.at_level(logging.WARNING, logger="vtb_agents.episodes.reference_store"):
        assert run(task_root, tmp_path / "second") == [[340, 260, 400, 300]]
    assert f"reference crops {stored} cannot be read, measured anew" in caplog.text
    assert json.loads(stored.read_text())["format_version"] == 1  # whole again


def test_off_keeps_nothing(monkeypatch: pytest.MonkeyPatch, task_root: Path, tmp_path: Path) -> None:
    monkeypatch.setenv(CACHE_DIR_ENV, "off")
    assert reference_store() is None
    assert run(task_root, tmp_path / "run") == [[340, 260, 400, 300]]


def test_without_the_variable_the_users_cache_folder_is_used(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(CACHE_DIR_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    store = reference_store()
    assert isinstance(store, ReferenceStore) and store.folder == tmp_path / "xdg" / "vtb-agents" / "reference-regions"


def test_a_folder_that_cannot_be_written_is_warned_about_and_the_run_goes_on(
        monkeypatch: pytest.MonkeyPatch, task_root: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv(CACHE_DIR_ENV, str(blocked))
    with caplog.at_level(logging.WARNING, logger="vtb_agents.episodes.reference_store"):
        assert run(task_root, tmp_path / "run") == [[340, 260, 400, 300]]
    assert "cannot be stored" in caplog.text
