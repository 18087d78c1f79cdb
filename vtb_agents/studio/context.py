"""The context of the Studio graphs: the run's :class:`~vtb_agents.config.RunConfig`, resolved into live objects.

``vtb run`` hands its graphs an :class:`~vtb_agents.strategies.base.EpisodeContext` of live objects
(model, sandbox, tools). Over the LangGraph API only JSON travels, so the Studio graphs take the
run configuration itself as their context schema (the same model ``run.json`` holds, no copy of its
fields) and build the live objects the way a run does
(its plan, :func:`vtb_agents.runner.plan.plan_run`, opened by
:func:`vtb_agents.runner.resources.open_plan`, kept open for the server's lifetime). Every
field has a default, so a run with no context works: ``model`` from ``$VTB_MODEL`` (else
``replay``), ``judge`` from ``$VTB_JUDGE`` (else ``rule``), ``tasks`` from ``$VTB_TASKS`` (else the
bundled ``sample`` suite); the rest as ``vtb run``. Example context:
``{"model": "openai:gpt-4o", "strategy": "zoom", "episode": {"max_tool_rounds": 8}}``.
"""

from __future__ import annotations

import atexit
import os
from contextlib import ExitStack
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from vtb_agents.config import RunConfig, field_error
from vtb_agents.defaults import REPLAY
from vtb_agents.judges import RubricJudge
from vtb_agents.rundir.layout import JUDGE_CACHE_FILE
from vtb_agents.runner.plan import plan_judge, plan_run
from vtb_agents.runner.resources import RunResources, open_judge, open_plan
from vtb_agents.studio.sessions import studio_root

CHAT = "studio-chat"
"""The task source a run config records for the chat graphs (no suite: network tools go live)."""
ENV_DEFAULTS = {"model": "VTB_MODEL", "judge": "VTB_JUDGE", "tasks": "VTB_TASKS"}
"""Fields a Studio run without them takes from the environment (the server's), when set there."""
STUDIO_RESUMERS = ("scripted", "simulated")
"""Who may answer a clarifying question in Studio (a person answers by resuming the thread)."""


def context_of(value: RunConfig | dict[str, Any] | None) -> RunConfig:
    """The run's context, checked (LangGraph may hand it over as the client's JSON), with the
    environment's defaults for ``model``, ``judge`` and ``tasks`` when the client set none; a bad
    value raises ValueError naming the field."""
    data = value.model_dump(exclude_unset=True) if isinstance(value, RunConfig) else dict(value or {})
    unset = {field: os.environ[env] for field, env in ENV_DEFAULTS.items() if field not in data and os.environ.get(env)}
    try:
        context = RunConfig.model_validate({**data, **unset})
    except ValidationError as exc:
        raise ValueError(f"context field {field_error(exc)}") from None
    if context.resumer not in STUDIO_RESUMERS:
        raise ValueError(f"context field resumer: must be one of {', '.join(STUDIO_RESUMERS)} in Studio, not "
                         f"{context.resumer!r} (answer a question yourself by resuming the thread)")
    return context


def chat_config(context: RunConfig) -> RunConfig:
    """The configuration of a chat graph's run: no task suite, so network tools go live."""
    return context.model_copy(update={"tasks": CHAT})


def resources_for(context: RunConfig, *, chat: bool) -> RunResources:
    """The run resources (strategy, model factory, tools, resumer, judge) of ``context``, built once
    per distinct context; bad specs raise ValueError naming them."""
    if chat and context.model == REPLAY:
        raise ValueError("model 'replay' replays a task's reference answers and has no task here: use the "
                         "'task' graph, or set context 'model' (or VTB_MODEL) to provider:model, e.g. openai:gpt-4o")
    return _resources((chat_config(context) if chat else context).model_dump_json())


@lru_cache(maxsize=8)
def _resources(config: str) -> RunResources:
    """The resources of one configuration (by its JSON: a config with ``model_kwargs`` is no hash key)."""
    return _OPEN.enter_context(open_plan(plan_run(RunConfig.model_validate_json(config)), judge_cache=_judge_cache()))


@lru_cache(maxsize=4)
def judge_for(spec: str) -> RubricJudge:
    """The judge of ``spec`` (built once per spec); LLM verdicts are cached under the Studio root."""
    return _OPEN.enter_context(open_judge(plan_judge(spec).judge, _judge_cache()))


def _judge_cache() -> Path:
    return studio_root() / JUDGE_CACHE_FILE


_OPEN = ExitStack()
"""What the Studio server keeps open (judge caches) for its lifetime; closed when it exits."""
atexit.register(_OPEN.close)
