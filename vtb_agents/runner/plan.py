"""A run resolved once, at its start: :class:`RunPlan`, the built objects next to the records that
describe them.

This module is the one place a spec string is decoded (docs/concepts/architecture.md, "How a setting
travels"): the model spec (a preset, ``provider:model``, ``replay``, ``agent:module:function``), the
judge spec, the strategy, ``--tool`` specs, the sandbox kind, the resumer and the user model. Their
decoders (:mod:`vtb_agents.models.spec`, :func:`~vtb_agents.judges.judge_choice`,
:func:`~vtb_agents.strategies.load_strategy`, :func:`~vtb_agents.sandbox.backend`,
:func:`~vtb_agents.tools.extension_tools`, :func:`~vtb_agents.graphs.resumers.load_resumer`, and
through them :mod:`vtb_agents.extensions`) are called from here only. Everything below takes the
built objects, or reads a decoded fact from :class:`PlanRecords` (``model_is_agent``,
``judge.calls_model``), never the string.

Two steps, so that a worker in another process rebuilds exactly what the driver built:
:func:`plan_records` resolves the config's specs once into :class:`PlanRecords` (picklable: the
config and the resolved model and judge, what ``run.json`` stores); :func:`build_plan` builds the
objects from those records. The driver calls both (:func:`plan_run`); a worker process or Ray actor
is sent the records and calls :func:`build_plan` alone, once (:mod:`vtb_agents.runner.worker`), with
the driver's account budgets that its executor serves it (:class:`Limiters`), so that K workers
spend one budget, not K.
"""

from __future__ import annotations

import functools
import hashlib
from collections import Counter
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.rate_limiters import BaseRateLimiter
from langchain_core.tools import BaseTool

from vtb_agents.analysis.cost import recorded_prices
from vtb_agents.config import RunConfig
from vtb_agents.defaults import OBJECT_PREFIX, REPLAY, AgentSpec
from vtb_agents.graphs.resumers import Resumer, load_resumer
from vtb_agents.judges import JudgeChoice, RubricJudge, build_judge, judge_choice
from vtb_agents.judges.batch import batch_provider
from vtb_agents.models.http import DEFAULT_REQUEST_TIMEOUT_S
from vtb_agents.models.limiter import Budgets, Caps
from vtb_agents.models.limiter import Limiters as AccountLimiters
from vtb_agents.models.presets import prices_for
from vtb_agents.models.spec import (ModelChoice, ModelFactory, chat_model, model_choice, model_factory, rate_limiter,
                                    refuse_object_name)
from vtb_agents.rundir.read import record_if_any
from vtb_agents.rundir.records import ModelRecord, RunRecord
from vtb_agents.sandbox import backend, open_backend, probe_in_background
from vtb_agents.sandbox.base import Sandbox
from vtb_agents.strategies import DEFAULT_STRATEGY, Strategy, load_strategy
from vtb_agents.tasks.sources import SAMPLE, SAMPLE_CASSETTE
from vtb_agents.tools import extension_tools, guard_tools, select_tools
from vtb_agents.tools.network import NetworkSettings

SandboxOpener = Callable[[], AbstractContextManager[Sandbox]]
__all__ = ["JudgePlan", "Limiters", "ModelFactory", "NO_OBJECTS", "PlanRecords", "RunObjects", "RunPlan",
           "SandboxOpener", "build_plan", "classifier_model", "decide_judge", "decide_model", "network_settings",
           "object_name",
           "plan_judge", "plan_records", "plan_run", "run_limiters", "sandbox_kind_opener", "sandbox_opener"]


def object_name(obj: object) -> str:
    """What ``run.json`` records of a Python object used in a run (:data:`~vtb_agents.defaults.OBJECT_PREFIX`):
    its class and the model it calls (``object:ChatOpenAI(model=gpt-4o)``), or its name."""
    model = getattr(obj, "model_name", None) or getattr(obj, "model", None)
    if isinstance(model, str):
        return f"{OBJECT_PREFIX}{type(obj).__name__}(model={model})"
    name = getattr(obj, "name", None)
    if isinstance(name, str):
        return f"{OBJECT_PREFIX}{type(obj).__name__}(name={name})"
    qualname = getattr(obj, "__qualname__", None)  # a function, such as an agent factory
    if isinstance(qualname, str):
        return f"{OBJECT_PREFIX}{getattr(obj, '__module__', '?')}.{qualname}"
    return f"{OBJECT_PREFIX}{type(obj).__name__}"


@dataclass(frozen=True)
class RunObjects:
    """Objects a run from Python uses instead of what the config's specs name (the config records
    their names, :func:`object_name`): a chat model, a judge, a strategy,
    and ``tools`` added to the run's tool set. They live in this process only (no remote workers)."""

    model: BaseChatModel | None = None
    judge: RubricJudge | None = None
    strategy: Strategy | None = None
    tools: tuple[BaseTool, ...] = ()

    def __bool__(self) -> bool:
        return any((self.model, self.judge, self.strategy, self.tools))


NO_OBJECTS = RunObjects()
"""A run of specs only (the CLI's)."""


@dataclass(frozen=True)
class PlanRecords:
    """What a plan is built from, and what ``run.json`` records of it: the run's ``config`` and its
    model and judge resolved once (presets expanded, the judge's kind told). Picklable: executors
    send it to workers in other processes, which build their objects from it (:func:`build_plan`)."""

    config: RunConfig
    model: ModelChoice
    judge: JudgeChoice

    @property
    def defers_verdicts(self) -> bool:
        """Whether the run leaves its verdicts pending for a batch grading at its end (``--judge-batch``
        with a judge that has a batch API: docs/how-to/batch-judging.md)."""
        return self.config.judge_batch and self.judge.batch_provider is not None

    @property
    def model_is_agent(self) -> bool:
        """Whether the model spec is your own agent (``agent:module:function``), which answers the turns itself."""
        return AgentSpec.parse(self.model.spec) is not None

    def model_record(self) -> ModelRecord:
        """``run.json``'s ``model``: the model as resolved."""
        return ModelRecord.model_validate(self.model.record())

    def judge_record(self) -> ModelRecord:
        """``run.json``'s ``judge``: a model's resolved settings, or only the spec of your own judge."""
        return ModelRecord.model_validate(self.judge.model.record())

    def fingerprint(self) -> str:
        """A short digest of the records: two plans built from equal records have equal fingerprints
        (a worker reports the one it built, :mod:`vtb_agents.runner.worker`)."""
        text = "\n".join((self.config.model_dump_json(), self.model_record().model_dump_json(),
                          self.judge.kind, self.judge_record().model_dump_json()))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_limiters(config: RunConfig) -> AccountLimiters:
    """A run's account budgets (one limiter per account and model, :mod:`vtb_agents.models.limiter`),
    capped by ``--rps`` and ``--max-connections``."""
    return AccountLimiters(Caps(requests_per_second=config.requests_per_second,
                                max_connections=config.max_connections))


@dataclass(frozen=True)
class Limiters:
    """The run's shared limiters, built by :func:`build_plan` and handed to every client it builds
    (agent model factory, judge, simulated user); no module below the plan builds one.

    ``budgets`` paces every OpenAI(-compatible) request of the run by the provider's rate-limit answers,
    one budget per account and model (docs/how-to/cost-and-rate-limits.md): in the driver the run's
    registry (:func:`run_limiters`), in a worker process or Ray actor the driver's, served to it by its
    executor (:mod:`vtb_agents.runner.shared_limiters`, :class:`~vtb_agents.runner.ray_executor.LimitersActor`).
    ``model`` paces the model's calls to other providers (langchain-core's limiter at ``--rps``; None: unpaced)."""

    budgets: Budgets = field(default_factory=AccountLimiters)
    model: BaseRateLimiter | None = None

    @property
    def own(self) -> AccountLimiters | None:
        """The registry itself where this process holds it (the driver: what it serves its workers and
        counts in the summary); None in a worker, whose budgets are the driver's."""
        return self.budgets if isinstance(self.budgets, AccountLimiters) else None

    def counts(self, earlier: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``summary.json``'s ``rate_limits``: what this process's registry counted, added to ``earlier``
        (a resumed run's; :meth:`~vtb_agents.models.limiter.Limiters.summary`). A worker's requests are
        counted by the driver's registry: here, ``earlier``'s counts only."""
        return (self.own or AccountLimiters()).summary(earlier)


@dataclass(frozen=True)
class RunPlan:
    """A run resolved once: its :class:`PlanRecords` (``records``) and the objects built from them:
    strategy (or your agent, behind its strategy), judge, tools (guarded), sandbox opener (a fresh
    sandbox of the run's kind per call), network settings of the network tools, model factory
    (None: the strategy calls no model), resumer and limiters. ``in_process_only``: objects from
    Python stand in for specs, so the plan cannot be rebuilt elsewhere (no remote workers)."""

    records: PlanRecords
    strategy: Strategy
    judge: RubricJudge
    tools: list[BaseTool]
    open_sandbox: SandboxOpener
    network: NetworkSettings
    models: ModelFactory | None = None
    resumer: Resumer | None = None
    limiters: Limiters = field(default_factory=Limiters)
    in_process_only: bool = False

    @property
    def config(self) -> RunConfig:
        """The run's settings."""
        return self.records.config

    @property
    def built(self) -> str:
        """What was built, in one line: the records' fingerprint and the built objects' names (strategy,
        judge, tools, whether a model). A worker reports its plan's (:mod:`vtb_agents.runner.worker`),
        which must equal the driver's: a node with another version of vtb_agents or of a plugin builds another line."""
        tools = ",".join(tool.name for tool in self.tools) or "none"
        return (f"plan {self.records.fingerprint()}: strategy {self.strategy.name}, judge {self.judge.name}, "
                f"tools {tools}, model {'yes' if self.models is not None else 'no'}")


def network_settings(config: RunConfig) -> NetworkSettings:
    """Settings of the network tools: live, or recording to / replaying from ``tools_cache``.

    Without a mode, the bundled suite replays its shipped cassette (its web pages and weather
    are authored for the demo, so live answers would not match) and other sources go live.
    """
    mode, cache = config.tools_mode, config.tools_cache
    if mode is None:
        sample = config.tasks == SAMPLE and cache is None
        mode, cache = ("replay", str(SAMPLE_CASSETTE)) if sample else ("live", cache)
    return NetworkSettings(mode=mode, cache_path=Path(cache) if cache else None)


def sandbox_opener(config: RunConfig) -> SandboxOpener:
    """Opens a sandbox of the run's kind, its backend loaded now (a bad kind raises ValueError here):
    ``sandbox_strict`` refuses anything short of full isolation, ``sandbox_network`` lets an E2B
    sandbox reach the internet (off by default)."""
    options: dict[str, Any] = {"strict": True} if config.sandbox_strict else {}
    if config.sandbox_network:
        options["network"] = True
    return functools.partial(open_backend, backend(config.sandbox), config.sandbox, None, **options)


def sandbox_kind_opener(kind: str) -> SandboxOpener:
    """Opens a sandbox of ``kind`` with the default options (Studio's threads, ``vtb sandbox``)."""
    return functools.partial(open_backend, backend(kind), kind, None)


def added_tools(config: RunConfig, objects: RunObjects) -> list[BaseTool]:
    """The tools a run adds to its set, guarded: the tool objects given from Python and those the
    specs of ``extra_tools`` name (``--tool``); a recorded object's name without its object is refused."""
    specs = [spec for spec in config.extra_tools if not spec.startswith(OBJECT_PREFIX)]
    if not objects.tools:
        for spec in config.extra_tools:
            refuse_object_name(spec, "tool")
    return [*guard_tools(list(objects.tools)), *extension_tools(specs)]


def decide_model(spec: str, extra: dict[str, Any] | None = None) -> ModelChoice:
    """The model ``spec`` resolved once, with its prices (None: unknown; ``extra``: ``--model-kwargs``)."""
    return replace(model_choice(spec, extra), prices=prices_for(spec))


def decide_judge(spec: str) -> JudgeChoice:
    """The judge ``spec`` classified once, with what the run reads of it later: its model's prices and
    the provider whose batch API can ask its verdicts (a bad spec raises ValueError naming it)."""
    choice = judge_choice(spec)
    choice = replace(choice, model=replace(choice.model, prices=prices_for(spec)))
    return replace(choice, batch_provider=batch_provider(choice))


def plan_records(config: RunConfig, resume_from: Path | None = None) -> PlanRecords:
    """The run's model and judge specs resolved, once, with their prices and the judge's batch provider
    (a spec that cannot be resolved raises ValueError, as do ``model_kwargs`` for a model that is no
    chat model: ``replay``, your agent). ``resume_from``: the run directory a resume continues, whose
    ``run.json`` (if any) gives the prices (:func:`priced_as_recorded`)."""
    records = PlanRecords(config=config, model=decide_model(config.model, config.model_kwargs),
                          judge=decide_judge(config.judge))
    if config.model_kwargs is not None and (config.model == REPLAY or records.model_is_agent):
        raise ValueError(f"--model-kwargs needs a chat model (a preset or provider:model), not {config.model!r}")
    return priced_as_recorded(records, record_if_any(resume_from))


def priced_as_recorded(records: PlanRecords, record: RunRecord | None) -> PlanRecords:
    """``records`` with the model's and judge's prices a resumed run's ``run.json`` (``record``; None:
    no run yet, ``records`` as they are) recorded at its start. A run is priced at those to its end, by
    every reader (:func:`~vtb_agents.analysis.cost.recorded_prices`): its resume's budget counts them too,
    whatever the presets of the vtb that resumes it say."""
    if record is None:
        return records
    prices = recorded_prices(record)
    return replace(records, model=replace(records.model, prices=prices.model),
                   judge=replace(records.judge, model=replace(records.judge.model, prices=prices.judge)))


def build_plan(records: PlanRecords, objects: RunObjects = NO_OBJECTS, budgets: Budgets | None = None) -> RunPlan:
    """The objects of a run, built once from its ``records`` (``objects`` from Python stand in for the
    specs that name them): the one function that builds a plan, in the driver and in every worker.
    Every client it builds (model, judge, simulated user) is paced by one :class:`Limiters`: the run's
    account ``budgets`` (a worker's: the driver's, which its executor serves it; default: new ones,
    :func:`run_limiters`). A spec that cannot be loaded or built raises ValueError naming it and the
    cause; no file is touched."""
    config = records.config
    strategy = objects.strategy or load_strategy(config.strategy_spec)
    limiters = Limiters(budgets=budgets or run_limiters(config), model=rate_limiter(config.requests_per_second))
    models = (model_factory(records.model, config.request_timeout_s, limiter=limiters.model,
                            budgets=limiters.budgets, model=objects.model)
              if strategy.needs_model else None)
    user_model = (chat_model(config.user_model, request_timeout_s=config.request_timeout_s, budgets=limiters.budgets)
                  if config.user_model else None)
    network = network_settings(config)
    tools = [*select_tools(no_tools=config.no_tools, no_vision_tool=config.no_vision_tool, network=network),
             *added_tools(config, objects)]
    clashes = sorted(name for name, n in Counter(t.name for t in tools).items() if n > 1)
    if clashes:
        raise ValueError(f"tool name(s) {', '.join(clashes)} given twice: rename the tool objects you add")
    return RunPlan(records=records, strategy=strategy,
                   judge=objects.judge or build_judge(records.judge, config.request_timeout_s, limiters.budgets),
                   tools=tools, open_sandbox=sandbox_opener(config), network=network, models=models,
                   resumer=load_resumer(config.resumer, user_model), limiters=limiters,
                   in_process_only=bool(objects))


def plan_run(config: RunConfig, objects: RunObjects = NO_OBJECTS, budgets: Budgets | None = None,
             resume_from: Path | None = None) -> RunPlan:
    """The run's plan: its specs resolved (:func:`plan_records`; ``resume_from``: the run directory a
    resume continues, priced as it recorded) and its objects built (:func:`build_plan`), ``objects`` from
    Python standing in for the specs that name them, its requests paced by ``budgets`` (default: its own,
    :func:`run_limiters`; several runs of one command share one). A spec that cannot be loaded or built
    raises ValueError naming it and the cause, a ``run.json`` to resume of another format version
    :class:`~vtb_agents.rundir.errors.FormatVersionError`; no file is written."""
    records = plan_records(config, resume_from)
    if records.model_is_agent and config.strategy != DEFAULT_STRATEGY:
        raise ValueError(f"--model {config.model} is your own agent, which answers the turns itself: "
                         f"it cannot be combined with --strategy {config.strategy}")
    if config.model_cache_only and not Path(str(config.model_cache)).is_file():
        raise ValueError(f"model cache {config.model_cache}: no such file (a cache-only run replays a recorded cache)")
    if config.sandbox == "local":  # probed while the model's libraries load: first tasks need not wait
        probe_in_background()
    return build_plan(records, objects, budgets)


@dataclass(frozen=True)
class JudgePlan:
    """A judge spec resolved once (``choice``: what ``run.json`` records) and the judge built from it
    (``vtb grade``, Studio's grading graph)."""

    choice: JudgeChoice
    judge: RubricJudge

    def record(self) -> ModelRecord:
        """``run.json``'s ``judge``."""
        return ModelRecord.model_validate(self.choice.model.record())


def plan_judge(spec: str, request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
               budgets: Budgets | None = None) -> JudgePlan:
    """The judge ``spec`` names, classified once and built (a bad spec raises ValueError naming it),
    its calls paced by ``budgets`` (default: account limiters of its own, :mod:`vtb_agents.models.limiter`)."""
    choice = decide_judge(spec)
    return JudgePlan(choice, build_judge(choice, request_timeout_s, budgets or AccountLimiters()))


def classifier_model(spec: str, request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S) -> BaseChatModel:
    """The chat model ``vtb analyze errors --model`` classifies a finished run's failures with
    (:mod:`vtb_agents.analysis.failures`), built from its ``provider:model`` spec (any other form
    raises ValueError naming it), with limiters of its own: outside any run, but decoded here as
    every spec is."""
    if ":" not in spec:
        raise ValueError(f"classifier spec {spec!r} is not 'provider:model' (e.g. 'openai:o4-mini')")
    return chat_model(spec, request_timeout_s=request_timeout_s)
