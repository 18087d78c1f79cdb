"""Creating a run directory, or reopening one to resume it (never clobbering another run)."""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path
from typing import Any

from vtb_agents.defaults import OBJECT_PREFIX
from vtb_agents.results import TaskResult
from vtb_agents.rundir.errors import RunError
from vtb_agents.rundir.layout import RUN_FILE, SUMMARY_FILE
from vtb_agents.rundir.read import read_record
from vtb_agents.rundir.records import RunRecord, RunSummary
from vtb_agents.rundir.store import ResultsStore, write_json_atomic


def prepare_run_dir(out: Path, record: RunRecord, *, resume: bool,
                    may_change: Collection[str] = ()) -> list[TaskResult]:
    """Create ``out`` and write its ``run.json`` (``record``), or reopen it: return the results already
    there (``resume``) or refuse to clobber.

    A resume must keep the recorded settings, except those in ``may_change``; a run of another format
    version is refused (:class:`~vtb_agents.rundir.errors.FormatVersionError`) before anything in it
    changes.
    """
    out.mkdir(parents=True, exist_ok=True)
    store = ResultsStore(out)
    run_file = out / RUN_FILE
    if run_file.exists() or store.path.exists():
        if not resume:
            raise RunError(f"{out} already holds a run: pass --resume to continue it, or choose another --out")
        if run_file.exists():
            recorded = read_record(out).config.to_dict()
            current = record.config.to_dict()
            changed = sorted(k for k in set(recorded) | set(current)
                             if k not in may_change and recorded.get(k) != current.get(k))
            objects = [f"{k}: {recorded[k]}" for k in changed if OBJECT_PREFIX in json.dumps(recorded.get(k))]
            if objects:
                raise RunError(f"{out} was run from Python with objects ({'; '.join(objects)}): resume it from "
                               "Python, with vtb_agents.evaluate(..., resume=True) and the same objects")
            if changed:
                raise RunError(f"{out}: cannot resume with different settings ({', '.join(changed)})")
        return store.load_for_resume()  # torn lines moved to results.jsonl.corrupt, duplicates dropped
    write_json_atomic(run_file, record.model_dump(mode="json"))
    return []


def write_summary(run_dir: Path, summary: dict[str, Any]) -> RunSummary:
    """Write ``summary.json`` after checking it against its typed record (:class:`RunSummary`), so
    that what a run writes is what every reader of it expects; returns the typed summary."""
    typed = RunSummary.model_validate(summary)
    write_json_atomic(Path(run_dir) / SUMMARY_FILE, summary)
    return typed
