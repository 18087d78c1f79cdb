"""The Python API: evaluate, load_tasks and task_tools, and the README's example run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage

import vtb_agents
from vtb_agents.graphs.prompts import system_prompt
from vtb_agents.models.scripted import ScriptedChatModel

README = Path(__file__).resolve().parents[1] / "README.md"


def test_evaluate_runs_the_sample_suite_offline(tmp_path):
    summary = vtb_agents.evaluate("react", tasks="sample", model="replay", judge="rule", out=tmp_path / "run",
                                  concurrency=2)
    assert summary.apr == 1.0 and summary.ars == 1.0 and summary.tasks == 20 and summary.graded == 20
    assert summary.by_category["temporal"].n == 3 and summary.run_dir == tmp_path / "run"
    assert (tmp_path / "run" / "results.jsonl").exists() and summary.strategy == "react"


def test_evaluate_takes_an_agent_factory_and_options(tmp_path):
    model = ScriptedChatModel(script=lambda messages: AIMessage("The number is 42."))

    def build(tools, *, system_prompt, middleware):
        return create_agent(model, tools, system_prompt=system_prompt, middleware=middleware)

    task = vtb_agents.load_tasks("sample", task_id="rs-finance-invoice")
    summary = vtb_agents.evaluate(build, tasks=task, out=tmp_path / "run", prompt_level="low")
    assert summary.tasks == 1 and summary.strategy.startswith("agent:") and summary.strategy.endswith("build")
    assert model.calls[0][0].content == system_prompt("low")
    with pytest.raises(TypeError, match="unknown option"):
        vtb_agents.evaluate("react", out=tmp_path / "other", max_rounds=3)


def test_the_readme_python_api_example_runs(tmp_path, monkeypatch, capsys):
    text = README.read_text(encoding="utf-8")
    section = text[text.index("### Python API"):]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("1.0 1.0 1.0 ")
    assert '"stdout": "(' in printed[1] and '"ok": true' in printed[1]
