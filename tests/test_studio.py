"""langgraph.json: every entry point loads the way the LangGraph server loads it, and draws."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from langgraph.graph.state import CompiledStateGraph

ROOT = Path(__file__).resolve().parents[1]
ENTRIES = json.loads((ROOT / "langgraph.json").read_text())["graphs"]


def load_entry(spec: str) -> object:
    path, _, attr = spec.partition(":")
    module_spec = importlib.util.spec_from_file_location(f"studio_{attr}", ROOT / path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return getattr(module, attr)


def test_every_category_is_exposed():
    assert set(ENTRIES) == {"region_switch", "hybrid_tool", "follow_up", "temporal", "progressive", "grading"}


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_entry_point_loads_and_draws(name):
    graph = load_entry(ENTRIES[name])
    assert isinstance(graph, CompiledStateGraph) and graph.name in (name, "vtb_grading")
    mermaid = graph.get_graph(xray=True).draw_mermaid()
    expected = {"judge_rubric", "aggregate"} if name == "grading" else {"model", "vision_tools", "general_tools", "observe"}
    assert all(node in mermaid for node in expected)
    assert ("clarify" in mermaid) == (name == "follow_up")
