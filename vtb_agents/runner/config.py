"""What a run is: ``RunConfig`` (pure data, recorded in ``run.json``) and the one place it is built.

``vtb run``, ``vtb ablate``, the Python API (:func:`vtb_agents.api.evaluate`) and the Studio
graphs all build their config with :func:`run_config` from flat options (the names of ``vtb run``'s
options in Python form), so every default is defined once: here, in :class:`EpisodeSettings` and
in the constants they name. Opening what a config describes is
:func:`vtb_agents.runner.resources.open_resources`'s job.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Literal, get_args

from vtb_agents.defaults import (AGENT_PREFIX, DEFAULT_CRITICAL_RULE, DEFAULT_JUDGE, DEFAULT_REQUEST_TIMEOUT_S,
                                 DEFAULT_RESUMER, DEFAULT_SANDBOX, DEFAULT_STRATEGY, REPLAY, SAMPLE)
from vtb_agents.episodes.driver import EpisodeSettings, History
from vtb_agents.graphs.prompts import PromptLevel
from vtb_agents.judges.grade import CriticalRule

ToolsMode = Literal["live", "record", "replay"]
ResumerKind = Literal["scripted", "simulated", "human"]
SandboxKind = Literal["local", "e2b"]

PACING_KEYS = frozenset({"requests_per_second", "request_timeout_s"})
"""Settings that change how fast a run goes, not its results: a resume may change them."""


@dataclass(frozen=True)
class RunConfig:
    """What a run is: recorded in ``run.json`` and compared on resume. Pure data.

    ``model`` is ``replay``, a preset name (``vtb models``), ``provider:model`` or
    ``agent:module:function`` (a user's agent, which is then the strategy); ``model_kwargs`` are
    extra chat-model settings; ``strategy`` names the turn policy (:mod:`vtb_agents.strategies`).
    ``sandbox_strict`` refuses anything short of full isolation; ``sandbox_network`` lets an E2B
    sandbox reach the internet. ``tools_mode`` / ``tools_cache`` say how the network tools run
    (None: replay the shipped cassette for the bundled suite, live otherwise). ``extra_tools`` names
    the tool objects a Python run added to the tool set (:class:`~vtb_agents.runner.resources.RunObjects`);
    ``model``, ``judge`` and ``strategy`` name objects the same way (``object:...``).
    """

    model: str = REPLAY
    strategy: str = DEFAULT_STRATEGY
    judge: str = DEFAULT_JUDGE
    tasks: str = SAMPLE
    sandbox: SandboxKind = DEFAULT_SANDBOX
    sandbox_strict: bool = False
    sandbox_network: bool = False
    critical_rule: CriticalRule = DEFAULT_CRITICAL_RULE
    no_tools: bool = False
    no_vision_tool: bool = False
    resumer: ResumerKind = DEFAULT_RESUMER
    user_model: str | None = None
    tools_mode: ToolsMode | None = None
    tools_cache: str | None = None
    requests_per_second: float | None = None
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    model_kwargs: dict[str, Any] | None = None
    extra_tools: tuple[str, ...] = ()
    episode: EpisodeSettings = field(default_factory=EpisodeSettings)

    @property
    def strategy_spec(self) -> str:
        """The strategy that answers turns: the user's agent for ``agent:`` models, else ``strategy``."""
        return self.model if self.model.startswith(AGENT_PREFIX) else self.strategy

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (tuples become lists)."""
        return json.loads(json.dumps(asdict(self)))


DEFAULTS = RunConfig()
"""Every run setting at its default (the CLI options take their defaults from here)."""
EPISODE_OPTIONS = frozenset(f.name for f in dataclasses.fields(EpisodeSettings))
CONFIG_OPTIONS = frozenset(f.name for f in dataclasses.fields(RunConfig)) - {"episode"}
_CHOICES: dict[str, tuple[Any, ...]] = {
    "sandbox": get_args(SandboxKind), "critical_rule": get_args(CriticalRule), "resumer": get_args(ResumerKind),
    "tools_mode": (None, *get_args(ToolsMode)),
    "prompt_level": get_args(PromptLevel), "history": get_args(History),
}


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

    An unknown option raises TypeError, a bad value :class:`RunOptionError` (a ValueError).
    """
    unknown = sorted(set(options) - EPISODE_OPTIONS - CONFIG_OPTIONS)
    if unknown:
        raise TypeError(f"unknown option(s) {', '.join(unknown)}; "
                        f"known run options: {', '.join(sorted(EPISODE_OPTIONS | CONFIG_OPTIONS))}")
    for name, value in options.items():
        if name in _CHOICES and value not in _CHOICES[name]:
            allowed = ", ".join(str(c) for c in _CHOICES[name] if c is not None)
            raise RunOptionError(name, f"must be one of {allowed}, not {value!r}")
    if options.get("sandbox_network") and options.get("sandbox", DEFAULTS.sandbox) != "e2b":
        raise RunOptionError("sandbox_network", "needs {sandbox} e2b (the local sandbox never has network access)")
    if options.get("tools_mode") in ("record", "replay") and not options.get("tools_cache"):
        raise RunOptionError("tools_mode", f"{options['tools_mode']} needs {{tools_cache}} PATH")
    episode = EpisodeSettings(**{k: v for k, v in options.items() if k in EPISODE_OPTIONS})
    return RunConfig(episode=episode, **{k: v for k, v in options.items() if k in CONFIG_OPTIONS})
