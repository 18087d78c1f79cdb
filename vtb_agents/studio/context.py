"""The JSON context of the Studio graphs: plain fields a client sends, resolved into live objects.

``vtb run`` hands its graphs an :class:`~vtb_agents.strategies.base.EpisodeContext` of live objects
(model, sandbox, tools). Over the LangGraph API only JSON travels, so the Studio graphs take a
:class:`StudioContext` instead and build the live objects themselves, the way a run does
(:func:`vtb_agents.runner.run.build_resources`). Every field has a default, so a run with no
context works: ``model`` from ``$VTB_MODEL`` (else ``replay``), ``judge`` from ``$VTB_JUDGE`` (else
``rule``), ``tasks`` from ``$VTB_TASKS`` (else the bundled ``sample`` suite); the rest as ``vtb run``.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Literal

from pydantic import TypeAdapter, ValidationError

from vtb_agents.episodes.driver import EpisodeSettings
from vtb_agents.judges import RubricJudge, load_judge
from vtb_agents.models.spec import REPLAY
from vtb_agents.runner.run import JUDGE_CACHE_FILE, RunConfig, RunResources, build_resources, with_cache
from vtb_agents.strategies import DEFAULT_STRATEGY
from vtb_agents.strategies.base import DEFAULT_MAX_IMAGE_SIDE, DEFAULT_MAX_TOOL_ROUNDS
from vtb_agents.studio.sessions import studio_root
from vtb_agents.tasks.sources import SAMPLE
from vtb_agents.tools.python_tools import DEFAULT_CODE_TIMEOUT_S

DEFAULT_MODEL = REPLAY
DEFAULT_JUDGE = "rule"
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
    strategy: str = DEFAULT_STRATEGY
    tasks: str = field(default_factory=lambda: _env("VTB_TASKS", SAMPLE))
    sandbox: Literal["local", "e2b"] = "local"
    max_tool_rounds: int = DEFAULT_MAX_TOOL_ROUNDS
    prompt_level: Literal["low", "mid", "high"] = "high"
    history: Literal["golden", "model"] = "golden"
    max_image_side: int = DEFAULT_MAX_IMAGE_SIDE
    code_timeout_s: float = DEFAULT_CODE_TIMEOUT_S
    native_tool_images: bool = False
    no_tools: bool = False
    no_vision_tool: bool = False
    critical_rule: Literal["weight", "flag", "either"] = "weight"
    resumer: Literal["scripted", "simulated"] = "scripted"
    user_model: str | None = None
    tools_mode: Literal["live", "record", "replay"] | None = None
    tools_cache: str | None = None

    def episode_settings(self) -> EpisodeSettings:
        """The episode knobs of this context."""
        return EpisodeSettings(max_tool_rounds=self.max_tool_rounds, prompt_level=self.prompt_level,
                               history=self.history, max_image_side=self.max_image_side,
                               code_timeout_s=self.code_timeout_s, native_tool_images=self.native_tool_images)

    def run_config(self, *, chat: bool) -> RunConfig:
        """The equivalent ``vtb run`` configuration (``chat``: no task suite, network tools live)."""
        return RunConfig(model=self.model, strategy=self.strategy, judge=self.judge, tasks=CHAT if chat else self.tasks,
                         sandbox=self.sandbox, critical_rule=self.critical_rule, no_tools=self.no_tools,
                         no_vision_tool=self.no_vision_tool, resumer=self.resumer, user_model=self.user_model,
                         tools_mode=self.tools_mode, tools_cache=self.tools_cache, episode=self.episode_settings())


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
    return build_resources(context.run_config(chat=chat), judge_for(context.judge))


@lru_cache(maxsize=4)
def judge_for(spec: str) -> RubricJudge:
    """The judge of ``spec`` (built once per spec); LLM verdicts are cached under the Studio root."""
    return with_cache(load_judge(spec), studio_root() / JUDGE_CACHE_FILE)
