"""A judge's failure is infrastructure, bounded in time, and a run always ends when told to, through
the real `vtb run` (docs/concepts/outcomes.md):

- a judge of your own that raises, returns something that is not a verdict, or sleeps past its time
  limit makes its tasks ``judge_error`` (never "unjudged"): exit 3, the terminal's last lines naming
  the outcome and its cause, and ``--resume --retry-errors`` with the judge fixed gives the summary
  of a run that never failed, field for field;
- a second Ctrl-C (or SIGTERM) ends a run whose judge hangs within seconds, every line of
  ``results.jsonl`` whole, and ``--resume`` finishes it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import write_task
from support.cli import start_vtb, vtb
from support.together import together

from vtb_agents.judges import Judgement
from vtb_agents.judges.graph import grade_episode
from vtb_agents.results import Episode, TurnRecord, task_outcome
from vtb_agents.tasks import load_tasks

INCOMPLETE = 3  # docs/concepts/outcomes.md
JUDGE = "blamejudge.judges:Judge"
JUDGE_MODULE = '''
import os
import time

from vtb_agents.judges import Judgement


class Judge:
    """Behaves as the file ``mode`` next to this module says: ok, raise, sleep (an hour), or sleep on
    task t-b only (sleep-b); a judge call that sleeps leaves the file ``asleep-TASK`` next to it first."""

    name = "blame-test"
    calls_model = True  # counted as judge calls, behind the verdict cache

    def judge(self, *, task, turn, rubric, answer):
        mode = open(os.path.join(os.path.dirname(__file__), "mode")).read().strip()
        if mode == "raise":
            raise RuntimeError("the judge's own bug")
        if mode == "sleep" or (mode == "sleep-b" and task.id == "t-b"):
            open(os.path.join(os.path.dirname(__file__), "asleep-" + task.id), "w").close()
            time.sleep(3600)
        return Judgement("met" if "42" in answer else "not_met", "looked for 42")
'''


def setup(tmp_path: Path, mode: str) -> Path:
    """Two tasks whose judged rubric has different prompts (no verdict cache hit between them) and
    the judge package in ``tmp_path/lib``; returns the task folder."""
    package = tmp_path / "lib" / "blamejudge"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "judges.py").write_text(JUDGE_MODULE)
    set_mode(tmp_path, mode)
    root = tmp_path / "tasks"
    write_task(root, "t-a")
    write_task(root, "t-b")
    task = json.loads((root / "t-b" / "task.json").read_text())
    task["turns"][0]["prompt"] = "Which number is printed at the bottom right?"
    (root / "t-b" / "task.json").write_text(json.dumps(task))
    return root


def set_mode(tmp_path: Path, mode: str) -> None:
    (tmp_path / "lib" / "blamejudge" / "mode").write_text(mode)


def run_args(root: Path, out: Path, *extra: str) -> list[str | Path]:
    """The arguments of ``vtb run`` of the replay agent graded by the test judge."""
    return ["run", "--tasks", root, "--model", "replay", "--judge", JUDGE, "--out", out, *extra]


def vtb_run(tmp_path: Path, root: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return vtb(*run_args(root, out, *extra), cwd=tmp_path, path=[tmp_path / "lib"])


def summary_of(run: Path) -> dict[str, Any]:
    return json.loads((run / "summary.json").read_text())


def lines_of(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]


def assert_judge_error_named(done: subprocess.CompletedProcess[str], cause: str) -> None:
    assert done.returncode == INCOMPLETE, done.stderr[-3000:]
    last = done.stderr.strip().splitlines()[-3:]
    assert last[0].startswith("incomplete: 2 task(s) ungraded by infrastructure failures"), last
    assert last[1].startswith("  judge_error (2): t-a: judge 'blame-test'") and cause in last[1], last
    assert "--resume --retry-errors" in last[2], last


def assert_fixed_run_equals_a_clean_one(tmp_path: Path, root: Path, run: Path, *extra: str) -> None:
    """``--resume --retry-errors`` with the judge fixed and, side by side, a run that never failed: the same
    summary."""
    set_mode(tmp_path, "ok")
    clean = tmp_path / "clean"
    retried, fresh = together(lambda: vtb_run(tmp_path, root, run, *extra, "--resume", "--retry-errors"),
                              lambda: vtb_run(tmp_path, root, clean, *extra))  # each its own run directory
    assert retried.returncode == 0, retried.stderr[-3000:]
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    # every field, none excepted: the summary holds no wall times, and a retried episode's new line
    # replaces the failed one for every count (its failed verdicts were never cached)
    assert summary_of(run) == summary_of(clean)
    judge = summary_of(clean)["judge"]
    assert (judge["calls"], judge["cache_hits"], judge["errors"], judge["checks"]) == (2, 0, 0, 2)
    assert summary_of(clean)["complete"] is True and summary_of(clean)["apr"] == 1.0


@pytest.mark.slow
def test_a_judge_that_raises_is_a_judge_error_until_fixed_and_retried(tmp_path: Path) -> None:
    root = setup(tmp_path, "raise")
    run = tmp_path / "run"
    failed = vtb_run(tmp_path, root, run)
    assert_judge_error_named(failed, "RuntimeError: the judge's own bug")
    summary = summary_of(run)
    assert summary["outcomes"] == {"judge_error": 2} and summary["judge"]["errors"] == 2
    assert (summary["complete"], summary["graded"], summary["apr"]) == (False, 0, None)
    assert {line["outcome"] for line in lines_of(run)} == {"judge_error"}
    assert_fixed_run_equals_a_clean_one(tmp_path, root, run)


@pytest.mark.slow
def test_a_judge_that_sleeps_an_hour_is_cut_at_the_task_timeout(tmp_path: Path) -> None:
    root = setup(tmp_path, "sleep")
    run = tmp_path / "run"
    started = time.monotonic()
    # the replay agent's episodes take well under a second, and the fixed judge answers at once:
    # 6 s leaves them a wide margin and still cuts the sleeping judge off in seconds
    failed = vtb_run(tmp_path, root, run, "--task-timeout", "6", "--concurrency", "2")
    took = time.monotonic() - started
    assert_judge_error_named(failed, "gave no verdict within its time limit")
    assert took < 120, f"the run took {took:.0f} s"  # 6 s of grading, far from the judge's hour
    assert summary_of(run)["outcomes"] == {"judge_error": 2}
    assert_fixed_run_equals_a_clean_one(tmp_path, root, run, "--task-timeout", "6", "--concurrency", "2")


@pytest.mark.slow
@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM])
def test_a_second_signal_ends_a_run_whose_judge_hangs_at_once(tmp_path: Path, second: signal.Signals) -> None:
    root = setup(tmp_path, "sleep-b")  # t-a is judged and written, t-b's judge never answers
    run = tmp_path / "run"
    process = start_vtb(*run_args(root, run), cwd=tmp_path, path=[tmp_path / "lib"],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        asleep = tmp_path / "lib" / "blamejudge" / "asleep-t-b"
        while not (run / "results.jsonl").exists() or not (run / "results.jsonl").read_text() or not asleep.exists():
            assert process.poll() is None and time.monotonic() < deadline, "t-a was never written or t-b never judged"
            time.sleep(0.1)
        # t-a is written and t-b's judge is asleep now
        process.send_signal(signal.SIGINT)
        time.sleep(1.0)
        assert process.poll() is None  # the first signal lets running tasks finish
        sent = time.monotonic()
        process.send_signal(second)
        _, stderr = process.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
    assert took < 15, f"the process took {took:.1f} s to end"
    assert process.returncode == 128 + second, stderr[-3000:]
    assert "aborted: every result written so far is kept" in stderr
    raw = (run / "results.jsonl").read_bytes()
    assert raw.endswith(b"\n") and [line["task_id"] for line in lines_of(run)] == ["t-a"]

    set_mode(tmp_path, "ok")
    resumed = vtb_run(tmp_path, root, run, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert summary_of(run)["complete"] is True and summary_of(run)["tasks"] == 2


class Replies:
    """A judge giving back whatever it was built with (a verdict, or not one)."""

    name = "odd"
    calls_model = False

    def __init__(self, reply: object) -> None:
        self.reply = reply

    def judge(self, **_: Any) -> object:
        return self.reply


@pytest.mark.parametrize("reply, problem", [
    (None, "returned a NoneType, not a vtb_agents.judges.Judgement"),
    ("met", "returned a str"),
    (Judgement("maybe", "hm"), "the status 'maybe'"),  # type: ignore[arg-type]
    (Judgement("met", 42), "justification is a int"),  # type: ignore[arg-type]
])
def test_a_reply_that_is_no_verdict_is_a_judge_error(tmp_path: Path, reply: object, problem: str) -> None:
    task = load_tasks(write_task(tmp_path / "tasks", "t"))[0]
    episode = Episode(task_id="t", model="m", turns=[TurnRecord(index=0, answer="It is 42.", status="answered")])
    grade = grade_episode(task, episode, Replies(reply))  # type: ignore[arg-type]
    judged = [v for v in grade.verdicts if v.judge == "odd"]
    assert [v.status for v in judged] == ["error"] and problem in judged[0].justification
    assert task_outcome(episode, grade) == "judge_error" and grade.graded is False


def test_a_judge_call_keeps_to_the_grading_window(tmp_path: Path) -> None:
    class Slow(Replies):
        def judge(self, **_: Any) -> object:
            time.sleep(30)
            return Judgement("met", "late")

    task = load_tasks(write_task(tmp_path / "tasks", "t"))[0]
    episode = Episode(task_id="t", model="m", turns=[TurnRecord(index=0, answer="It is 42.", status="answered")])
    started = time.monotonic()
    grade = grade_episode(task, episode, Slow(None), time_limit_s=1.0)  # type: ignore[arg-type]
    assert time.monotonic() - started < 20
    assert task_outcome(episode, grade) == "judge_error"
    assert "gave no verdict within its time limit" in next(v for v in grade.verdicts if v.judge == "odd").justification


@pytest.mark.slow
def test_a_judge_call_given_up_on_never_stores_a_verdict_later(tmp_path: Path) -> None:
    from vtb_agents.judges.cache import CachedJudge, JudgeCache

    returned = threading.Event()

    class Late(Replies):
        calls_model = True

        def judge(self, **_: Any) -> object:
            try:
                time.sleep(2.0)
                return Judgement("met", "late")
            finally:
                returned.set()

    task = load_tasks(write_task(tmp_path / "tasks", "t"))[0]
    episode = Episode(task_id="t", model="m", turns=[TurnRecord(index=0, answer="It is 42.", status="answered")])
    cache = JudgeCache(tmp_path / "verdicts.sqlite")
    judge = CachedJudge(Late(None), cache)
    try:
        given_up = grade_episode(task, episode, judge, time_limit_s=0.5)  # type: ignore[arg-type]
        assert task_outcome(episode, given_up) == "judge_error"
        assert returned.wait(60), "the abandoned call never returned"
        time.sleep(1.0)  # and whatever its caller does with its verdict is done by now
        retried = grade_episode(task, episode, judge, time_limit_s=30)  # type: ignore[arg-type]
    finally:
        cache.close()
    asked = next(v for v in retried.verdicts if v.judge == "odd")
    assert (asked.status, asked.cached, asked.model_call) == ("met", False, True)  # asked again, as never failed


def test_a_judge_that_exits_is_a_judge_error_not_the_end_of_the_run(tmp_path: Path) -> None:
    class Exits(Replies):
        def judge(self, **_: Any) -> object:
            raise SystemExit(4)

    task = load_tasks(write_task(tmp_path / "tasks", "t"))[0]
    episode = Episode(task_id="t", model="m", turns=[TurnRecord(index=0, answer="It is 42.", status="answered")])
    grade = grade_episode(task, episode, Exits(None))  # type: ignore[arg-type]
    assert task_outcome(episode, grade) == "judge_error"
    assert "failed: SystemExit: 4" in next(v for v in grade.verdicts if v.judge == "odd").justification
