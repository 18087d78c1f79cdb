"""``vtb grade --batch``: rubric verdicts through the OpenAI Batch API and Anthropic Message Batches.

Every test runs the real ``vtb`` command (``python -m vtb_agents``) against local servers speaking the
providers' batch APIs (tests/support/batch_servers.py), which answer each verdict request the way the
scripted judge answers it live and count live calls apart from batch submissions.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from support import cli
from support.batch_servers import AnthropicBatchServer, OpenAIBatchServer
from support.cli import openai_env, start_vtb
from conftest import write_task
from vtb_agents.runner.run import EXIT_INCOMPLETE

ANSWER = "The number is 42."
RUBRICS = {"r1": {"description": "Says 42", "weight": 5, "critical": "yes", "category": ["visual understanding"],
                  "check": {"type": "number", "value": 42}},
           "r2": {"description": "Names the number", "weight": 3, "critical": "no", "category": ["reasoning"]},
           "r3": {"description": "Is polite", "weight": 1, "critical": "no", "category": ["style"]},
           "r4": {"description": "Cites a source", "weight": 2, "critical": "no", "category": ["reasoning"]}}
SERVERS = {"openai": OpenAIBatchServer, "anthropic": AnthropicBatchServer}


def criterion(body: dict[str, Any]) -> str:
    """The rubric criterion a judge request asks about."""
    text = json.dumps(body)
    return next(rubric["description"] for rubric in RUBRICS.values() if f"Criterion\\n{rubric['description']}" in text)


def respond(body: dict[str, Any]) -> str:
    """The scripted judge: every criterion is met except citing a source."""
    name = criterion(body)
    verdict = "not_met" if name == "Cites a source" else "met"
    return json.dumps({"verdict": verdict, "justification": f"Judged: {name}."})


def env_for(server: Any) -> dict[str, str]:
    """Both providers' clients pointed at ``server`` (it speaks either API)."""
    return openai_env(server.root + "/v1", "test-key", ANTHROPIC_BASE_URL=server.root, ANTHROPIC_API_KEY="test-key")


def vtb(*args: str, server: Any, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """``vtb ARGS`` against the batch ``server``."""
    return cli.vtb(*args, env=env_for(server), timeout=timeout)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of three single-turn tasks by the replay agent, graded by the rule judge (no LLM yet)."""
    root = tmp_path_factory.mktemp("batch-run")
    for name in ("t-one", "t-two", "t-three"):
        write_task(root / "tasks", name, turns=[{"prompt": f"{name}: what number is printed?", "images": [0],
                                                 "golden_answer": ANSWER, "rubrics": RUBRICS}])
    run = root / "run"
    done = cli.vtb("run", "--tasks", root / "tasks", "--model", "replay", "--judge", "rule", "--out", run)
    assert done.returncode == 0, done.stderr[-3000:]
    return run


def copy_of(run: Path, where: Path) -> Path:
    shutil.copytree(run, where)
    return where


def verdicts(run: Path) -> dict[tuple[str, str], tuple[str, str]]:
    lines = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    return {(r["task_id"], v["rubric_id"]): (v["status"], v["justification"]) for r in lines
            for v in r["grade"]["verdicts"]}


BATCH_COUNTS = ("calls", "input_tokens", "cached_tokens", "cache_write_tokens", "output_tokens")


def comparable(summary: dict[str, Any]) -> dict[str, Any]:
    """A summary without what differs between two gradings of one run by nature (timing, and the judge
    usage's ``batch_*`` counts: the part billed at the batch price)."""
    judge = {k: v for k, v in summary["usage"]["judge"].items() if not k.startswith("batch_")}
    usage = {**summary["usage"], "judge": judge}
    return {**{k: v for k, v in summary.items() if k not in ("usage", "duration_s", "created_at")}, "usage": usage}


def batch_counts(usage: dict[str, int]) -> dict[str, int]:
    """The ``batch_*`` counts of a usage, under the names of the counts they are part of."""
    return {name: usage[f"batch_{name}"] for name in BATCH_COUNTS}


def summary_of(run: Path) -> dict[str, Any]:
    return json.loads((run / "summary.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_batch_grading_equals_live_grading_with_no_live_judge_call(finished_run, tmp_path, provider):
    judge = f"{provider}:judge-1"
    live_run, batch_run = copy_of(finished_run, tmp_path / "live"), copy_of(finished_run, tmp_path / "batch")
    with SERVERS[provider](respond) as server:
        live = vtb("grade", str(live_run), "--judge", judge, server=server)
        assert live.returncode == 0, live.stderr[-3000:]
        live_requests = list(server.live)
        assert len(live_requests) == 9  # three tasks, three judged rubrics each (r1 has a check)
        server.live.clear()
        batched = vtb("grade", str(batch_run), "--judge", judge, "--batch", "--batch-poll", "0.05", server=server)
    assert batched.returncode == 0, batched.stderr[-3000:]
    assert server.live == []  # zero live judge calls
    (submitted,) = server.submitted  # one batch
    # the batch holds exactly the requests the live judge sent
    assert sorted(json.dumps(b, sort_keys=True) for b in submitted.values()) == sorted(
        json.dumps(b, sort_keys=True) for b in live_requests)
    assert "batch judging: 1 of 1 batch(es) ended" in batched.stderr
    assert "batch judging: 9 of 9 verdict(s) answered by batches; 0 left to the live judge" in batched.stderr
    assert verdicts(batch_run) == verdicts(live_run)
    assert {status for status, _ in verdicts(batch_run).values()} == {"met", "not_met"}
    batch_summary, live_summary = summary_of(batch_run), summary_of(live_run)
    assert comparable(batch_summary) == comparable(live_summary)
    assert batch_summary["judge"]["calls"] == 9 and batch_summary["judge"]["cache_hits"] == 0
    batch_judge, live_judge = batch_summary["usage"]["judge"], live_summary["usage"]["judge"]
    assert batch_counts(batch_judge) == {name: batch_judge[name] for name in BATCH_COUNTS}  # all billed at batch
    assert batch_judge["calls"] == 9 and batch_judge["input_tokens"] > 0 and batch_judge["output_tokens"] > 0
    assert batch_counts(live_judge) == dict.fromkeys(BATCH_COUNTS, 0)
    assert not (batch_run / "judge_batches.json").exists()  # graded: the ledger is gone
    with SERVERS[provider](respond) as again:  # a second batch grade finds every verdict in the cache
        rerun = vtb("grade", str(batch_run), "--judge", judge, "--batch", "--batch-poll", "0.05", server=again)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert again.submitted == [] and again.live == []
    assert "the verdict cache holds every verdict the grading needs: no batch to submit" in rerun.stderr


@pytest.mark.slow
def test_a_batch_gradings_judge_cost_is_the_list_price_times_the_presets_batch_share(finished_run, tmp_path):
    """gpt-4.1 (a preset: input $2, output $8 per million tokens, batch 0.5) served by the local
    server, which reports 10 input and 5 output tokens per call (tests/support/openai_server.py)."""
    live_run, batch_run = copy_of(finished_run, tmp_path / "live"), copy_of(finished_run, tmp_path / "batch")
    with OpenAIBatchServer(respond) as server:
        live = vtb("grade", str(live_run), "--judge", "gpt-4.1", server=server)
        assert live.returncode == 0, live.stderr[-3000:]
        server.live.clear()
        batched = vtb("grade", str(batch_run), "--judge", "gpt-4.1", "--batch", "--batch-poll", "0.05", server=server)
    assert batched.returncode == 0, batched.stderr[-3000:]
    assert server.live == [] and len(server.submitted) == 1
    live_summary, batch_summary = summary_of(live_run), summary_of(batch_run)
    list_price = 9 * (10 * 2.0 + 5 * 8.0) / 1_000_000  # nine judge calls at the list prices
    assert live_summary["usage"]["judge"]["input_tokens"] == batch_summary["usage"]["judge"]["input_tokens"] == 90
    assert live_summary["usage"]["judge"]["output_tokens"] == batch_summary["usage"]["judge"]["output_tokens"] == 45
    assert live_summary["cost"]["judge"] == pytest.approx(list_price)
    assert batch_summary["cost"]["judge"] == pytest.approx(list_price * 0.5)
    assert batch_summary["cost"]["prices"]["judge"]["batch"] == 0.5
    assert comparable({**batch_summary, "cost": None}) == comparable({**live_summary, "cost": None})


@pytest.mark.slow
def test_a_grade_killed_while_polling_resumes_and_submits_nothing_twice(finished_run, tmp_path):
    run = copy_of(finished_run, tmp_path / "run")
    with OpenAIBatchServer(respond) as server:
        server.release.clear()  # every batch stays in_progress
        process = start_vtb("grade", run, "--judge", "openai:judge-1", "--batch", "--batch-poll", "0.05",
                            env=env_for(server), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
        try:
            deadline = time.monotonic() + 180
            while server.polls < 3 and time.monotonic() < deadline and process.poll() is None:
                time.sleep(0.05)
            assert server.polls >= 3, process.stderr.read().decode()[-3000:] if process.poll() is not None else ""
            ledger = json.loads((run / "judge_batches.json").read_text())
            assert [b["batch_id"] for b in ledger["batches"]] == ["batch_1"]
            assert sorted(ledger["batches"][0]["keys"]) == sorted(server.submitted[0])
        finally:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        assert len(server.submitted) == 1
        server.release.set()
        resumed = vtb("grade", str(run), "--judge", "openai:judge-1", "--batch", "--batch-poll", "0.05",
                      server=server)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert len(server.submitted) == 1 and server.live == []  # polled again, never submitted twice
    statuses = {key: status for key, (status, _) in verdicts(run).items()}
    assert statuses[("t-one", "r4")] == "not_met" and statuses[("t-one", "r2")] == "met"
    summary = summary_of(run)
    assert summary["judge"]["calls"] == 9 and summary["complete"] is True


@pytest.mark.slow
def test_expired_and_failed_batch_requests_are_asked_live(finished_run, tmp_path):
    run, live_run = copy_of(finished_run, tmp_path / "run"), copy_of(finished_run, tmp_path / "live")

    def fate(custom_id: str, body: dict[str, Any]) -> str:
        return {"Is polite": "expired", "Cites a source": "errored"}.get(criterion(body), "succeeded")

    with OpenAIBatchServer(respond, outcome=fate) as server:
        live = vtb("grade", str(live_run), "--judge", "openai:judge-1", server=server)
        assert live.returncode == 0, live.stderr[-3000:]
        server.live.clear()
        batched = vtb("grade", str(run), "--judge", "openai:judge-1", "--batch", "--batch-poll", "0.05", server=server)
    assert batched.returncode == 0, batched.stderr[-3000:]
    assert sorted(criterion(body) for body in server.live) == ["Cites a source"] * 3 + ["Is polite"] * 3
    assert "batch judging: 3 of 9 verdict(s) answered by batches; 6 left to the live judge" in batched.stderr
    assert verdicts(run) == verdicts(live_run)
    summary = summary_of(run)
    assert summary["usage"]["judge"]["batch_calls"] == 3 and summary["judge"]["calls"] == 9
    assert summary["usage"]["judge"]["calls"] == 9


@pytest.mark.slow
def test_batch_requests_that_fail_live_too_are_judge_errors_never_not_met(finished_run, tmp_path):
    # one of the module's tasks, its three judged rubrics: `vtb grade` judges one task after another, and each
    # of a task's failing verdicts waits out the live judge's backoff (1 s, 2 s) before it is an error
    run = tmp_path / "run"
    done = cli.vtb("run", "--tasks", finished_run.parent / "tasks", "--task-id", "t-one", "--model", "replay",
                   "--judge", "rule", "--out", run)
    assert done.returncode == 0, done.stderr[-3000:]
    with AnthropicBatchServer(respond, outcome=lambda custom_id, body: "expired") as server:
        server.live_status = 503
        batched = vtb("grade", str(run), "--judge", "anthropic:judge-1", "--batch", "--batch-poll", "0.05",
                      server=server)
    assert batched.returncode == EXIT_INCOMPLETE, batched.stderr[-3000:]
    judged = {key: status for key, (status, _) in verdicts(run).items() if key[1] != "r1"}
    assert len(judged) == 3 and set(judged.values()) == {"error"}
    assert summary_of(run)["outcomes"] == {"judge_error": 1}


def test_a_judge_without_a_batch_api_says_so_and_grades_live(finished_run, tmp_path):
    run = copy_of(finished_run, tmp_path / "run")
    with OpenAIBatchServer(respond) as server:
        graded = vtb("grade", str(run), "--judge", "rule", "--batch", server=server)
    assert graded.returncode == 0, graded.stderr[-3000:]
    lines = [line for line in graded.stderr.splitlines() if "batch API" in line]
    assert lines == ["judge rule has no batch API (only LLM judges of openai and anthropic have one): its verdicts "
                     "are asked live"]
    assert server.submitted == [] and summary_of(run)["judge"]["model"] == "rule"


@pytest.mark.slow
def test_run_with_judge_batch_grades_once_its_episodes_are_done(tmp_path):
    root = tmp_path / "tasks"
    for name in ("t-one", "t-two"):
        write_task(root, name, turns=[{"prompt": f"{name}: what number is printed?", "images": [0],
                                       "golden_answer": ANSWER, "rubrics": RUBRICS}])
    live_run, run = tmp_path / "live", tmp_path / "run"
    with OpenAIBatchServer(respond) as server:
        live = vtb("run", "--tasks", str(root), "--model", "replay", "--judge", "openai:judge-1", "--out",
                   str(live_run), server=server)
        assert live.returncode == 0, live.stderr[-3000:]
        assert len(server.live) == 6
        server.live.clear()
        server.release.clear()  # the batch stays in_progress: the run waits with its verdicts pending
        process = start_vtb("run", "--tasks", root, "--model", "replay", "--judge", "openai:judge-1", "--judge-batch",
                            "--batch-poll", "0.05", "--out", run, env=env_for(server), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
        try:
            deadline = time.monotonic() + 240
            while server.polls < 2 and time.monotonic() < deadline and process.poll() is None:
                time.sleep(0.05)
            assert server.polls >= 2, process.communicate()[1].decode()[-3000:] if process.poll() is not None else ""
            pending = summary_of(run)
            assert (pending["judge"]["pending"], pending["judge"]["errors"], pending["judge"]["calls"]) == (6, 0, 0)
            assert "verdicts pending in a batch" in (run / "report.html").read_text()
            server.release.set()
            _, stderr = process.communicate(timeout=240)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 0, stderr.decode()[-3000:]
    assert server.live == [] and len(server.submitted) == 1 and len(server.submitted[0]) == 6
    assert verdicts(run) == verdicts(live_run)
    summary = summary_of(run)
    assert summary["judge"]["pending"] == 0 and summary["judge"]["calls"] == 6 and summary["complete"] is True
    assert summary["usage"]["judge"]["batch_calls"] == summary["usage"]["judge"]["calls"] == 6
    assert summary["apr"] == summary_of(live_run)["apr"] and summary["ars"] == summary_of(live_run)["ars"]
    assert "verdicts pending in a batch" not in (run / "report.html").read_text()
    assert json.loads((run / "run.json").read_text())["config"]["judge_batch"] is True


def test_run_with_judge_batch_and_the_rule_judge_says_so_and_grades_live(tmp_path):
    root = tmp_path / "tasks"
    write_task(root, "t-one")
    done = cli.vtb("run", "--tasks", root, "--model", "replay", "--judge", "rule", "--judge-batch", "--out",
                   tmp_path / "run")
    assert done.returncode == 0, done.stderr[-3000:]
    assert [line for line in done.stderr.splitlines() if "batch API" in line] == [
        "judge rule has no batch API (only LLM judges of openai and anthropic have one): its verdicts are asked live"]
    assert summary_of(tmp_path / "run")["judge"]["pending"] == 0


def test_a_damaged_ledger_is_refused_naming_the_file(tmp_path):
    from vtb_agents.rundir.errors import RunError
    from vtb_agents.runner.batch_grade import read_ledger

    (tmp_path / "judge_batches.json").write_text('{"judge": "openai:j", "batches": [{"batch_id": 3}]}')
    with pytest.raises(RunError, match=r"judge_batches.json: not a batch ledger \(batches.0.provider: Field required; "
                                       r"4 error\(s\)\); .*removing it submits their verdicts again"):
        read_ledger(tmp_path, "openai:j")
    assert read_ledger(tmp_path / "none", "openai:j").batches == []
