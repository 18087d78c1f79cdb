"""The JSON context of the Studio graphs: plain fields a client sends, resolved into live objects.

``vtb run`` hands its graphs an :class:`~vtb_agents.strategies.base.EpisodeContext` of live objects
(model, sandbox, tools). Over the LangGraph API only JSON travels, so the Studio graphs take a
:class:`StudioContext` instead and build the live objects themselves, the way a run does
(:func:`vtb_agents.runner.resources.open_resources`, kept open for the server's lifetime). Every
field has a default, so a run with no context works: ``model`` from ``$VTB_MODEL`` (else
``replay``), ``judge`` from ``$VTB_JUDGE`` (else ``rule``), ``tasks`` from ``$VTB_TASKS`` (else the
bundled ``sample`` suite); the rest as ``vtb run``.
"""

from __future__ import annotations

import atexit
import os
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import TypeAdapter, ValidationError

from vtb_agents.episodes.driver import EpisodeSettings
from vtb_agents.judges import RubricJudge, load_judge
from vtb_agents.models.spec import REPLAY
from vtb_agents.rundir.layout import JUDGE_CACHE_FILE
from vtb_agents.runner.config import DEFAULTS, RunConfig, run_config
from vtb_agents.runner.resources import RunResources, open_judge, open_resources
from vtb_agents.studio.sessions import studio_root

DEFAULT_MODEL = DEFAULTS.model
DEFAULT_JUDGE = DEFAULTS.judge
_EPISODE = DEFAULTS.episode
CHAT = "studio-chat"
"""The task source a run config records for the chat graphs (no suite: network tools go live)."""


def _env(name: str, default: str) -> str:
    return os.environ.get(name) or default


@dataclass(frozen=True)
class StudioContext:
    """What a Studio run is configured with: the settings of ``vtb run``, as JSON fields.

    Example context: ``{"model": "openai:gpt-4o", "strategy": "zoom", "max_tool_rounds": 8}``.
    ``model`` is ``replay`` (the task graph only: it replays the task's reference), ``provider:model``
    or ``agent:module:function``; ``judge`` is ``rule`` or ``provider:model``; ``tasks`` is the
    suite the task graph looks ``task_id`` up in. ``resumer`` answers a clarifying question when a
    follow-up task is resumed without a reply (``scripted``: the task's next prompt).
    """

    model: str = field(default_factory=lambda: _env("VTB_MODEL", DEFAULT_MODEL))
    judge: str = field(default_factory=lambda: _env("VTB_JUDGE", DEFAULT_JUDGE))
    strategy: str = DEFAULTS.strategy
    tasks: str = field(default_factory=lambda: _env("VTB_TASKS", DEFAULTS.tasks))
    sandbox: Literal["local", "e2b"] = DEFAULTS.sandbox
    max_tool_rounds: int = _EPISODE.max_tool_rounds
    prompt_level: Literal["low", "mid", "high"] = _EPISODE.prompt_level
    history: Literal["golden", "model"] = _EPISODE.history
    max_image_side: int = _EPISODE.max_image_side
    code_timeout_s: float = _EPISODE.code_timeout_s
    native_tool_images: bool = _EPISODE.native_tool_images
    no_tools: bool = DEFAULTS.no_tools
    no_vision_tool: bool = DEFAULTS.no_vision_tool
    critical_rule: Literal["weight", "flag", "either"] = DEFAULTS.critical_rule
    resumer: Literal["scripted", "simulated"] = "scripted"
    user_model: str | None = None
    tools_mode: Literal["live", "record", "replay"] | None = None
    tools_cache: str | None = None

    def episode_settings(self) -> EpisodeSettings:
        """The episode knobs of this context."""
        return self.run_config(chat=True).episode

    def run_config(self, *, chat: bool) -> RunConfig:
        """The equivalent ``vtb run`` configuration (``chat``: no task suite, network tools live)."""
        return run_config(**{**asdict(self), "tasks": CHAT if chat else self.tasks})


_CHECK = TypeAdapter(StudioContext)


def context_of(value: StudioContext | dict | None) -> StudioContext:
    """The run's context, defaults filled in and every field checked (LangGraph builds the object
    from the client's JSON unchecked); a bad value raises ValueError naming the field."""
    data = asdict(value) if isinstance(value, StudioContext) else (value or {})
    try:
        return _CHECK.validate_python(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ValueError(f"context field {where!r}: {first['msg']} (got {first.get('input')!r})") from None


@lru_cache(maxsize=8)
def resources_for(context: StudioContext, *, chat: bool) -> RunResources:
    """The run resources (strategy, model factory, tools, resumer, judge) of ``context``, built once
    per distinct context; bad specs raise ValueError naming them."""
    if chat and context.model == REPLAY:
        raise ValueError("model 'replay' replays a task's reference answers and has no task here: use the "
                         "'task' graph, or set context 'model' (or VTB_MODEL) to provider:model, e.g. openai:gpt-4o")
    return _OPEN.enter_context(open_resources(context.run_config(chat=chat), judge_cache=_judge_cache()))


@lru_cache(maxsize=4)
def judge_for(spec: str) -> RubricJudge:
    """The judge of ``spec`` (built once per spec); LLM verdicts are cached under the Studio root."""
    return _OPEN.enter_context(open_judge(load_judge(spec), _judge_cache()))


def _judge_cache() -> Path:
    return studio_root() / JUDGE_CACHE_FILE


_OPEN = ExitStack()
"""What the Studio server keeps open (judge caches) for its lifetime; closed when it exits."""
atexit.register(_OPEN.close)
