"""One record per fact: the run's settings (``run.config``, nothing beside it), an episode's recorded
settings (``EpisodeSettings``'s own fields, extended), and one task filter for the CLI and the API."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import vtb_agents
from vtb_agents.config import EpisodeSettings, RunConfig, run_config
from vtb_agents.results import EpisodeRecordSettings
from vtb_agents.rundir.read import FinishedRun, RunMeta, load_run, open_finished_run
from vtb_agents.tasks import load_tasks
from vtb_agents.tasks.errors import TaskLoadError
from vtb_agents.tasks.select import TaskFilter


def test_episode_record_settings_extend_the_episode_settings_instead_of_declaring_them_again() -> None:
    assert issubclass(EpisodeRecordSettings, EpisodeSettings)
    own = set(EpisodeRecordSettings.__annotations__)  # the fields it declares itself
    assert own & set(EpisodeSettings.model_fields) == set()
    # what the episode actually had, resolved (not the option's value): the strategy that answered (an agent's
    # spec too), the resumer's name, the network the sandbox backend reports
    assert own & set(RunConfig.model_fields) == {"strategy", "resumer", "sandbox_network"}
    assert set(EpisodeSettings.model_fields) < set(EpisodeRecordSettings.model_fields)


def test_a_result_records_every_episode_setting_of_its_run(tmp_path: Path) -> None:
    config = run_config(tasks="sample", max_image_side=512, code_timeout_s=7.5, tags=("x",), history="model")
    task = [t for t in load_tasks("sample") if t.id == "rs-finance-invoice"]
    evaluation = vtb_agents.evaluate("react", tasks=task, out=tmp_path / "run", max_image_side=512,
                                     code_timeout_s=7.5, tags=("x",), history="model")
    (result,) = evaluation.results
    recorded = result.episode.settings
    assert recorded is not None and recorded.strategy == "react" and recorded.graph == "region_switch"
    assert EpisodeSettings.model_validate(recorded.model_dump(include=set(EpisodeSettings.model_fields))) \
        == config.episode
    finished = open_finished_run(tmp_path / "run")
    assert finished.results[0].episode.settings == recorded  # as results.jsonl holds it


def test_a_runs_settings_are_one_record(tmp_path: Path) -> None:
    """``run.json``'s settings are read as ``run.config``: no reader carries a second copy beside it."""
    for view in (FinishedRun, RunMeta):
        assert [f.name for f in dataclasses.fields(view) if f.name in ("settings", "config")] == []
    vtb_agents.evaluate("react", tasks=[t for t in load_tasks("sample") if t.id == "rs-finance-invoice"],
                        out=tmp_path / "run", max_tool_rounds=4)
    assert open_finished_run(tmp_path / "run").run.config.episode.max_tool_rounds == 4
    assert load_run(tmp_path / "run").run.config.episode.max_tool_rounds == 4


def test_one_task_filter_selects_for_the_cli_and_the_api() -> None:
    from vtb_agents.cli.options import select_tasks

    sample = load_tasks("sample")
    chosen = TaskFilter(categories=frozenset({"temporal"}), limit=2)
    expected = [t.id for t in chosen.apply(sample)]
    assert len(expected) == 2 and all(t.category == "temporal" for t in chosen.apply(sample))
    assert [t.id for t in vtb_agents.load_tasks("sample", category="temporal", limit=2)] == expected
    assert [t.id for t in select_tasks("sample", ["temporal"], [], 2)] == expected
    one = sample[3].id
    assert [t.id for t in vtb_agents.load_tasks("sample", task_id=one)] == [one]
    assert [t.id for t in select_tasks("sample", [], [one], None)] == [one]


def test_the_filter_keeps_a_task_that_failed_to_load_for_all_but_the_id() -> None:
    broken = TaskLoadError("bad-task", "turns", "no turns")
    sample = load_tasks("sample")[:3]
    items = [*sample, broken]
    assert TaskFilter(categories=frozenset({"no-such-category"})).apply(items) == [broken]
    assert TaskFilter(statuses=frozenset({"accepted"})).apply(items) == [broken]  # sample tasks have no review
    assert TaskFilter(task_ids=frozenset({sample[0].id})).apply(items) == [sample[0]]
    assert TaskFilter(task_ids=frozenset({"bad-task", "nope"})).missing_ids(items) == ["nope"]
    assert TaskFilter(limit=2).apply(items) == sample[:2] and TaskFilter(limit=0).apply(items) == items


@pytest.mark.parametrize("where", ["vtb_agents/api.py", "vtb_agents/cli/options.py"])
def test_no_second_task_filter_is_left(where: str) -> None:
    source = (Path(__file__).resolve().parents[1] / where).read_text()
    assert "TaskFilter(" in source and "t.category ==" not in source and "_selected(" not in source
