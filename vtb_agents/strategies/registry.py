"""The strategy library and how a spec names a strategy: a built-in name, ``module:function`` for
your own or an installed one's name (entry point group ``vtb_agents.strategies``,
:mod:`vtb_agents.extensions`), or ``agent:module:function`` for your own LangChain agent behind the adapter."""

from __future__ import annotations

import dataclasses

from vtb_agents.defaults import AgentSpec
from vtb_agents.defaults import DEFAULT_STRATEGY as DEFAULT_STRATEGY  # re-exported
from vtb_agents.extensions import is_extension, load_extension
from vtb_agents.models.spec import refuse_object_name
from vtb_agents.strategies.base import Strategy
from vtb_agents.strategies.marks import marks
from vtb_agents.strategies.plan import plan
from vtb_agents.strategies.react import react
from vtb_agents.strategies.reflect import reflect
from vtb_agents.strategies.zoom import zoom

BUILTIN: dict[str, Strategy] = {s.name: s for s in (react, zoom, marks, plan, reflect)}


def load_strategy(spec: str) -> Strategy:
    """The strategy ``spec`` names; a bad spec raises ValueError naming it and what was expected.

    ``module:function`` (or an installed strategy's name) may name a :class:`Strategy` or a function
    returning a compiled turn graph.

    >>> load_strategy("zoom").name
    'zoom'
    """
    if spec in BUILTIN:
        return BUILTIN[spec]
    refuse_object_name(spec, "strategy")
    if AgentSpec.parse(spec) is not None:
        from vtb_agents.strategies.agent import agent_strategy, load_agent  # langchain.agents: only here

        return agent_strategy(load_agent(spec), spec)
    if not is_extension("strategies", spec):
        raise ValueError(f"unknown strategy {spec!r}: choose one of {', '.join(BUILTIN)}, an installed one "
                         "(`vtb strategies`), or name your own as 'package.module:function'")
    target = load_extension("strategies", spec)
    if isinstance(target, Strategy):
        return dataclasses.replace(target, name=spec)  # the spec is what reproduces the run
    if callable(target):
        return Strategy(name=spec, summary=(target.__doc__ or "").strip().splitlines()[0] if target.__doc__ else spec,
                        build=target, source="user code")
    raise ValueError(f"strategy {spec!r} is neither a Strategy nor a function returning a turn graph")
