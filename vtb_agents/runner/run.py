"""Run a suite: for each task an episode in its own sandbox, a grade, a line in ``results.jsonl``.

The run directory holds ``run.json`` (what was run, how), ``results.jsonl``, ``artifacts/`` and
``summary.json``. Results already written are never rewritten: a run resumes by skipping the task
ids it has, and refuses to mix settings or to overwrite another run.
"""

from __future__ import annotations

import json
from collections import Counter
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from vtb_agents import __version__
from vtb_agents.analysis.metrics import summarize
from vtb_agents.artifacts import ArtifactStore
from vtb_agents.graphs.episode import EpisodeSettings, run_episode
from vtb_agents.judges import RubricJudge, RuleJudge, load_judge
from vtb_agents.judges.cache import CachedJudge, JudgeCache
from vtb_agents.graphs.grading import grade_episode
from vtb_agents.judges.grade import CriticalRule
from vtb_agents.models import load_model
from vtb_agents.results import Episode, TaskResult
from vtb_agents.runner.store import ResultsStore, write_json_atomic
from vtb_agents.tasks.model import Task
from vtb_agents.tools import select_tools
from vtb_agents.tools.sandbox import open_sandbox

RUN_FILE = "run.json"
SUMMARY_FILE = "summary.json"
JUDGE_CACHE_FILE = "judge_cache.sqlite"


class RunError(RuntimeError):
    """A run that cannot start or continue as asked (names the run directory and the reason)."""


@dataclass(frozen=True)
class RunConfig:
    """What a run is: recorded in ``run.json`` and compared on resume."""

    model: str
    judge: str = "rule"
    tasks: str = "sample"
    sandbox: str = "local"
    critical_rule: CriticalRule = "weight"
    no_tools: bool = False
    no_vision_tool: bool = False
    episode: EpisodeSettings = field(default_factory=EpisodeSettings)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (tuples become lists)."""
        return json.loads(json.dumps(asdict(self)))


ProgressFn = Callable[[TaskResult, int, int], None]


def run_task(task: Task, config: RunConfig, artifacts: ArtifactStore, judge: RubricJudge) -> TaskResult:
    """Run and grade one task. Model, tool or graph failures become an errored episode, not a crash."""
    started = time.perf_counter()
    tools = select_tools(no_tools=config.no_tools, no_vision_tool=config.no_vision_tool)
    try:
        with open_sandbox(config.sandbox) as sandbox:
            episode = run_episode(task, load_model(config.model, task), tools, sandbox=sandbox,
                                  artifacts=artifacts, model_name=config.model, settings=config.episode)
    except Exception as exc:  # recorded per task: one failing task must not end a 1,204-task run
        episode = Episode(task_id=task.id, model=config.model, status="error",
                          error=f"{type(exc).__name__}: {exc}",
                          settings={"traceback": traceback.format_exc(limit=8)})
    return TaskResult(
        task_id=task.id, category=task.category, category_raw=task.category_raw, domain=task.domain,
        domain_raw=task.domain_raw, turncase=task.turncase, model=config.model, episode=episode,
        grade=grade_episode(task, episode, judge, config.critical_rule),
        duration_s=round(time.perf_counter() - started, 4),
    )


def with_cache(judge: RubricJudge, cache_path: Path) -> RubricJudge:
    """``judge`` behind a verdict cache at ``cache_path`` (the rule judge needs none)."""
    return judge if isinstance(judge, RuleJudge) else CachedJudge(judge, JudgeCache(cache_path))


def prepare_run_dir(out: Path, config: RunConfig, *, resume: bool) -> list[TaskResult]:
    """Create or reopen ``out``; return the results already there (resume) or refuse to clobber."""
    out.mkdir(parents=True, exist_ok=True)
    store = ResultsStore(out)
    run_file = out / RUN_FILE
    if run_file.exists() or store.path.exists():
        if not resume:
            raise RunError(f"{out} already holds a run: pass --resume to continue it, or choose another --out")
        recorded = json.loads(run_file.read_text(encoding="utf-8")).get("config") if run_file.exists() else None
        if recorded is not None and recorded != config.to_dict():
            changed = sorted(k for k in set(recorded) | set(config.to_dict())
                             if recorded.get(k) != config.to_dict().get(k))
            raise RunError(f"{out}: cannot resume with different settings ({', '.join(changed)})")
        done, partial_at = store.load()
        if partial_at is not None:
            store.repair(partial_at)
        return done
    write_json_atomic(run_file, {"config": config.to_dict(), "vtb_agents": __version__,
                                 "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    return []


def run_suite(tasks: Sequence[Task], config: RunConfig, out: Path, *, resume: bool = False,
              progress: ProgressFn | None = None, judge_cache: Path | None = None) -> dict[str, Any]:
    """Run every task not yet in ``out``, append each result as it finishes, write ``summary.json``."""
    out = Path(out)
    ids = [t.id for t in tasks]
    duplicates = sorted(i for i, n in Counter(ids).items() if n > 1)
    if duplicates:
        raise RunError(f"duplicate task ids: {', '.join(duplicates)}")
    judge = load_judge(config.judge)  # a bad judge spec fails before the run directory is touched
    done = prepare_run_dir(out, config, resume=resume)
    judge = with_cache(judge, judge_cache or out / JUDGE_CACHE_FILE)
    finished = {r.task_id for r in done}
    store, artifacts = ResultsStore(out), ArtifactStore(out / "artifacts")
    results = list(done)
    todo = [t for t in tasks if t.id not in finished]
    for task in todo:
        result = run_task(task, config, artifacts, judge)
        store.append(result)
        results.append(result)
        if progress:
            progress(result, len(results), len(tasks))
    wanted = set(ids)
    summary = summarize([r for r in results if r.task_id in wanted], judge_name=config.judge,
                        extra={"model": config.model, "critical_rule": config.critical_rule})
    write_json_atomic(out / SUMMARY_FILE, summary)
    return summary
