"""Many models in one command through the real CLI (issue #33, "Many models in one command"):
``vtb run --model A --model B`` writes one ordinary run directory per model under ``--out``, one verdict
cache, and a leaderboard (terminal, ``leaderboard.json``, ``leaderboard.html``) whose figures are each
run's ``summary.json``; killed (SIGKILL) or interrupted (SIGINT) and resumed with the command it prints,
it loses and duplicates nothing; a ``retry-after`` of 90 s on one model's provider holds back that
model only, the other's episodes all finish meanwhile. Every model is played by a local
chat-completions server (``tests/support/openai_server.py``)."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import write_task
from support.cli import openai_env, start_vtb, vtb
from support.openai_server import OpenAIServer

from vtb_agents.rundir.leaderboard import read_leaderboard

PRICED = "openai:gpt-4.1"
"""A model the presets price: its cost is known."""
UNPRICED = "openai:beta"
"""A model no preset prices: its cost is unknown, never $0."""
JUDGE = "openai:gpt-4o"
TASKS = 3
DIRS = {PRICED: "openai-gpt-4.1", UNPRICED: "openai-beta"}


class Models:
    """The local server's models: gpt-4.1 answers 42 (right), beta 41 (wrong); the judge (asked for
    structured output) says met. ``delay_s`` slows every agent answer; ``hold`` (a model name) answers
    that model's first request with a 429 and ``retry-after: 90``."""

    def __init__(self, delay_s: float = 0.0, hold: str | None = None) -> None:
        self.delay_s, self.hold = delay_s, hold
        self.lock = threading.Lock()
        self.calls: list[tuple[str, float]] = []  # (model, time) of every request

    def __call__(self, body: dict[str, Any]) -> Any:
        model = body["model"]
        with self.lock:
            first = not any(name == model for name, _ in self.calls)
            self.calls.append((model, time.monotonic()))
        if "response_format" in body:
            return json.dumps({"verdict": "met", "justification": "It says so."})
        if model == self.hold and first:
            error = {"error": {"message": "Rate limit reached for requests", "type": "requests", "param": None,
                               "code": "rate_limit_exceeded"}}
            return ("raw", json.dumps(error), 429, {"retry-after": "90"})
        time.sleep(self.delay_s)
        unique = "!" * len(self.calls)  # no two answers alike: every verdict is asked (and billed), none cached
        return f"Final answer: 42{unique}" if model == "gpt-4.1" else f"Final answer: 41{unique}"

    def of(self, model: str) -> list[float]:
        with self.lock:
            return [at for name, at in self.calls if name == model]


def tasks(root: Path, count: int = TASKS) -> Path:
    for i in range(count):
        write_task(root, f"t{i}")
    return root


def args(root: Path, out: Path, *models: str, concurrency: int = 2) -> list[str | Path]:
    return ["run", "--tasks", root, *(w for m in models for w in ("--model", m)), "--judge", JUDGE,
            "--concurrency", str(concurrency), "--out", out]


def lines(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def check_leaderboard(out: Path, models: dict[str, str]) -> None:
    """``leaderboard.json`` has one row per model whose figures are its run's ``summary.json``'s."""
    board = read_leaderboard(out / "leaderboard.json")
    assert {row.model: row.run_dir for row in board.rows} == models
    assert board.judge == JUDGE
    for row in board.rows:
        summary = json.loads((out / row.run_dir / "summary.json").read_text())
        assert (row.tasks, row.graded, row.epochs, row.complete) == (summary["tasks"], summary["graded"],
                                                                      summary["epochs"], summary["complete"])
        assert (row.apr, row.apr_ci95, row.ars, row.ars_ci95) == (summary["apr"], summary["apr_ci95"],
                                                                  summary["ars"], summary["ars_ci95"])
        assert (row.cost, row.cost_per_pass) == (summary["cost"]["total"], summary["cost"]["per_passed_task"])
        assert row.outcomes == summary["outcomes"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """One finished `vtb run` of two models (each task once per model)."""
    base = tmp_path_factory.mktemp("many")
    out = base / "out"
    with OpenAIServer(Models()) as server:
        done = vtb(*args(tasks(base / "tasks"), out, PRICED, UNPRICED), env=openai_env(server.base_url), columns=200)
    return out, done


@pytest.mark.slow
def test_two_models_give_two_run_directories_one_verdict_cache_and_a_leaderboard_of_their_summaries(finished):
    out, done = finished
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == sorted(DIRS.values())
    assert (out / "judge_cache.sqlite").is_file()  # one verdict cache, beside the runs
    for spec, name in DIRS.items():
        run_dir = out / name
        assert json.loads((run_dir / "run.json").read_text())["config"]["model"] == spec
        assert sorted(r["task_id"] for r in lines(run_dir)) == [f"t{i}" for i in range(TASKS)]
        assert (run_dir / "report.html").is_file() and not (run_dir / "judge_cache.sqlite").exists()
    check_leaderboard(out, DIRS)
    board = read_leaderboard(out / "leaderboard.json")
    best, worst = board.rows
    assert (best.model, best.apr, worst.model, worst.apr) == (PRICED, 1.0, UNPRICED, 0.0)  # best APR first
    assert best.cost is not None and best.cost > 0 and best.cost_per_pass == pytest.approx(best.cost / TASKS)
    assert worst.cost is None and worst.cost_per_pass is None  # no price: unknown, never $0
    table = done.stdout
    assert "Leaderboard (judge: openai:gpt-4o)" in table and "unknown" in table and "$0.0000" not in table
    assert f"{best.apr * 100:.1f}%" in table and "leaderboard.html" in table
    report = vtb("report", out / DIRS[UNPRICED], timeout=120)  # an ordinary run directory
    assert report.returncode == 0, report.stderr


@pytest.mark.slow
def test_two_models_run_in_worker_processes_too(tmp_path):
    out = tmp_path / "out"
    with OpenAIServer(Models()) as server:
        done = vtb(*args(tasks(tmp_path / "tasks", 2), out, PRICED, UNPRICED), "--executor", "processes",
                   "--workers", "1", env=openai_env(server.base_url), columns=200)
    assert done.returncode == 0, done.stderr[-3000:]
    assert all(len(lines(out / name)) == 2 for name in DIRS.values())
    check_leaderboard(out, DIRS)


@pytest.mark.slow
def test_two_specs_with_one_directory_name_are_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "out"
    done = vtb(*args(tasks(tmp_path / "tasks", 1), out, "openai:gpt-4.1", "openai/gpt-4.1"), timeout=120)
    assert done.returncode == 2  # a usage error, as any bad option
    assert "would share the run directory" in done.stderr and "openai-gpt-4.1" in done.stderr
    assert not out.exists()


def resume_words(stderr: str) -> list[str]:
    """The arguments of the `vtb run ... --resume` command an interrupted run printed."""
    line = next(line for line in stderr.splitlines() if "continue with: vtb run " in line)
    words = shlex.split(line[line.index("continue with: ") + len("continue with: "):])
    assert words[:2] == ["vtb", "run"] and words[-1] == "--resume", line
    return words[1:]


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL], ids=["sigint", "sigkill"])
def test_a_killed_many_model_run_resumes_losing_and_duplicating_nothing(tmp_path, how):
    out, count = tmp_path / "out", 6
    root = tasks(tmp_path / "tasks", count)
    with OpenAIServer(Models(delay_s=0.5)) as server:
        env = openai_env(server.base_url)
        process = start_vtb(*args(root, out, PRICED, UNPRICED, concurrency=1), env=env, columns=400,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 180
        while not all(lines(out / name) for name in DIRS.values()):  # both models have saved a result
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.1)
        process.send_signal(how)
        _, stderr = process.communicate(timeout=180)
        before = {name: len(lines(out / name)) for name in DIRS.values()}
        assert 0 < sum(before.values()) < 2 * count, before
        if how == signal.SIGINT:  # running episodes finish, the command says how to continue
            assert process.returncode == 130, stderr
            words = resume_words(stderr)
            assert words.count("--model") == 2 and words[words.index("--out") + 1] == str(out)
        else:
            assert process.returncode == -signal.SIGKILL
            words = [str(w) for w in args(root, out, PRICED, UNPRICED, concurrency=1)] + ["--resume"]
        done = vtb(*words, env=env, columns=200)
    assert done.returncode == 0, done.stderr[-3000:]
    for name in DIRS.values():
        ids = [r["task_id"] for r in lines(out / name)]
        assert sorted(ids) == [f"t{i}" for i in range(count)], ids  # none lost, none twice
    check_leaderboard(out, DIRS)


@pytest.mark.slow
def test_a_long_retry_after_on_one_provider_does_not_hold_back_the_other_models_tasks(tmp_path):
    """Model `held` is answered 429 with `retry-after: 90` on its first request; model `free` must run
    all its tasks while `held` waits. The run is stopped once `free` is done (nothing waits the 90 s),
    and resumed against a server that no longer holds anything back: nothing is lost."""
    out, count = tmp_path / "out", 4
    root = tasks(tmp_path / "tasks", count)
    held, free = "openai:held", "openai:free"
    models = Models(hold="held")
    with OpenAIServer(models) as server:
        env = openai_env(server.base_url)
        process = start_vtb(*args(root, out, held, free, concurrency=1), env=env, columns=400, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 240
        while not (out / "openai-free" / "summary.json").exists():  # written once all of free's episodes are
            assert process.poll() is None and time.monotonic() < deadline, process.communicate()
            time.sleep(0.1)
        free_done = time.monotonic()
        held_calls = models.of("held")
        process.kill()
        process.communicate(timeout=60)
    assert len(held_calls) >= 1 and free_done - held_calls[0] < 90  # free finished inside held's retry-after
    assert len(models.of("held")) == 1  # held's request was not sent again before its retry-after ended
    assert lines(out / "openai-held") == []
    assert sorted(r["task_id"] for r in lines(out / "openai-free")) == [f"t{i}" for i in range(count)]
    with OpenAIServer(Models()) as server:
        done = vtb(*args(root, out, held, free), "--resume", env=openai_env(server.base_url), columns=200)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(r["task_id"] for r in lines(out / "openai-held")) == [f"t{i}" for i in range(count)]
    assert len(lines(out / "openai-free")) == count
    board = read_leaderboard(out / "leaderboard.json")
    assert {row.model for row in board.rows} == {held, free} and all(row.complete for row in board.rows)


@pytest.mark.slow
def test_a_token_limit_counts_what_every_model_spent_together(tmp_path):
    """Each episode bills 30 tokens (the agent's answer and one verdict, 15 each), each model 4 episodes:
    120 tokens per model, so a limit of 121 is never reached by one model alone; the command's
    models together reach it at their fifth episode, and no episode starts after that."""
    out, count = tmp_path / "out", 4
    root = tasks(tmp_path / "tasks", count)
    with OpenAIServer(Models(delay_s=0.3)) as server:
        env = openai_env(server.base_url)
        done = vtb(*args(root, out, PRICED, UNPRICED, concurrency=1), "--token-limit", "121", env=env, columns=400)
        assert done.returncode == 4, done.stderr[-3000:]  # as `vtb run` stopped by its budget
        assert "stopped: token limit reached" in done.stderr and "--model openai:beta" in done.stderr
        spent = [r for name in DIRS.values() for r in lines(out / name)]
        billed = sum(r["usage"][side]["input_tokens"] + r["usage"][side]["output_tokens"]
                     for r in spent for side in ("model", "judge"))
        assert billed >= 121 and len(spent) in (5, 6), (billed, len(spent))  # the running episode may finish
        resumed = vtb(*args(root, out, PRICED, UNPRICED, concurrency=1), "--token-limit", "1000", "--resume",
                      env=env, columns=400)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert all(len(lines(out / name)) == count for name in DIRS.values())
    check_leaderboard(out, DIRS)


class Refusing(Models):
    """As :class:`Models`, but beta's agent calls are answered 400 (a provider error, not retried)."""

    def __call__(self, body: dict[str, Any]) -> Any:
        if body["model"] == "beta" and "response_format" not in body:
            error = {"error": {"message": "bad request", "type": "invalid_request_error", "param": None, "code": None}}
            return ("raw", json.dumps(error), 400)
        return super().__call__(body)


@pytest.mark.slow
def test_a_model_left_ungraded_by_its_provider_exits_3_naming_it_and_retry_errors_completes_it(tmp_path):
    out, count = tmp_path / "out", 2
    root = tasks(tmp_path / "tasks", count)
    with OpenAIServer(Refusing()) as server:
        done = vtb(*args(root, out, PRICED, UNPRICED), env=openai_env(server.base_url), columns=400)
    assert done.returncode == 3, done.stderr[-3000:]  # as `vtb run` with tasks ungraded by infrastructure failures
    assert "INCOMPLETE: model openai:beta: 2 of 2 task(s)" in done.stderr
    retry = next(line for line in done.stderr.splitlines() if line.startswith("retry them with: vtb run "))
    words = shlex.split(retry.removeprefix("retry them with: "))
    assert words[-2:] == ["--resume", "--retry-errors"] and words.count("--model") == 2
    board = read_leaderboard(out / "leaderboard.json")  # written: the leaderboard says which run is incomplete
    assert {row.model: (row.complete, row.infrastructure_errors) for row in board.rows} == \
        {PRICED: (True, 0), UNPRICED: (False, count)}
    with OpenAIServer(Models()) as server:
        again = vtb(*words[1:], env=openai_env(server.base_url), columns=200)
    assert again.returncode == 0, again.stderr[-3000:]
    assert all(row.complete for row in read_leaderboard(out / "leaderboard.json").rows)
    check_leaderboard(out, DIRS)
