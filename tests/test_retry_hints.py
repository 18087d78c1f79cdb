"""`vtb grade` keeps the run's judge; the retry and resume commands `vtb run`, `vtb grade` and `vtb ablate`
print are correct to copy; `vtb ablate` exits incomplete when a setting is.

Each test runs the real `vtb` command (``python -m vtb_agents``) against a model and a judge served by a
local OpenAI-compatible server (tests/support/openai_server.py) that injects the faults, then runs the command
the CLI printed, word for word.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer

from conftest import write_task
from support.openai_server import OpenAIServer
from support.cli import openai_env, vtb
from test_outcomes import ANSWER, RUBRICS, results_of, summary_of
from vtb_agents.cli import app
from vtb_agents.cli.hints import HintError, config_flags, run_ids_flags, selection_flags
from vtb_agents.cli.options import RunOptions
from vtb_agents.config import RunConfig, run_config
from vtb_agents.runner.ablate import ablation_config
from vtb_agents.runner.run import EXIT_INCOMPLETE


def verdict(status: str = "met") -> str:
    return json.dumps({"verdict": status, "justification": f"judged {status}"})


def hinted(stderr: str, lead: str) -> list[str]:
    """The arguments of the command printed after ``lead`` (one line), without the leading ``vtb``."""
    line = next(line for line in stderr.splitlines() if line.startswith(lead))
    words = shlex.split(line.removeprefix(lead))
    assert words[0] == "vtb", line
    return words[1:]


def verdicts(run: Path) -> dict[str, list[tuple[str, str, str]]]:
    return {task_id: [(v["rubric_id"], v["status"], v["judge"]) for v in r["grade"]["verdicts"]]
            for task_id, r in results_of(run).items()}


KEY_REFUSED = ("raw", json.dumps({"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error",
                                            "code": "invalid_api_key"}}), 401)
"""The provider refusing the model's key: a provider error (infrastructure) that is not retried
(docs/concepts/outcomes.md), so a run fails at its first request instead of after the 1 s, 2 s, 4 s backoff."""


class Scripted:
    """The model answers; the judge (model ``judge-*``) gives verdicts; either can fail: the model's key
    refused (not retried), the judge down (500, retried)."""

    def __init__(self) -> None:
        self.model_refused = False
        self.judge_down = False

    def __call__(self, body: dict[str, Any]) -> Any:
        if body["model"].startswith("judge-"):
            return 500 if self.judge_down else verdict("met")
        return KEY_REFUSED if self.model_refused else ANSWER


@pytest.mark.slow
def test_grade_without_judge_keeps_the_llm_judge_and_its_retry_hint_works(tmp_path):
    root = tmp_path / "tasks"
    write_task(root, "t-a")  # r1 has a check, r2 goes to the judge
    run = tmp_path / "run"
    scripted = Scripted()
    with OpenAIServer(scripted) as server:
        done = vtb("run", "--tasks", str(root), "--model", "openai:scripted", "--judge", "openai:judge-1",
                   "--critical-rule", "either", "--out", str(run), env=openai_env(server.base_url))
        assert done.returncode == 0, done.stderr[-3000:]
        before, summary_before = verdicts(run), summary_of(run)
        assert before == {"t-a": [("r1", "met", "check"), ("r2", "met", "openai:judge-1")]}

        kept = vtb("grade", str(run), env=openai_env(server.base_url))
        assert kept.returncode == 0, kept.stderr[-3000:]
        assert verdicts(run) == before
        assert "regraded with the run's own judge openai:judge-1 and critical rule either" in kept.stdout
        summary = summary_of(run)
        for key in ("apr", "ars", "graded", "critical_rule"):
            assert summary[key] == summary_before[key], key
        assert summary["judge"]["model"] == "openai:judge-1" and summary["judge"]["cache_hits"] == 1

        # a new critical rule alone keeps the judge
        flagged = vtb("grade", str(run), "--critical-rule", "weight", env=openai_env(server.base_url))
        assert flagged.returncode == 0, flagged.stderr[-3000:]
        assert "critical rule weight instead of the run's either (--critical-rule)" in flagged.stdout
        assert verdicts(run) == before

        # another judge is a deliberate choice, stated; its outage prints a retry hint that works
        scripted.judge_down = True
        switched = vtb("grade", str(run), "--judge", "openai:judge-2", env=openai_env(server.base_url))
        assert switched.returncode == EXIT_INCOMPLETE, switched.stderr[-3000:]
        assert "judge openai:judge-2 instead of the run's openai:judge-1 (--judge)" in switched.stdout
        assert verdicts(run)["t-a"][1] == ("r2", "error", "openai:judge-2")
        retry = hinted(switched.stderr, "judge them again with: ")
        assert "run their episodes again" not in switched.stderr  # the episodes are fine
        scripted.judge_down = False
        retried = vtb(*retry, env=openai_env(server.base_url))
    assert retried.returncode == 0, retried.stderr[-3000:]
    assert verdicts(run) == {"t-a": [("r1", "met", "check"), ("r2", "met", "openai:judge-2")]}
    assert json.loads((run / "run.json").read_text())["config"]["judge"] == "openai:judge-2"


@pytest.mark.slow
def test_run_and_grade_print_the_same_working_retry_command(tmp_path):
    root = tmp_path / "tasks"
    for task_id in ("t-a", "t-b", "t-c"):
        write_task(root, task_id, turns=[{"prompt": "What number is printed?", "images": [0],
                                          "golden_answer": ANSWER, "rubrics": RUBRICS}])
    run = tmp_path / "my run"  # a space: the hint must quote it
    scripted = Scripted()
    scripted.model_refused = True
    options = ["--tasks", str(root), "--model", "openai:scripted", "--prompt-level", "mid", "--max-tool-rounds", "3",
               "--request-timeout", "30", "--model-kwargs", '{"top_p": 0.5}', "--limit", "2"]
    with OpenAIServer(scripted) as server:
        failed = vtb("run", *options, "--out", str(run), env=openai_env(server.base_url))
        assert failed.returncode == EXIT_INCOMPLETE, failed.stderr[-3000:]
        from_run = hinted(failed.stderr, "retry them with: ")
        graded = vtb("grade", str(run), env=openai_env(server.base_url))
        assert graded.returncode == EXIT_INCOMPLETE, graded.stderr[-3000:]
        from_grade = hinted(graded.stderr, "run their episodes again with: ")
        assert from_grade == from_run  # the run's settings and its selection (--limit 2), from run.json
        assert from_run[-4:] == ["--out", str(run), "--resume", "--retry-errors"]
        assert "judge them again" not in graded.stderr
        scripted.model_refused = False
        retried = vtb(*from_grade, env=openai_env(server.base_url))
    assert retried.returncode == 0, retried.stderr[-3000:]
    summary = summary_of(run)
    assert summary["complete"] is True and summary["tasks"] == 2 and summary["apr"] == 1.0


@pytest.mark.slow
def test_an_all_failing_ablation_exits_incomplete_and_its_hint_retries_it(tmp_path):
    root = tmp_path / "tasks"
    write_task(root, "t-a", turns=[{"prompt": "What number is printed?", "images": [0], "golden_answer": ANSWER,
                                    "rubrics": RUBRICS}])
    out = tmp_path / "ablation"
    scripted = Scripted()
    scripted.model_refused = True
    with OpenAIServer(scripted) as server:
        failed = vtb("ablate", "--tasks", str(root), "--model", "openai:scripted", "--setting", "no_tools",
                     "--setting", "weak_prompt", "--max-tool-rounds", "4", "--out", str(out),
                     env=openai_env(server.base_url))
        assert failed.returncode == EXIT_INCOMPLETE, failed.stderr[-3000:]
        for setting in ("no_tools", "weak_prompt"):
            assert f"INCOMPLETE: setting {setting}: 1 of 1 task(s) ungraded" in failed.stderr
            assert summary_of(out / setting)["cost"]["total"] is None  # never ran: unknown, not $0
        costs = failed.stdout.split("Tokens and estimated cost")[1]
        assert "$0" not in costs and costs.count("unknown") >= 4, costs
        retry = hinted(failed.stderr, "retry them with: ")
        assert retry[retry.index("--max-tool-rounds") + 1] == "4"
        # `vtb grade` on one setting's folder names the ablation that continues it
        graded = vtb("grade", str(out / "no_tools"), env=openai_env(server.base_url))
        assert graded.returncode == EXIT_INCOMPLETE, graded.stderr[-3000:]
        from_grade = hinted(graded.stderr, "run their episodes again with: ")
        assert from_grade[0] == "ablate" and from_grade[-6:] == ["--out", str(out), "--setting", "no_tools",
                                                                 "--resume", "--retry-errors"]
        scripted.model_refused = False
        server.requests.clear()
        regraded = vtb(*from_grade, env=openai_env(server.base_url))
        assert regraded.returncode == 0, regraded.stderr[-3000:]
        assert summary_of(out / "no_tools")["complete"] and not summary_of(out / "weak_prompt")["complete"]
        retried = vtb(*retry, env=openai_env(server.base_url))
    assert retried.returncode == 0, retried.stderr[-3000:]
    assert [summary_of(out / s)["apr"] for s in ("no_tools", "weak_prompt")] == [1.0, 1.0]
    # the no-tools condition's model got no tools and a prompt that names none
    no_tools = [r for r in server.requests if "tools" not in r]
    assert no_tools, "the no_tools condition made no request"
    for request in no_tools:
        system = next(m["content"] for m in request["messages"] if m["role"] == "system")
        assert not any(word in system.lower() for word in ("tool", "python", "calculator", "crop")), system


@pytest.mark.slow
def test_ablation_without_failures_exits_zero_with_a_shared_verdict_cache(task_root, tmp_path):
    cache = tmp_path / "verdicts.sqlite"
    with OpenAIServer(Scripted()) as server:
        done = vtb("ablate", "--tasks", str(task_root), "--judge", "openai:judge-1", "--setting", "strong_prompt",
                   "--setting", "no_vision_tool", "--judge-cache", str(cache), "--out", str(tmp_path / "a"),
                   env=openai_env(server.base_url))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "INCOMPLETE" not in done.stderr + done.stdout
    judged = [r for r in server.requests if r["model"] == "judge-1"]
    assert len(judged) == 1  # the replayed answers are the same: the second setting's verdict is cached
    assert cache.exists() and not (tmp_path / "a" / "strong_prompt" / "judge_cache.sqlite").exists()


def parse_options(args: list[str]) -> tuple[RunOptions, dict[str, Any]]:
    """The ``RunOptions`` (and all parameters) of ``vtb run ARGS``, parsed by the real command line parser."""
    command = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    params = command.make_context("run", list(args)).params
    return RunOptions.from_params(params), params


def parse_run(args: list[str]) -> RunConfig:
    """The ``RunConfig`` ``vtb run ARGS`` would run, parsed by the real command line parser."""
    options, params = parse_options(args)
    return options.config(prompt_level=params["prompt_level"], no_tools=not params["tools"],
                          no_vision_tool=not params["vision_tool"])


@pytest.mark.parametrize("settings", [
    {},
    {"model": "openai:gpt-x", "judge": "openai:o4-mini", "strategy": "zoom", "tasks": "/data/vtb tasks",
     "critical_rule": "either", "no_tools": True, "resumer": "simulated", "user_model": "openai:user",
     "requests_per_second": 2.5, "request_timeout_s": 30.0, "model_kwargs": {"reasoning_effort": "low"},
     "max_tool_rounds": 5, "prompt_level": "low", "history": "model", "max_image_side": 512,
     "native_tool_images": True, "task_timeout_s": 90.0, "tools_mode": "replay", "tools_cache": "c.jsonl",
     "sandbox_strict": True, "code_timeout_s": 5.0},
    {"no_vision_tool": True, "sandbox": "e2b", "sandbox_network": True, "tools_mode": "live"},
    {"cost_limit": 12.5, "token_limit": 2_000_000, "task_token_limit": 50_000},
])
def test_config_flags_give_back_the_recorded_config(settings):
    config = run_config(**settings)
    assert parse_run(["--resume", *config_flags(config)]) == config


def test_config_flags_of_an_ablation_setting_drop_what_the_ablation_sets():
    base = run_config(model="openai:m", max_tool_rounds=4)
    condition = ablation_config(base, "no_tools")
    assert config_flags(condition, ablation=True) == ["--model", "openai:m", "--max-tool-rounds", "4"]


@pytest.mark.parametrize(("settings", "why"), [
    ({"tags": ("mine",)}, "episode tags ['mine'] have no vtb flag"),
])
def test_a_setting_no_flag_gives_is_named_in_the_hint_error(settings, why):
    with pytest.raises(HintError) as caught:
        config_flags(run_config(**settings))
    assert str(caught.value).startswith(why)


def test_selection_flags_name_exactly_the_run_tasks():
    source = ["a", "b", "c", "d"]
    assert run_ids_flags(["a", "b", "c", "d"], source) == []
    assert run_ids_flags(["a", "b"], source) == ["--limit", "2"]
    assert run_ids_flags(["b", "d"], source) == ["--task-id", "b", "--task-id", "d"]


def test_selection_flags_repeat_the_command_lines_selection():
    given = ["--category", "hybrid_tool", "--task-id", "a", "--status", "reviewed", "--status", "accepted",
             "--limit", "3", "--skip-invalid", "--concurrency", "4"]
    options, _ = parse_options(given)
    assert selection_flags(options) == given
    assert selection_flags(parse_options([])[0]) == []
