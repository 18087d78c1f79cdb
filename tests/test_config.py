"""``vtb_agents.RunConfig``, the one typed record of a run's settings: light to import, read back from
a run's ``run.json``, and every bad value named by its field (or its flat option)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vtb_agents.config import RunConfig, RunOptionError, run_config
from vtb_agents.rundir.errors import RunError
from vtb_agents.rundir.read import read_record
from vtb_agents.rundir.records import RUN_FORMAT
from vtb_agents.runner.run import run_suite
from vtb_agents.tasks import load_tasks

ROOT = Path(__file__).resolve().parents[1]


def modules_loaded_by(*statements: str) -> set[str]:
    """The modules a fresh interpreter has loaded after running ``statements`` (this checkout first)."""
    probe = "\n".join(["import json, sys", *statements, "print(json.dumps(sorted(sys.modules)))"])
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout))


def langchain_modules(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0].startswith(("langgraph", "langchain")))


def test_importing_the_run_config_loads_neither_langgraph_nor_langchain() -> None:
    modules = modules_loaded_by("import vtb_agents.config", "import vtb_agents",
                                "assert vtb_agents.RunConfig is vtb_agents.config.RunConfig")
    assert "vtb_agents.config" in modules and "pydantic" in modules
    assert langchain_modules(modules) == []


def test_importing_the_metrics_loads_neither_langgraph_nor_langchain() -> None:
    """Summaries are computed from results alone: the tools' names, not the tools."""
    modules = modules_loaded_by("import vtb_agents.analysis.metrics")
    assert "vtb_agents.analysis.metrics" in modules and "vtb_agents.tool_names" in modules
    assert langchain_modules(modules) == []


def test_a_runs_config_reads_back_from_its_run_json(tmp_path: Path) -> None:
    config = run_config(tasks="sample", max_tool_rounds=5, history="model", critical_rule="either", tags=("a",))
    run_suite(load_tasks("sample")[:1], config, tmp_path / "run")
    assert read_record(tmp_path / "run").config == config
    recorded = json.loads((tmp_path / "run" / "run.json").read_text())["config"]
    assert recorded == config.to_dict() and recorded["episode"]["tags"] == ["a"]


def test_a_bad_run_json_is_an_error_naming_the_file_and_field(tmp_path: Path) -> None:
    with pytest.raises(RunError, match=r"is not a run directory \(no run\.json\)"):
        read_record(tmp_path)

    def record(**changes: object) -> None:
        config = {**RunConfig().to_dict(), **changes}
        (tmp_path / "run.json").write_text(json.dumps({"format_version": RUN_FORMAT,
                                                       "config": {k: v for k, v in config.items() if v != "-"}}))

    record(episode={**RunConfig().episode.model_dump(mode="json"), "history": "nope"})
    with pytest.raises(RunError, match=r"run\.json: not a readable run\.json: config\.episode\.history: Input should "
                                       r"be 'golden' or 'model'"):
        read_record(tmp_path)
    record(modle="replay")
    with pytest.raises(RunError, match=r"config\.modle: Extra inputs are not permitted"):
        read_record(tmp_path)
    record(sandbox_network=True)
    with pytest.raises(RunError, match=r"config: sandbox_network needs sandbox e2b"):
        read_record(tmp_path)
    record(judge="-")  # a recorded run states every setting: a missing one is no silent default
    with pytest.raises(RunError, match=r"run\.json: .*its config records no 'judge' setting"):
        read_record(tmp_path)
    record(episode={k: v for k, v in RunConfig().episode.model_dump(mode="json").items() if k != "history"})
    with pytest.raises(RunError, match=r"run\.json: .*its config records no 'episode\.history' setting"):
        read_record(tmp_path)


@pytest.mark.parametrize(("options", "message"), [
    ({"history": "nope"}, "history must be one of 'golden', 'model', not 'nope'"),
    ({"max_tool_rounds": 0}, "max_tool_rounds input should be greater than or equal to 1 (got 0)"),
    ({"requests_per_second": -1.0}, "requests_per_second input should be greater than 0 (got -1.0)"),
    ({"sandbox_network": True}, "sandbox_network needs sandbox e2b"),
    ({"tools_mode": "replay"}, "tools_mode replay needs tools_cache PATH"),
])
def test_run_config_names_the_flat_option_of_a_bad_value(options: dict[str, object], message: str) -> None:
    with pytest.raises(RunOptionError) as caught:
        run_config(**options)
    assert str(caught.value).startswith(message)
    assert caught.value.render(lambda name: f"--{name}").startswith(f"--{message}".replace("needs ", "needs --"))


def test_the_config_is_frozen_and_rejects_unknown_fields() -> None:
    config = RunConfig()
    with pytest.raises(ValueError, match="frozen"):
        config.model = "x"  # type: ignore[misc]
    with pytest.raises(ValueError, match="max_tool_round\n  Extra inputs"):
        RunConfig.model_validate({"episode": {"max_tool_round": 3}})
