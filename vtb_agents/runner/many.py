"""Many models in one command: ``vtb run --model A --model B ...`` and ``evaluate(model=[...])``.

Each model's run is an ordinary run directory, ``OUT/<slug>`` (:func:`~vtb_agents.rundir.leaderboard.model_slug`),
that ``vtb report``, ``vtb grade`` and ``vtb transcript`` read as any other; ``--resume`` continues
every one. What the runs share, and why:

* they run at once, each model's episodes in its own thread with its own executor
  (:func:`~vtb_agents.runner.run.run_suite`): a provider that holds its requests back (a long
  ``retry-after``) holds back its own model's episodes only;
* one registry of account budgets (:mod:`vtb_agents.models.limiter`): each provider, base URL, model and
  key is paced on its own, and the judge, which every run calls, spends one budget, not one per model;
* one verdict cache (``OUT/judge_cache.sqlite`` unless given) and one judge;
* one stop event (Ctrl-C stops every run; running episodes finish) and one budget:
  ``--cost-limit`` and ``--token-limit`` count what all models spent together
  (:class:`~vtb_agents.runner.budget.SpendByModel`), and once reached no episode of any model starts.

Every plan is built and checked before the first episode runs, so a bad spec or a broken part
writes nothing. docs/how-to/many-models.md.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from vtb_agents.config import RunConfig
from vtb_agents.rundir.layout import JUDGE_CACHE_FILE
from vtb_agents.rundir.leaderboard import model_dirs
from vtb_agents.rundir.records import RunSummary
from vtb_agents.runner.batch_grade import BatchSettings
from vtb_agents.runner.budget import Budget, SpendByModel, run_budget
from vtb_agents.runner.executors import Executor, LocalExecutor
from vtb_agents.runner.plan import RunObjects, NO_OBJECTS, RunPlan, plan_run, run_limiters
from vtb_agents.runner.preflight import check_plan, require
from vtb_agents.runner.run import ProgressFn, run_suite
from vtb_agents.tasks.model import Task

__all__ = ["ModelRun", "ManyPlans", "plan_models", "run_models"]

_JOIN_S = 0.2  # the main thread wakes this often while the models run (a signal handler runs between waits)


@dataclass(frozen=True)
class ManyPlans:
    """The runs of a many-model command, planned and checked: each model's plan and run directory,
    the budget they share and the verdict cache they share."""

    plans: dict[str, RunPlan]
    dirs: dict[str, Path]
    budget: Budget
    judge_cache: Path


@dataclass
class ModelRun:
    """How one model's run ended: its ``summary`` (None if it raised before writing one) and the
    exception it raised, if any (a :class:`~vtb_agents.runner.budget.BudgetReached` still wrote its summary)."""

    run_dir: Path
    summary: RunSummary | None = None
    error: BaseException | None = None


def plan_models(base: RunConfig, models: Sequence[str], out: Path, *, judge_cache: Path | None = None,
                objects: Mapping[str, RunObjects] | None = None, resume: bool = False) -> ManyPlans:
    """Plan and check one run per model of ``models`` (``base`` with its ``model`` set to each): a spec
    given twice or two specs naming the same directory (:func:`~vtb_agents.rundir.leaderboard.model_dirs`),
    a spec that cannot be loaded (ValueError) or a part that fails its check
    (:class:`~vtb_agents.runner.preflight.PreflightError`) raise before anything is written.
    ``objects`` (by model: the name ``run.json`` records of a model object) stand in for specs from Python.
    ``resume``: each run continues its directory, priced as it recorded (:func:`~vtb_agents.runner.plan.plan_run`)."""
    dirs = model_dirs(models, Path(out))
    budgets = run_limiters(base)  # one registry: the judge's account is one budget, whichever model's run calls it
    plans: dict[str, RunPlan] = {}
    for spec in models:
        config = base.model_copy(update={"model": spec})
        plans[spec] = plan_run(config, (objects or {}).get(spec, NO_OBJECTS), budgets,
                               resume_from=dirs[spec] if resume else None)
    for plan in plans.values():
        run_budget(plan.records)  # a cost limit needs every model's prices: refused before any file
        require(check_plan(plan))
    spend = SpendByModel.of({plan.config.model: (plan.records.model.prices, plan.records.judge.prices)
                             for plan in plans.values()})
    return ManyPlans(plans, dirs, Budget(spend, base.cost_limit, base.token_limit),
                     judge_cache or Path(out) / JUDGE_CACHE_FILE)


def run_models(tasks: Sequence[Task], planned: ManyPlans, *, resume: bool = False,
               executor: Callable[[], Executor] = LocalExecutor, stop: threading.Event | None = None,
               progress: Mapping[str, ProgressFn] | None = None, retry_errors: bool = False,
               batch: BatchSettings | None = None) -> dict[str, ModelRun]:
    """Run every model's run of ``planned`` at once, each in its own thread with an executor of its own
    (``executor`` makes one), and return how each ended, by model. ``progress`` (by model) is each
    run's progress callback, called from that model's thread. Setting ``stop`` (or reaching the shared
    budget) stops every run: running episodes finish, every summary is written. A run that fails
    sets ``stop`` too: the command ends as soon as the others have written what they ran."""
    stop = stop or threading.Event()
    runs = {spec: ModelRun(planned.dirs[spec]) for spec in planned.plans}

    def one(spec: str) -> None:
        run = runs[spec]
        try:
            run.summary = run_suite(tasks, planned.plans[spec], run.run_dir, resume=resume,
                                    progress=(progress or {}).get(spec), judge_cache=planned.judge_cache,
                                    executor=executor(), stop=stop, retry_errors=retry_errors, checked=True,
                                    batch=batch, budget=planned.budget)
        except BaseException as exc:  # handed to the caller with the others' outcomes (run_outcome)
            run.error = exc
            stop.set()

    threads = [threading.Thread(target=contextvars.copy_context().run, args=(one, spec), name=f"vtb-model-{i}")
               for i, spec in enumerate(planned.plans)]  # the copied context keeps the caller's run_dir_scope
    for thread in threads:
        thread.start()
    for thread in threads:
        while thread.is_alive():
            thread.join(_JOIN_S)
    return runs
