"""The names inside a run directory, defined once.

```
RUN_DIR/
  run.json             what was run, how (RUN_FILE)
  results.jsonl        one task per line, appended as tasks finish (RESULTS_FILE)
  summary.json         APR, ARS, breakdowns, tool metrics, usage (SUMMARY_FILE)
  artifacts/           content-addressed images of the episodes (ARTIFACTS_DIR)
  checkpoints.sqlite   the LangGraph checkpoints (CHECKPOINT_FILE; checkpoints-N.sqlite per Ray worker)
  judge_cache.sqlite   cached verdicts of an LLM judge (JUDGE_CACHE_FILE)
  run.lock             held by the one process writing the directory (LOCK_FILE)
```
"""

from __future__ import annotations

from pathlib import Path

from vtb_agents.config import RUN_FILE

__all__ = ["ARTIFACTS_DIR", "CHECKPOINT_FILE", "CORRUPT_SUFFIX", "JUDGE_CACHE_FILE", "LOCK_FILE", "RESULTS_FILE",
           "RUN_FILE", "SUMMARY_FILE", "artifacts_dir", "worker_checkpoints"]
RESULTS_FILE = "results.jsonl"
SUMMARY_FILE = "summary.json"
ARTIFACTS_DIR = "artifacts"
CHECKPOINT_FILE = "checkpoints.sqlite"
JUDGE_CACHE_FILE = "judge_cache.sqlite"
LOCK_FILE = "run.lock"
CORRUPT_SUFFIX = ".corrupt"
"""Appended to ``results.jsonl`` for the file that keeps bytes a crash left torn (never dropped)."""


def worker_checkpoints(index: int) -> str:
    """The checkpoint file of Ray worker ``index`` (no two processes write one SQLite file)."""
    return f"checkpoints-{index}.sqlite"


def artifacts_dir(run_dir: Path) -> Path:
    """The run's artifact store folder."""
    return Path(run_dir) / ARTIFACTS_DIR
