"""Format versions of a run directory, through the real `vtb` command: ``run.json``, every line of
``results.jsonl`` and every transcript carry one, and a run (or transcript) of another version is
refused with one line naming the file, both versions and what to do, with nothing in it changed."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Callable

import pytest

import vtb_agents
from support import cli
from vtb_agents.config import run_config
from vtb_agents.results import RESULTS_FORMAT
from vtb_agents.rundir.errors import FormatVersionError, RunError
from vtb_agents.rundir.layout import LOCK_FILE, RESULTS_FILE, RUN_FILE, transcript_file
from vtb_agents.rundir.read import ReportError, load_run, open_finished_run, read_record
from vtb_agents.rundir.records import RUN_FORMAT
from vtb_agents.rundir.store import ResultsStore
from vtb_agents.rundir.transcripts import read_transcript
from vtb_agents.runner.run import run_suite
from vtb_agents.tasks import load_tasks
from vtb_agents.transcript import TRANSCRIPT_FORMAT
from vtb_agents.version import __version__

TASK = "rs-finance-invoice"


def vtb(*args: str) -> subprocess.CompletedProcess[str]:
    """The real command line (`python -m vtb_agents`), output captured, wide enough for one line."""
    return cli.vtb(*args, env={"VTB_DEBUG": ""}, columns=400, timeout=240)


def snapshot(run_dir: Path) -> dict[str, str]:
    """Every file of ``run_dir`` by its bytes' hash (the lock file apart: any opener writes its pid)."""
    return {str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run_dir.rglob("*")) if p.is_file() and p.name != LOCK_FILE}


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run of one sample task (written once; each test works on a copy)."""
    out = tmp_path_factory.mktemp("versions") / "run"
    run_suite([t for t in load_tasks("sample") if t.id == TASK], run_config(tasks="sample"), out)
    return out


@pytest.fixture
def run_dir(finished: Path, tmp_path: Path) -> Path:
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(finished, copy)
    return copy


def set_version(path: Path, version: int | None) -> None:
    """Rewrite the JSON file at ``path`` with ``format_version`` set to ``version`` (None: removed)."""
    data = json.loads(path.read_text())
    data.pop("format_version")
    path.write_text(json.dumps(data if version is None else {"format_version": version, **data}))


def old_results(path: Path) -> None:
    """Rewrite ``results.jsonl`` as a vtb before format versions wrote it: no ``format_version``."""
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({k: v for k, v in line.items() if k != "format_version"}) + "\n"
                            for line in lines))


def test_every_file_of_a_run_carries_its_format_version(run_dir: Path) -> None:
    assert json.loads((run_dir / RUN_FILE).read_text())["format_version"] == RUN_FORMAT
    lines = (run_dir / RESULTS_FILE).read_bytes().splitlines()
    assert lines and all(line.startswith(b'{"format_version":%d,"task_id":' % RESULTS_FORMAT) for line in lines)
    transcript = json.loads(transcript_file(run_dir, TASK).read_text())
    assert transcript["format_version"] == TRANSCRIPT_FORMAT and transcript["task_id"] == TASK
    assert read_record(run_dir).format_version == RUN_FORMAT and read_transcript(run_dir, TASK).task_id == TASK


OLD_FILES: dict[str, tuple[Callable[[Path], None], str]] = {
    "run.json": (lambda run: set_version(run / RUN_FILE, None), "run.json: format version none"),
    "run.json v0": (lambda run: set_version(run / RUN_FILE, 0), "run.json: format version 0"),
    "results.jsonl": (lambda run: old_results(run / RESULTS_FILE), "results.jsonl (line 1): format version none"),
    "transcript v2": (lambda run: set_version(transcript_file(run, TASK), 2), ".json: format version 2"),
}


def refused_line(result: subprocess.CompletedProcess[str], where: str) -> str:
    """The one line a refused command printed: it names the file, both versions and what to do."""
    assert result.returncode != 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    line = lines[0]
    reads = {"run.json": RUN_FORMAT, "results.jsonl": RESULTS_FORMAT}.get(where.split()[0].split(" (")[0],
                                                                           TRANSCRIPT_FORMAT)
    assert f"vtb-agents {__version__} reads version {reads}" in line, line
    assert "re-run it with this version, or read it with the vtb-agents version that wrote it" in line, line
    return line


@pytest.mark.parametrize("old", ["run.json", "run.json v0", "results.jsonl"])
def test_every_command_refuses_a_run_of_another_version_and_changes_nothing(run_dir: Path, tmp_path: Path,
                                                                           old: str) -> None:
    change, named = OLD_FILES[old]
    change(run_dir)
    before = snapshot(run_dir)
    commands = {
        "report": ["report", str(run_dir)],
        "resume": ["run", "--tasks", "sample", "--task-id", TASK, "--out", str(run_dir), "--resume"],
        "transcript": ["transcript", str(run_dir), TASK],
        "compare": ["compare", str(run_dir), str(run_dir)],
        "grade": ["grade", str(run_dir)],
        "analyze": ["analyze", "errors", str(run_dir), "--model", "openai:gpt-4o-mini"],
    }
    for name, args in commands.items():
        line = refused_line(vtb(*args), old)
        assert named in line and str(run_dir) in line, (name, line)
        assert snapshot(run_dir) == before, f"vtb {name} changed the run directory"


def test_a_transcript_of_another_version_is_refused_by_its_readers(run_dir: Path) -> None:
    change, named = OLD_FILES["transcript v2"]
    change(run_dir)
    before = snapshot(run_dir)
    line = refused_line(vtb("transcript", str(run_dir), TASK), "transcript")
    assert named in line and transcript_file(run_dir, TASK).name in line
    assert "format version 2, but" in line
    for command in ("report", "grade"):  # the task pages read transcripts; a regrade rewrites their verdicts
        line = refused_line(vtb(command, str(run_dir)), "transcript")
        assert named in line, (command, line)
        assert snapshot(run_dir) == before, f"vtb {command} changed the run directory"


@pytest.mark.parametrize("old", sorted(OLD_FILES))
def test_the_python_readers_refuse_it_too(run_dir: Path, old: str) -> None:
    change, named = OLD_FILES[old]
    change(run_dir)
    before = snapshot(run_dir)
    readers: list[Callable[[], object]] = [lambda: read_transcript(run_dir, TASK)] if "transcript" in old else [
        lambda: open_finished_run(run_dir), lambda: load_run(run_dir)]
    if old == "results.jsonl":
        readers += [lambda: ResultsStore(run_dir).load(), lambda: ResultsStore(run_dir).task_ids(),
                    lambda: ResultsStore(run_dir).load_for_resume()]
    if old.startswith("run.json"):  # the Python API's resume, as `vtb run --resume`
        readers.append(lambda: vtb_agents.evaluate("react", tasks=[t for t in load_tasks("sample") if t.id == TASK],
                                                   out=run_dir, resume=True))
    for reader in readers:
        with pytest.raises((RunError, ReportError, ValueError), match=named.replace("(", r"\(").replace(")", r"\)")):
            reader()
    assert snapshot(run_dir) == before


def test_a_store_reader_raises_the_format_error_itself(run_dir: Path) -> None:
    old_results(run_dir / RESULTS_FILE)
    for reader in (ResultsStore(run_dir).load, ResultsStore(run_dir).task_ids, ResultsStore(run_dir).load_for_resume):
        with pytest.raises(FormatVersionError, match=r"results\.jsonl \(line 1\): format version none"):
            reader()


@pytest.mark.parametrize("found", [None, 0, RUN_FORMAT - 1, RUN_FORMAT + 1, True, float(RUN_FORMAT), str(RUN_FORMAT)])
def test_only_this_integer_version_reads(tmp_path: Path, found: object) -> None:
    from vtb_agents.rundir.errors import check_format, format_version

    (tmp_path / "run.json").write_text(json.dumps({"format_version": found, "config": {}}))
    assert format_version((tmp_path / "run.json").read_bytes()) == found
    with pytest.raises(FormatVersionError, match=rf"run\.json: format version .*reads version {RUN_FORMAT}"):
        check_format(tmp_path / "run.json", format_version((tmp_path / "run.json").read_bytes()), RUN_FORMAT)
    check_format(tmp_path / "run.json", RUN_FORMAT, RUN_FORMAT)


def test_vtb_transcript_names_a_damaged_results_file_in_one_line(run_dir: Path) -> None:
    path = run_dir / RESULTS_FILE
    path.write_bytes(b'{"format_version":1,"task_id":"x","torn\n' + path.read_bytes())  # a torn line, not the last
    result = vtb("transcript", str(run_dir), TASK)
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.strip()]
    assert "results.jsonl: line 1 is not a valid result" in line
