"""A run's budget: ``--cost-limit USD`` and ``--token-limit N``, checked as results come in.

Why: a 1,204-task run against a paid provider must be able to stop at a sum the user chose. What a
run spent is counted from its results (those of earlier sessions included, on ``--resume``): the
tokens the provider billed (calls the model cache answered cost nothing, as in ``summary.json``'s
``cost``), model and judge, priced by :func:`vtb_agents.analysis.cost.cost_of` at the presets' prices,
the function the summary's cost uses. Once the spent cost or tokens reach a limit, no task starts;
running tasks finish (so a run ends within one task's cost of the limit, times the tasks running at
once), the summary is written and the run raises :class:`BudgetReached`, whose one line names the
limit; a ``--resume`` with a higher limit continues (the limits are pacing settings,
:data:`vtb_agents.config.PACING_KEYS`). A cost limit needs the prices of every model that is paid
for: a model or judge without known prices is refused before the run starts (:func:`run_budget`).
See docs/how-to/cost-and-rate-limits.md.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Mapping

from vtb_agents.analysis.cost import cost_of
from vtb_agents.models.presets import Prices
from vtb_agents.results import TaskResult, TokenUsage
from vtb_agents.rundir.errors import StoppedRun

if TYPE_CHECKING:  # the plan loads LangChain: the CLI imports this module before it builds one
    from vtb_agents.runner.plan import PlanRecords

__all__ = ["Budget", "BudgetReached", "Spend", "SpendByModel", "run_budget"]


class BudgetReached(StoppedRun):
    """The run spent its ``--cost-limit`` or ``--token-limit``: the tasks that ran are saved and
    summarized; ``--resume`` with a higher limit continues (the CLI prints that command)."""


def billed_tokens(usage: TokenUsage) -> int:
    """Input and output tokens of ``usage`` (cache reads and writes are part of the input)."""
    return usage.input_tokens + usage.output_tokens


@dataclass
class Spend:
    """What a run's results spent so far: ``usd`` (the part whose price is known) and ``tokens``, of
    the model and the judge together, calls answered by the model cache left out (they cost nothing)."""

    model_prices: Prices | None
    judge_prices: Prices | None
    usd: float = 0.0
    tokens: int = 0
    unpriced: int = 0
    """Results whose cost is unknown (a price not known, a call whose provider reported no usage)."""

    def add(self, result: TaskResult) -> None:
        """Count ``result``'s billed tokens and their cost."""
        if result.usage is None:
            return
        usage = result.usage
        billed = ((usage.model - usage.model_from_cache, self.model_prices),
                  (usage.judge - usage.judge_from_cache, self.judge_prices))
        costs = [cost_of(tokens, prices) for tokens, prices in billed]
        self.tokens += sum(billed_tokens(tokens) for tokens, _ in billed)
        self.usd = round(self.usd + sum(cost or 0.0 for cost in costs), 6)
        self.unpriced += any(cost is None for cost in costs)

    def add_all(self, results: Iterable[TaskResult]) -> Spend:
        """Count every one of ``results``; returns itself."""
        for result in results:
            self.add(result)
        return self


@dataclass
class SpendByModel(Spend):
    """What the runs of a many-model command spent together (``vtb run --model A --model B``): each
    result counted by the :class:`Spend` of its model (``by_model``, keyed by the model spec a result
    records), ``usd``, ``tokens`` and ``unpriced`` their sums. Thread-safe: the models run at once."""

    by_model: Mapping[str, Spend] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def of(cls, prices: Mapping[str, tuple[Prices | None, Prices | None]]) -> SpendByModel:
        """Nothing spent yet by the models of ``prices`` (model spec: its model's and judge's prices)."""
        return cls(None, None, by_model={spec: Spend(model, judge) for spec, (model, judge) in prices.items()})

    def add(self, result: TaskResult) -> None:
        """Count ``result`` with its model's prices (a model not in ``by_model`` is a KeyError: a bug)."""
        with self._lock:
            self.by_model[result.model].add(result)
            spends = self.by_model.values()
            self.usd = round(sum(spend.usd for spend in spends), 6)
            self.tokens = sum(spend.tokens for spend in spends)
            self.unpriced = sum(spend.unpriced for spend in spends)


@dataclass
class Budget:
    """The run's limits (None: no limit) and its :class:`Spend`; :attr:`reached` says which limit it reached."""

    spend: Spend
    cost_limit: float | None = None
    token_limit: int | None = None

    @property
    def reached(self) -> str | None:
        """The one line naming the limit the run reached (and what it spent), or None."""
        if self.cost_limit is not None and self.spend.usd >= self.cost_limit:
            return f"cost limit reached: ${self.spend.usd:.6f} spent of --cost-limit {self.cost_limit:g}"
        if self.token_limit is not None and self.spend.tokens >= self.token_limit:
            return f"token limit reached: {self.spend.tokens} tokens used of --token-limit {self.token_limit}"
        return None


def run_budget(records: PlanRecords, done: Iterable[TaskResult] = ()) -> Budget:
    """The budget of a run of ``records`` (its config's ``cost_limit`` and ``token_limit``, its model's and
    judge's prices as the plan looked them up), with what its ``done`` results spent. A cost limit with
    a model or an LLM judge whose prices are not known raises ValueError naming it (its spending could
    not be counted)."""
    config, judge = records.config, records.judge
    model_prices, judge_prices = records.model.prices, judge.prices
    if config.cost_limit is not None:
        if model_prices is None:
            raise ValueError(f"--cost-limit needs the model's prices, and {config.model!r} has none: use a preset "
                             "with prices (`vtb models`) or --token-limit")
        if judge.calls_model and judge_prices is None:
            raise ValueError(f"--cost-limit needs the judge's prices, and {judge.spec!r} has none: use a preset "
                             "with prices (`vtb models`) or --token-limit")
    return Budget(Spend(model_prices, judge_prices).add_all(done), config.cost_limit, config.token_limit)
