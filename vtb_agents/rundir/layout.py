"""The names inside a run directory, defined once.

```
RUN_DIR/
  run.json             what was run, how (RUN_FILE)
  results.jsonl        one task per line, appended as tasks finish (RESULTS_FILE)
  summary.json         APR, ARS, breakdowns, tool metrics, usage (SUMMARY_FILE)
  artifacts/           content-addressed images of the episodes (ARTIFACTS_DIR)
  checkpoints.sqlite   the LangGraph checkpoints (CHECKPOINT_FILE; checkpoints-N.sqlite per worker process)
  judge_cache.sqlite   cached verdicts of an LLM judge (JUDGE_CACHE_FILE)
  judge_batches.json   verdict batches submitted and not yet graded (JUDGE_BATCHES_FILE, `vtb grade --batch`)
  transcripts/         one JSON transcript per task and epoch (TRANSCRIPTS_DIR, transcript_file)
  tasks/               one offline HTML page per task and epoch, linked from report.html (TASK_PAGES_DIR)
  run.lock             held by the one process writing the directory (LOCK_FILE)
```
"""

from __future__ import annotations

import hashlib
from pathlib import Path

__all__ = ["ARTIFACTS_DIR", "CHECKPOINT_FILE", "CORRUPT_SUFFIX", "JUDGE_BATCHES_FILE", "JUDGE_CACHE_FILE", "LOCK_FILE",
           "RESULTS_FILE", "RUN_FILE", "SUMMARY_FILE", "TASK_PAGES_DIR", "TRANSCRIPTS_DIR", "artifacts_dir",
           "task_file_stem", "task_page_file", "transcript_file", "worker_checkpoints"]
RUN_FILE = "run.json"
RESULTS_FILE = "results.jsonl"
SUMMARY_FILE = "summary.json"
ARTIFACTS_DIR = "artifacts"
CHECKPOINT_FILE = "checkpoints.sqlite"
JUDGE_CACHE_FILE = "judge_cache.sqlite"
JUDGE_BATCHES_FILE = "judge_batches.json"
LOCK_FILE = "run.lock"
TRANSCRIPTS_DIR = "transcripts"
TASK_PAGES_DIR = "tasks"
CORRUPT_SUFFIX = ".corrupt"
"""Appended to ``results.jsonl`` for the file that keeps bytes a crash left torn (never dropped)."""


def worker_checkpoints(index: int) -> str:
    """The checkpoint file of worker process ``index`` (Ray, ``--executor processes``): no two
    processes write one SQLite file."""
    return f"checkpoints-{index}.sqlite"


def artifacts_dir(run_dir: Path) -> Path:
    """The run's artifact store folder."""
    return Path(run_dir) / ARTIFACTS_DIR


def task_file_stem(task_id: str, epoch: int = 1) -> str:
    """The file name stem of one task's (and epoch's) transcript and page: readable, unique per id.

    Any character outside ``[A-Za-z0-9-_]`` becomes ``_`` (no path can escape its folder); a short
    hash of the exact id keeps two ids that read alike apart. Epoch 1 carries no suffix.
    """
    readable = "".join(c if (c.isascii() and c.isalnum()) or c in "-_" else "_" for c in task_id)[:80] or "task"
    digest = hashlib.sha256(task_id.encode("utf-8")).hexdigest()[:10]
    return f"{readable}-{digest}" + ("" if epoch == 1 else f".e{epoch}")


def transcript_file(run_dir: Path, task_id: str, epoch: int = 1) -> Path:
    """Where one task's transcript (for ``epoch``) is kept in the run directory."""
    return Path(run_dir) / TRANSCRIPTS_DIR / f"{task_file_stem(task_id, epoch)}.json"


def task_page_file(run_dir: Path, task_id: str, epoch: int = 1) -> Path:
    """Where one task's offline HTML page (for ``epoch``) is written in the run directory."""
    return Path(run_dir) / TASK_PAGES_DIR / f"{task_file_stem(task_id, epoch)}.html"
