"""A run's budget through the real CLI (issue #33, "Budgets"): ``--cost-limit`` stops a run within one
task's cost of the limit with the command that continues it, and that command with a higher limit
gives the summary an uninterrupted run gives; ``--token-limit`` likewise; a cost limit for a model
whose prices are unknown is refused before the run starts; ``--task-token-limit`` ends a task as
``token_limit``, graded."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

from conftest import write_task
from support.cli import openai_env, vtb
from support.openai_server import OpenAIServer
from support.scripted_vision import VisionModel

import pytest

from vtb_agents.analysis.cost import RunPrices, cost_summary
from vtb_agents.cli.run import progress_status
from vtb_agents.config import RunConfig
from vtb_agents.models.presets import prices_for
from vtb_agents.results import Episode, TaskGrade, TaskResult, TaskUsage, TokenUsage
from vtb_agents.runner.budget import Spend, run_budget
from vtb_agents.runner.plan import plan_records

TASKS = 4
PRICED = "openai:gpt-4.1"
"""A model the presets price (input $2, output $8 per million tokens); the local server plays it."""
EXIT_BUDGET = 4


def write_tasks(root: Path) -> None:
    for i in range(TASKS):
        write_task(root, f"t{i}")


def run_args(*args: str | Path) -> list[str | Path]:
    """The arguments of ``vtb run ARGS``."""
    return ["run", *args]


def run(server: OpenAIServer, args: list[str | Path]) -> subprocess.CompletedProcess[str]:
    """``vtb ARGS`` with the model served by ``server``."""
    return vtb(*args, env=openai_env(server.base_url))


def stop_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith("stopped: ")]
    assert len(lines) == 1, stderr
    return lines[0]


def resume_command(line: str, flag: str, value: str) -> list[str | Path]:
    """The arguments of the ``vtb ...`` command a stop line ends with, with ``flag`` set to ``value``."""
    words: list[str | Path] = list(shlex.split(line[line.index(": vtb run ") + 2:]))
    assert words[:2] == ["vtb", "run"] and words[-1] == "--resume", line
    words[words.index(flag) + 1] = value
    return words[1:]


def results(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


@pytest.mark.slow  # whole runs and their resumes (`make test-fast` leaves it out)
def test_cost_limit_stops_the_run_and_a_resume_with_a_higher_limit_gives_the_uninterrupted_summary(tmp_path):
    root, whole, limited = tmp_path / "tasks", tmp_path / "whole", tmp_path / "limited"
    write_tasks(root)
    common = ["--tasks", root, "--model", PRICED, "--judge", "rule", "--concurrency", "1"]
    with OpenAIServer(VisionModel()) as server:
        done = run(server, run_args(*common, "--out", whole))
        assert done.returncode == 0, done.stderr
        expected = json.loads((whole / "summary.json").read_text())
        per_task = expected["cost"]["total"] / TASKS
        assert per_task > 0 and all(r["outcome"] == "answered" for r in results(whole))
        records = plan_records(RunConfig(model=PRICED, judge="rule"))  # the prices the plan looked up once
        spend = Spend(records.model.prices, records.judge.prices)  # what the progress line shows: the summary's cost
        for line in (whole / "results.jsonl").read_text().splitlines():
            spend.add(TaskResult.model_validate_json(line))
        assert spend.usd == expected["cost"]["total"] and spend.unpriced == 0
        assert spend.tokens == expected["usage"]["model"]["total_tokens"] == 2 * TASKS * 15
        status = progress_status(TaskResult.model_validate(results(whole)[-1]), {"passed": 1, "graded": 4}, spend)
        assert status == f"pass 1/4 · ${expected['cost']['total']:.4f} · 120 tok · last t3"

        limit = f"{1.5 * per_task:g}"  # reached by the second task
        stopped = run(server, run_args(*common, "--out", limited, "--cost-limit", limit))
        assert stopped.returncode == EXIT_BUDGET, stopped.stderr
        line = stop_line(stopped.stderr)
        assert "cost limit reached" in line and f"--cost-limit {limit}" in line
        assert len(results(limited)) == 2  # the task that crossed the limit finished; no other started
        partial = json.loads((limited / "summary.json").read_text())
        assert partial["missing"] == TASKS - 2 and partial["cost"]["total"] >= float(limit)
        assert partial["cost"]["total"] < float(limit) + per_task  # within one task's cost

        again = run(server, resume_command(line, "--cost-limit", limit))  # the same limit: nothing starts
        assert again.returncode == EXIT_BUDGET and len(results(limited)) == 2, again.stderr

        resumed = run(server, resume_command(line, "--cost-limit", f"{10 * TASKS * per_task:g}"))
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads((limited / "summary.json").read_text()) == expected


@pytest.mark.slow  # whole runs and their resumes (`make test-fast` leaves it out)
def test_token_limit_stops_the_run_at_the_tokens_used(tmp_path):
    root, out = tmp_path / "tasks", tmp_path / "run"
    write_tasks(root)
    with OpenAIServer(VisionModel()) as server:  # every call reports 10 input and 5 output tokens
        stopped = run(server, run_args("--tasks", root, "--model", "openai:any-model", "--judge", "rule",
                                       "--concurrency", "1", "--out", out, "--token-limit", "31"))
        assert stopped.returncode == EXIT_BUDGET, stopped.stderr
        line = stop_line(stopped.stderr)
        assert "token limit reached: 60 tokens used of --token-limit 31" in line, line
        assert len(results(out)) == 2  # two calls of 15 tokens per task: 30 after one, 60 after two
        resumed = run(server, resume_command(line, "--token-limit", "1000"))
    assert resumed.returncode == 0, resumed.stderr
    assert len(results(out)) == TASKS


def test_a_cost_limit_for_a_model_without_prices_is_refused_before_the_run(tmp_path):
    root, out = tmp_path / "tasks", tmp_path / "run"
    write_tasks(root)
    with OpenAIServer(VisionModel()) as server:
        refused = run(server, run_args("--tasks", root, "--model", "openai:unpriced-model", "--judge", "rule",
                                       "--out", out, "--cost-limit", "1"))
        assert not server.requests
    assert refused.returncode == 2, refused.stderr
    assert "--cost-limit needs the model's prices, and 'openai:unpriced-model' has none" in refused.stderr
    assert not out.exists()


def test_task_token_limit_ends_the_task_as_token_limit_and_grades_it(tmp_path):
    root, out = tmp_path / "tasks", tmp_path / "run"
    write_tasks(root)
    with OpenAIServer(VisionModel()) as server:  # a crop (15 tokens), then the answer (15 more): past 20
        done = run(server, run_args("--tasks", root, "--model", "openai:any-model", "--judge", "rule",
                                    "--out", out, "--task-token-limit", "20"))
        assert len(server.requests) == 2 * TASKS  # the second call of each task passed the limit: no third
    assert done.returncode == 0, done.stderr  # the model's doing: graded, the run complete
    summary = json.loads((out / "summary.json").read_text())
    assert summary["outcomes"] == {"token_limit": TASKS}
    assert (summary["complete"], summary["graded"], summary["apr"]) == (True, TASKS, 0.0)
    result = results(out)[0]
    assert result["episode"]["error"].startswith("TokenLimitReached: the task's model calls used 30 tokens, "
                                                 "past --task-token-limit 20")
    assert result["grade"]["graded"] and {v["status"] for v in result["grade"]["verdicts"]} == {"not_met"}
    assert result["usage"]["model"]["calls"] == 2 and result["usage"]["model"]["input_tokens"] == 20


def priced_result(model: TokenUsage, judge: TokenUsage, model_from_cache: TokenUsage | None = None) -> TaskResult:
    episode = Episode(task_id="t", model=PRICED, outcome="answered", status="completed")
    return TaskResult(task_id="t", category="c", category_raw="c", domain="d", domain_raw="d", turncase="single",
                      model=PRICED, episode=episode, grade=TaskGrade(score=1.0, passed=True, graded=True),
                      duration_s=1.0, outcome="answered",
                      usage=TaskUsage(model=model, judge=judge, model_from_cache=model_from_cache or TokenUsage()))


def test_the_budget_counts_billed_tokens_at_the_summarys_prices():
    call = TokenUsage(calls=1, input_tokens=1000, output_tokens=500, total_tokens=1500)
    judged = TokenUsage(calls=1, input_tokens=200, output_tokens=10, total_tokens=210)
    paid = priced_result(call + call, judged)
    cached = priced_result(call + call, judged, model_from_cache=call)  # one call answered by the model cache
    results = [paid, cached]
    budget = run_budget(plan_records(RunConfig(model=PRICED, judge="o4-mini", cost_limit=1.0)), done=results)
    expected = cost_summary(results, RunPrices(prices_for(PRICED), prices_for("o4-mini")))["total"]
    assert budget.spend.usd == expected and expected > 0  # the summary's cost: cache answers cost nothing
    assert budget.spend.tokens == 3000 + 210 + 1500 + 210 and budget.reached is None
    assert run_budget(plan_records(RunConfig(model=PRICED, judge="o4-mini", cost_limit=1e-9)),
                      done=results).reached.startswith(
        "cost limit reached")
    unpriced = run_budget(plan_records(RunConfig(model="openai:unpriced", judge="rule", token_limit=10)), done=results)
    assert unpriced.spend.unpriced == 2 and unpriced.reached.startswith("token limit reached: 4920 tokens")


def test_a_cost_limit_with_an_unpriced_judge_is_refused_naming_it():
    with pytest.raises(ValueError, match="--cost-limit needs the judge's prices, and 'openai:my-judge' has none"):
        run_budget(plan_records(RunConfig(model=PRICED, judge="openai:my-judge", cost_limit=1.0)))
