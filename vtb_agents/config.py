"""What a run is: ``RunConfig``, one typed record of a run's settings (pydantic, no LangChain or LangGraph).

One model, many uses: it is what ``run.json`` holds (``vtb_agents.rundir.read.read_record(path).config``
reads it back, after checking the file's format version),
the context schema of the Studio graphs, what ``vtb run``'s options build (their flags and help
come from the fields here, :mod:`vtb_agents.cli.options`), and what the Python API
(:func:`vtb_agents.api.evaluate`) and the runner take. :func:`run_config` builds one from flat
options (the names of ``vtb run``'s options in Python form); every default is defined once, in
:mod:`vtb_agents.defaults`. Resolving what a config describes is
:func:`vtb_agents.runner.plan.plan_run`'s job.
"""

from __future__ import annotations

from typing import Any, Callable, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from vtb_agents.defaults import (DEFAULT_CODE_TIMEOUT_S, DEFAULT_CRITICAL_RULE, DEFAULT_EPOCHS, DEFAULT_HISTORY,
                                 DEFAULT_JUDGE, DEFAULT_MAX_IMAGE_SIDE, DEFAULT_MAX_TOOL_ROUNDS,
                                 DEFAULT_NATIVE_TOOL_IMAGES, DEFAULT_PROMPT_LEVEL, DEFAULT_REQUEST_TIMEOUT_S,
                                 DEFAULT_RESUMER, DEFAULT_SANDBOX, DEFAULT_STRATEGY, REPLAY, SAMPLE, strategy_name)

__all__ = ["CriticalRule", "EpisodeSettings", "History", "PromptLevel", "ResumerKind", "RunConfig", "RunOptionError",
           "ToolsMode", "run_config"]

ToolsMode = Literal["live", "record", "replay"]
ResumerKind = Literal["scripted", "simulated", "human"]
PromptLevel = Literal["low", "mid", "high"]
History = Literal["golden", "model"]
CriticalRule = Literal["weight", "flag", "either"]
"""Which rubrics count as critical: by ``weight`` (>= 4), by the dataset's ``flag``, or ``either``."""

PACING_KEYS = frozenset({"requests_per_second", "max_connections", "request_timeout_s", "model_cache",
                         "model_cache_only", "cost_limit", "token_limit"})
"""Settings that change how a run goes (how fast, whether answers come from the model cache, how far its
budget lets it go), not its results: a resume may change them (e.g. drop ``model_cache_only`` to fill in
what the cache missed, or raise ``cost_limit`` to go on past the limit it stopped at)."""


class EpisodeSettings(BaseModel):
    """Knobs of one episode (recorded in the run so that results say how they were made)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_tool_rounds: int = Field(default=DEFAULT_MAX_TOOL_ROUNDS, ge=1,
                                 description="Tool rounds allowed per turn.")
    prompt_level: PromptLevel = Field(default=DEFAULT_PROMPT_LEVEL,
                                      description="System prompt strength: low, mid, high.")
    history: History = Field(default=DEFAULT_HISTORY,
                             description="Earlier assistant turns: the 'golden' answers or the 'model''s own.")
    max_image_side: int = Field(default=DEFAULT_MAX_IMAGE_SIDE, ge=64,
                                description="Images sent to the model are downscaled to this longer side.")
    code_timeout_s: float = Field(default=DEFAULT_CODE_TIMEOUT_S, gt=0, description=(
        "Seconds one code call may run (and one call of a tool you add, --tool)."))
    native_tool_images: bool = Field(default=DEFAULT_NATIVE_TOOL_IMAGES,
                                     description="Put new images inside tool results (Anthropic, Responses API).")
    prompt_cache: bool = Field(default=True, description=(
        "Mark the stable prefix of each request for the provider's prompt cache (Anthropic cache_control "
        "breakpoints; OpenAI caches prefixes itself)."))
    task_timeout_s: Optional[float] = Field(default=None, gt=0, description=(
        "Seconds a task's episode may take: checked at every model call, tool call and graph step (agent: runs "
        "too); stops running code."))
    task_token_limit: Optional[int] = Field(default=None, ge=1, description=(
        "Tokens (input + output) a task's model calls may use: the call that passes it ends the task as "
        "token_limit, a model-side outcome (graded, its finished turns kept)."))
    tags: tuple[str, ...] = Field(default=(), description="Extra tags of the episode's LangSmith traces.")

class RunConfig(BaseModel):
    """What a run is: recorded in ``run.json`` and compared on resume. Pure data.

    ``model`` is ``replay``, a preset name (``vtb models``), ``provider:model`` or
    ``agent:module:function`` (a user's agent, which is then the strategy); ``model_kwargs`` are
    extra chat-model settings; ``strategy`` names the turn policy (:mod:`vtb_agents.strategies`).
    ``sandbox_strict`` refuses anything short of full isolation; ``sandbox_network`` lets an E2B
    sandbox reach the internet. ``tools_mode`` / ``tools_cache`` say how the network tools run
    (None: replay the shipped cassette for the bundled suite, live otherwise). ``model_cache`` is
    the model-call cache (:mod:`vtb_agents.models.cache`), ``model_cache_only`` replays from it
    without calling any model. ``extra_tools`` names
    the tools added to the tool set: ``module:attr`` specs (``--tool``), or tool objects a Python
    run gave (:class:`~vtb_agents.runner.plan.RunObjects`) by their names (``object:...``), as
    ``model``, ``judge`` and ``strategy`` name objects. ``sandbox``, ``judge`` and ``strategy`` take
    ``module:attr`` specs and installed extensions' names too (:mod:`vtb_agents.extensions`). A bad value
    raises pydantic's ``ValidationError`` naming the field.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str = Field(default=REPLAY, description=(
        "'replay', a preset (`vtb models`), 'provider:model' (init_chat_model) or 'agent:module:function'."))
    strategy: str = Field(default=DEFAULT_STRATEGY, description=(
        "Turn policy: react, zoom, marks, plan, reflect (see 'vtb strategies'), or 'module:function' for your own."))
    judge: str = Field(default=DEFAULT_JUDGE,
                       description="'rule' (deterministic checks only) or 'provider:model' (LLM judge).")
    tasks: str = Field(default=SAMPLE, description="Task source: 'sample', a folder, parquet, 'hf:...'.")
    sandbox: str = Field(default=DEFAULT_SANDBOX, description=(
        "Where code runs: local, e2b, 'module:Class' for your own backend or an installed one (`vtb sandboxes`)."))
    sandbox_strict: bool = Field(default=False, description="Refuse to run code without full isolation (bwrap).")
    sandbox_network: bool = Field(default=False, description=(
        "Let the E2B sandbox reach the internet (off by default; recorded in the results)."))
    judge_batch: bool = Field(default=False, description=(
        "Judge the run's verdicts through the judge provider's batch API (half price) once its episodes are "
        "done; meanwhile they are pending (docs/how-to/batch-judging.md)."))
    critical_rule: CriticalRule = Field(default=DEFAULT_CRITICAL_RULE,
                                        description="Critical rubrics by 'weight' (>= 4), 'flag' or 'either'.")
    no_tools: bool = Field(default=False, description="Give the model no tools at all.")
    no_vision_tool: bool = Field(default=False, description="Do not offer python_image_processing (ablation).")
    resumer: ResumerKind = Field(default=DEFAULT_RESUMER,
                                 description="Who answers clarifying questions: scripted, simulated, human.")
    user_model: Optional[str] = Field(default=None, description="provider:model of the simulated user.")
    tools_mode: Optional[ToolsMode] = Field(default=None, description=(
        "Network tools: live, record or replay (default: replay for 'sample', else live)."))
    tools_cache: Optional[str] = Field(default=None, description="Record/replay cassette of the network tools.")
    requests_per_second: Optional[float] = Field(default=None, gt=0, description=(
        "A cap: at most this many requests per second to each account and model (agent, judge and simulated "
        "user together); without it the pace follows the provider's rate-limit headers."))
    max_connections: Optional[int] = Field(default=None, ge=1, description=(
        "A cap: at most this many requests in flight to each account and model; without it the number adapts "
        "to the provider's answers (docs/how-to/cost-and-rate-limits.md)."))
    request_timeout_s: float = Field(default=DEFAULT_REQUEST_TIMEOUT_S, gt=0, description=(
        "Seconds a model or judge HTTP request may take (never past the task's --task-timeout)."))
    cost_limit: Optional[float] = Field(default=None, gt=0, description=(
        "USD the run may spend (model and judge, at the presets' prices): once reached no task starts, running "
        "tasks finish, and a --resume with a higher limit continues (docs/how-to/cost-and-rate-limits.md)."))
    token_limit: Optional[int] = Field(default=None, ge=1, description=(
        "Tokens (model and judge, input + output) the run may use: once reached no task starts, running tasks "
        "finish, and a --resume with a higher limit continues."))
    model_cache: Optional[str] = Field(default=None, description=(
        "SQLite file of model responses by request: identical requests are answered from it, new ones stored."))
    model_cache_only: bool = Field(default=False, description=(
        "Answer every model call from --model-cache, calling no model: a miss stops the run, naming its task, "
        "turn and step."))
    model_kwargs: Optional[dict[str, Any]] = Field(default=None, description=(
        "JSON object of extra chat-model settings, e.g. '{\"reasoning_effort\": \"low\"}' or a base_url."))
    epochs: int = Field(default=DEFAULT_EPOCHS, ge=1, description=(
        "Run each task this many times, as independent episodes (own thread, own sandbox); summary.json then "
        "has pass_at_k and pass_hat_k (docs/concepts/epochs.md)."))
    extra_tools: tuple[str, ...] = Field(default=(), description=(
        "A tool to add to the agent's set: 'module:attr' naming a LangChain BaseTool, or an installed "
        "tool's name (`vtb tools`); repeatable."))
    episode: EpisodeSettings = Field(default_factory=EpisodeSettings)

    @model_validator(mode="after")
    def _consistent(self) -> RunConfig:
        """Settings that only make sense together (the error names the option at fault)."""
        if self.sandbox_network and self.sandbox == "local":
            raise _conflict("sandbox_network", "needs {sandbox} e2b (the local sandbox never has network access)")
        if self.tools_mode in ("record", "replay") and not self.tools_cache:
            raise _conflict("tools_mode", f"{self.tools_mode} needs {{tools_cache}} PATH")
        if self.model_cache_only and not self.model_cache:
            raise _conflict("model_cache_only", "needs {model_cache} PATH (the cache to replay)")
        return self

    @property
    def strategy_spec(self) -> str:
        """The strategy that answers turns: the user's agent for ``agent:`` models, else ``strategy``."""
        return strategy_name(self.model, self.strategy)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (tuples become lists), as ``run.json`` records it."""
        return self.model_dump(mode="json")


DEFAULTS = RunConfig()
"""Every run setting at its default (the CLI options take their defaults from here)."""
EPISODE_OPTIONS = frozenset(EpisodeSettings.model_fields)
CONFIG_OPTIONS = frozenset(RunConfig.model_fields) - {"episode"}


def complete_record(config: Any) -> Any:
    """``config`` as recorded (``run.json``), checked to hold every setting: a recorded run states
    all of them, so a missing one is a damaged file (ValueError naming it), never a silent default."""
    if isinstance(config, dict):
        episode = config.get("episode")
        missing = [name for name in RunConfig.model_fields if name not in config]
        missing += [f"episode.{name}" for name in EpisodeSettings.model_fields
                    if isinstance(episode, dict) and name not in episode]
        if missing:
            raise ValueError(f"its config records no {missing[0]!r} setting")
    return config


def _conflict(option: str, problem: str) -> PydanticCustomError:
    """The error of ``option`` set against another setting; ``problem`` names options as ``{name}``."""
    plain = problem.format(**{name: name for name in EPISODE_OPTIONS | CONFIG_OPTIONS})
    return PydanticCustomError("run_option", "{option} " + plain.replace("{", "{{").replace("}", "}}"),
                               {"option": option, "problem": problem})


def field_error(exc: ValidationError, prefix: str = "") -> str:
    """The first error of ``exc`` as one line naming its field (``config.episode.history: ...``)."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in (prefix, *first["loc"]) if part != "")
    if first["type"] == "run_option":
        return f"{where + ': ' if where else ''}{first['msg']}"
    return f"{where}: {first['msg']} (got {first.get('input')!r})"


class RunOptionError(ValueError):
    """A run option with a bad value; ``render`` names the options the caller's way (CLI flags)."""

    def __init__(self, option: str, problem: str) -> None:
        self.option, self.problem = option, problem
        super().__init__(self.render(str))

    def render(self, name: Callable[[str], str]) -> str:
        """The message with option names given by ``name`` (``{other}`` in the problem names another)."""
        mentioned = {key: name(key) for key in EPISODE_OPTIONS | CONFIG_OPTIONS}
        return f"{name(self.option)} {self.problem.format(**mentioned)}"


def run_config(**options: Any) -> RunConfig:
    """A ``RunConfig`` from flat options: ``RunConfig``'s fields and ``EpisodeSettings``'s
    (``max_tool_rounds``, ``prompt_level``, ``history``, ``max_image_side``, ``code_timeout_s``,
    ``native_tool_images``, ``task_timeout_s``, ``tags``); an option left out keeps its default.

    An unknown option raises TypeError, a bad value :class:`RunOptionError` (a ValueError) naming it.
    """
    unknown = sorted(set(options) - EPISODE_OPTIONS - CONFIG_OPTIONS)
    if unknown:
        raise TypeError(f"unknown option(s) {', '.join(unknown)}; "
                        f"known run options: {', '.join(sorted(EPISODE_OPTIONS | CONFIG_OPTIONS))}")
    episode = {k: v for k, v in options.items() if k in EPISODE_OPTIONS}
    try:
        return RunConfig.model_validate({**{k: v for k, v in options.items() if k in CONFIG_OPTIONS},
                                         "episode": episode})
    except ValidationError as exc:
        raise _option_error(exc) from None


def _option_error(exc: ValidationError) -> RunOptionError:
    """The first error of a ``RunConfig`` built from flat options, as the error of that flat option."""
    first = exc.errors()[0]
    ctx = first.get("ctx") or {}
    if first["type"] == "run_option":
        return RunOptionError(ctx["option"], ctx["problem"])
    option = str(first["loc"][1] if first["loc"][:1] == ("episode",) and len(first["loc"]) > 1 else first["loc"][0])
    if first["type"] == "literal_error":
        problem = f"must be one of {ctx['expected'].replace(' or ', ', ')}, not {first['input']!r}"
    else:
        problem = f"{first['msg'][0].lower()}{first['msg'][1:]} (got {first['input']!r})"
    return RunOptionError(option, problem.replace("{", "{{").replace("}", "}}"))
