"""``agent:`` specs are decoded in one place (:meth:`AgentSpec.parse`), and every reader follows it."""

from __future__ import annotations

import pytest

from vtb_agents.defaults import AgentSpec, strategy_name
from vtb_agents.models.spec import model_choice
from vtb_agents.strategies.agent import load_agent
from vtb_agents.strategies.registry import load_strategy


@pytest.mark.parametrize(("spec", "decoded"), [
    ("agent:my_pkg.agents:build", AgentSpec("my_pkg.agents", "build")),
    ("agent:m:f", AgentSpec("m", "f")),
    ("openai:gpt-4o", None),
    ("replay", None),
    ("react", None),
    ("my_pkg.strategies:mine", None),
    ("object:ChatOpenAI(model=gpt-4o)", None),
    ("Agent:m:f", None),
])
def test_parse_decodes_agent_specs_and_passes_others(spec: str, decoded: AgentSpec | None) -> None:
    assert AgentSpec.parse(spec) == decoded
    if decoded is not None:
        assert decoded.spec == spec
        assert decoded.target == spec.removeprefix("agent:")


@pytest.mark.parametrize("spec", ["agent:", "agent:module", "agent::build", "agent:module:", "agent:a:b:c"])
def test_parse_refuses_a_malformed_agent_spec_naming_it(spec: str) -> None:
    with pytest.raises(ValueError, match=r"agent spec .* must look like 'agent:package.module:function'") as info:
        AgentSpec.parse(spec)
    assert repr(spec) in str(info.value)


@pytest.mark.parametrize("spec", ["agent:module", "agent:a:b:c"])
def test_every_reader_refuses_a_malformed_agent_spec_the_same_way(spec: str) -> None:
    for read in (load_agent, load_strategy, model_choice, lambda s: strategy_name(s, "react")):
        with pytest.raises(ValueError, match=r"must look like 'agent:package.module:function'"):
            read(spec)


def test_readers_agree_on_what_names_an_agent() -> None:
    assert strategy_name("agent:m:f", "react") == "agent:m:f"
    assert strategy_name("openai:gpt-4o", "reflect") == "reflect"
    assert model_choice("agent:m:f", {"x": 1}).record() == {"spec": "agent:m:f", "preset": None, "settings": {"x": 1},
                                                            "prices": None}
    with pytest.raises(ValueError, match="agent spec 'agent:no_such_module_xyz:f': cannot load"):
        load_strategy("agent:no_such_module_xyz:f")
