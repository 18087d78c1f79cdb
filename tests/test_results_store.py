"""``results.jsonl`` on real files, in process: appends, a partial last line, a torn middle line,
the repair on resume, which record of a task wins, and atomic JSON writes. (The same store under a
real full disk and two writers is in test_run_dir_safety.py, through the CLI.)"""

from __future__ import annotations

import errno
import json
import logging
import os
from pathlib import Path

import pytest

from vtb_agents.results import Episode, TaskGrade, TaskResult
from vtb_agents.rundir.store import ResultsError, ResultsStore, StorageError, latest_results, write_json_atomic


def line(task_id: str, outcome: str = "answered", passed: bool | None = True) -> TaskResult:
    failed = outcome != "answered"
    return TaskResult(task_id=task_id, category="c", category_raw="c", domain="d", domain_raw="d", turncase="single",
                      model="m", episode=Episode(task_id=task_id, model="m", outcome=outcome,
                                                 status="error" if failed else "completed"),
                      grade=TaskGrade(score=None if failed else 1.0, passed=passed, graded=not failed),
                      duration_s=0.5, outcome=outcome)


def raw(result: TaskResult) -> bytes:
    return (result.model_dump_json() + "\n").encode()


def test_appended_lines_load_back_in_order(tmp_path):
    store = ResultsStore(tmp_path)
    assert store.path == tmp_path / "results.jsonl" and store.load() == ([], None) and store.load_for_resume() == []
    for task_id in ("a", "b", "c"):
        store.append(line(task_id))
    assert store.path.read_bytes() == raw(line("a")) + raw(line("b")) + raw(line("c"))
    assert oct(store.path.stat().st_mode & 0o777) == "0o644"
    results, partial = store.load()
    assert [r.task_id for r in results] == ["a", "b", "c"] and partial is None


def test_a_partial_last_line_is_reported_by_its_offset_and_moved_aside_on_resume(tmp_path):
    store = ResultsStore(tmp_path)
    whole = raw(line("a")) + raw(line("b"))
    store.path.write_bytes(whole + raw(line("c"))[:40])
    results, partial = store.load()
    assert [r.task_id for r in results] == ["a", "b"] and partial == len(whole)
    assert [r.task_id for r in store.load_for_resume()] == ["a", "b"]
    assert store.path.read_bytes() == whole
    assert (tmp_path / "results.jsonl.corrupt").read_bytes() == raw(line("c"))[:40] + b"\n"


def test_a_whole_last_line_without_its_newline_still_counts(tmp_path):
    store = ResultsStore(tmp_path)
    store.path.write_bytes(raw(line("a")) + raw(line("b"))[:-1])
    results, partial = store.load()
    assert [r.task_id for r in results] == ["a", "b"] and partial is None


def test_an_invalid_last_line_with_its_newline_is_an_error_not_a_partial_write(tmp_path):
    store = ResultsStore(tmp_path)
    store.path.write_bytes(raw(line("a")) + b'{"task_id": "b", "categ\n')  # a crash never writes the newline alone
    with pytest.raises(ResultsError) as raised:
        store.load()
    assert str(raised.value).startswith(f"{store.path}: line 2 is not a valid result (ValidationError)")


def test_loading_names_the_file_when_it_ignores_a_duplicate(tmp_path, caplog):
    store = ResultsStore(tmp_path)
    store.path.write_bytes(raw(line("a")) + raw(line("a", passed=False)))
    expected = f"{store.path}: 1 duplicate line(s) for task(s) a ignored (the first record of each is used)"
    with caplog.at_level(logging.WARNING):
        results, partial = store.load()
    assert [(r.task_id, r.grade.passed) for r in results] == [("a", True)] and partial is None
    assert caplog.messages == [expected]
    caplog.clear()
    store.path.write_bytes(raw(line("a")) + raw(line("a", passed=False)) + raw(line("b"))[:30])
    with caplog.at_level(logging.WARNING):
        results, partial = store.load()
    assert [r.task_id for r in results] == ["a"] and partial == len(raw(line("a")) + raw(line("a", passed=False)))
    assert caplog.messages == [expected]


def test_a_torn_middle_line_is_an_error_naming_the_file_and_line(tmp_path):
    store = ResultsStore(tmp_path)
    store.path.write_bytes(raw(line("a")) + b'{"task_id": "b", "categ\n' + raw(line("c")))
    with pytest.raises(ResultsError) as raised:
        store.load()
    assert str(raised.value) == (f"{store.path}: line 2 is not a valid result (ValidationError); "
                                 "`vtb run --resume` with the run's options repairs the file")


def test_resume_keeps_a_record_glued_after_torn_bytes_and_moves_only_the_junk(tmp_path, caplog):
    store = ResultsStore(tmp_path)
    torn = raw(line("b"))[:55]  # what a failed write left, then the next record written after it
    junk = b'{"task_id":"x"}{"task_id":"y","no":1}\n'  # records start here too, but none is valid
    store.path.write_bytes(raw(line("a")) + torn + raw(line("c")) + junk + raw(line("d")))
    with caplog.at_level(logging.WARNING):
        results = store.load_for_resume()
    assert [r.task_id for r in results] == ["a", "c", "d"]
    assert store.path.read_bytes() == raw(line("a")) + raw(line("c")) + raw(line("d"))
    assert (tmp_path / "results.jsonl.corrupt").read_bytes() == torn + b"\n" + junk
    assert caplog.messages == [f"{store.path}: 2 torn line(s) moved to {tmp_path / 'results.jsonl.corrupt'}; "
                               "their tasks run again"]
    assert not (tmp_path / "results.jsonl.tmp").exists()
    store.path.write_bytes(raw(line("a")))
    assert [r.task_id for r in store.load_for_resume()] == ["a"]  # nothing torn: nothing moved
    assert (tmp_path / "results.jsonl.corrupt").read_bytes() == torn + b"\n" + junk


@pytest.mark.parametrize("torn, record, junk", [
    pytest.param(b"{", raw(line("c")), b"{", id="one byte of a failed write before a record"),
    # a record start that is no record, then a whole record (whose episode holds a '{"task_id":' of its
    # own): the search goes on from the first record start to the next, not to the last
    pytest.param(raw(line("b"))[:30] + b'{"task_id":"x"}', raw(line("c")), raw(line("b"))[:30] + b'{"task_id":"x"}',
                 id="two record starts before the whole record"),
])
def test_resume_recovers_the_whole_record_at_the_end_of_a_torn_line(tmp_path, torn, record, junk):
    store = ResultsStore(tmp_path)
    assert record.count(b'{"task_id":') == 1 and record.startswith(b'{"format_version":1,"task_id":')
    store.path.write_bytes(raw(line("a")) + torn + record)
    assert [r.task_id for r in store.load_for_resume()] == ["a", "c"]
    assert store.path.read_bytes() == raw(line("a")) + record
    assert (tmp_path / "results.jsonl.corrupt").read_bytes() == junk + b"\n"


def test_task_ids_reads_the_ids_of_whole_records_only(tmp_path):
    store = ResultsStore(tmp_path)
    assert store.task_ids() == set()
    store.path.write_bytes(raw(line("a")) + b'{"format_version": 1, "task_id": "b", "category": "c"}\n'  # the start
                           + b'xx{"task_id":"y"}\n' + raw(line("c"))  # torn before its start, then a record
                           + b'{"task_id":"unterminated\n' + raw(line("d"))  # torn inside the id, then a record
                           + raw(line("e"))[:40])  # the partial last line
    assert store.task_ids() == {"a", "b", "c", "d"}


def test_a_failed_append_whose_cut_also_fails_says_resuming_repairs_it(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path)
    real_write = os.write

    def twenty_bytes_then_full(fd: int, data: bytes) -> int:
        if os.fstat(fd).st_size == 0:
            return real_write(fd, bytes(data[:20]))
        raise OSError(errno.ENOSPC, "No space left on device")

    def cannot_cut(fd: int, length: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "write", twenty_bytes_then_full)
    monkeypatch.setattr(os, "ftruncate", cannot_cut)
    with pytest.raises(StorageError) as raised:
        store.append(line("a"))
    monkeypatch.undo()
    assert (raised.value.errno, raised.value.strerror) == (
        errno.ENOSPC, "No space left on device; the partial line could not be cut (Input/output error): "
                      "resuming repairs it")
    assert store.path.read_bytes() == raw(line("a"))[:20]
    assert store.load_for_resume() == [] and store.path.read_bytes() == b""  # the repair the message promises


def test_a_crash_between_writing_and_renaming_leaves_the_old_file_whole(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path)
    store.append(line("a"))
    summary = tmp_path / "summary.json"
    write_json_atomic(summary, {"apr": 1.0})

    def crash(src: object, dst: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        store.rewrite([line("b")])
    with pytest.raises(OSError):
        write_json_atomic(summary, {"apr": 0.0})
    monkeypatch.undo()
    assert store.path.read_bytes() == raw(line("a")) and json.loads(summary.read_text()) == {"apr": 1.0}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.jsonl", "summary.json"]  # no temporary file


def test_a_retry_after_an_infrastructure_failure_supersedes_other_duplicates_do_not(caplog):
    records = [line("a", "provider_error", None), line("b"), line("a"), line("b", passed=False),
               line("c", "sandbox_error", None), line("c", "storage_error", None), line("c"), line("c", passed=False)]
    with caplog.at_level(logging.WARNING):
        kept = latest_results(records, source="run/results.jsonl")
    assert [(r.task_id, r.ended, r.grade.passed) for r in kept] == [
        ("a", "answered", True), ("b", "answered", True), ("c", "answered", True)]
    assert caplog.messages == [
        "run/results.jsonl: 2 duplicate line(s) for task(s) b, c ignored (the first record of each is used)"]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        latest_results([line("a"), line("b")], source="run/results.jsonl")
    assert caplog.text == ""


def test_the_duplicate_warning_names_at_most_ten_tasks(caplog):
    ids = [f"t{i:02}" for i in range(12)]
    with caplog.at_level(logging.WARNING):
        kept = latest_results([line(i) for i in ids] + [line(i) for i in reversed(ids)], source="r.jsonl")
    assert [r.task_id for r in kept] == ids
    assert caplog.messages == ["r.jsonl: 12 duplicate line(s) for task(s) t00, t01, t02, t03, t04, t05, t06, t07, "
                               "t08, t09 ignored (the first record of each is used)"]


def test_a_failed_append_is_cut_back_and_raised_as_a_storage_error(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path)
    store.append(line("a"))
    real_write = os.write

    def half_then_full(fd: int, data: bytes) -> int:  # the disk fills part way through the line
        if len(data) > 20:
            return real_write(fd, bytes(data[:20]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(StorageError) as raised:
        store.append(line("b"))
    monkeypatch.undo()
    assert (raised.value.errno, raised.value.strerror, raised.value.filename) == (
        errno.ENOSPC, "No space left on device", str(store.path))
    assert store.path.read_bytes() == raw(line("a"))  # the 20 bytes written were cut off


def test_rewrite_replaces_every_line(tmp_path):
    store = ResultsStore(tmp_path)
    for task_id in ("a", "b"):
        store.append(line(task_id))
    store.rewrite([line("c"), line("d")])
    assert store.path.read_bytes() == raw(line("c")) + raw(line("d")) and not (tmp_path / "results.jsonl.tmp").exists()


def test_write_json_atomic_writes_indented_utf8_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "summary.json"
    write_json_atomic(target, {"apr": 0.5, "name": "café"})
    assert target.read_text(encoding="utf-8") == '{\n  "apr": 0.5,\n  "name": "café"\n}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]
    with pytest.raises(TypeError):
        write_json_atomic(target, {"bad": object()})
    assert json.loads(target.read_text()) == {"apr": 0.5, "name": "café"}  # the old file is whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


def test_a_directory_that_is_not_there_is_an_error_not_an_empty_run(tmp_path: Path):
    with pytest.raises(FileNotFoundError):
        ResultsStore(tmp_path / "missing").append(line("a"))
