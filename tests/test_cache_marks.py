"""Calls answered from a cache are marked (docs/how-to/replay-offline.md): a `--model-cache-only`
replay through the real `vtb` CLI (a subprocess; real ChatOpenAI clients against local servers, real
sandboxes) marks every model call and judge call as cached in its transcript, in `vtb transcript`, on
the task pages and in the terminal, and the report's counts equal `usage` and `judge` of summary.json."""

from __future__ import annotations

import html
import json
import re

import pytest

from support.openai_server import OpenAIServer
from support.scripted_vision import VisionModel
from support.cli import openai_env, vtb

from conftest import write_task
from vtb_agents.rundir.layout import task_page_file
from vtb_agents.rundir.transcripts import read_transcript

IDS = ["t-corner", "t-corner-2"]
JUDGE = "judge-test"


def model_and_judge(body: dict) -> object:
    """The vision model, and an LLM judge that finds every rubric met."""
    if body["model"] == JUDGE:
        return json.dumps({"verdict": "met", "justification": "Matches."})
    return VISION(body)


VISION = VisionModel()


def refuse(body: dict) -> int:
    return 500  # a replay must never get here




def kv_rows(page: str, caption: str) -> list[tuple[str, str]]:
    """The (name, value) rows of the report's key-value table with ``caption``."""
    table = page.split(f"<caption>{html.escape(caption)}</caption>", 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td></tr>", table)
    return [(html.unescape(k), html.unescape(v)) for k, v in rows]


@pytest.mark.slow
def test_a_cache_only_replay_marks_every_call_cached_and_the_report_counts_equal_the_summary(tmp_path):
    cache = tmp_path / "cache.sqlite"
    for number, task_id in enumerate(IDS):  # one rubric with a check, one for the LLM judge
        folder = write_task(tmp_path / "tasks", task_id)
        task = json.loads((folder / "task.json").read_text())
        task["turns"][0]["prompt"] += " " * number  # a request of its own
        (folder / "task.json").write_text(json.dumps(task))
    common = ["run", "--model", "openai:vision-test", "--judge", f"openai:{JUDGE}", "--tasks", str(tmp_path / "tasks"),
              "--model-cache", str(cache)]
    with OpenAIServer(model_and_judge) as server:
        recorded = vtb(*common, "--out", str(tmp_path / "recorded"), env=openai_env(server.base_url), columns=100,
                       timeout=600)
        assert recorded.returncode == 0, recorded.stderr
    printed = " ".join(recorded.stdout.split())
    assert re.search(r"model cache: 0 of \d+ model call\(s\), 0 of \d+ judge call\(s\)", printed)
    with OpenAIServer(refuse) as sentinel:
        replay = vtb(*common, "--model-cache-only", "--out", str(tmp_path / "replayed"),
                     env=openai_env(sentinel.base_url), columns=100, timeout=600)
        assert replay.returncode == 0, replay.stderr
    assert sentinel.requests == []
    run = tmp_path / "replayed"
    summary = json.loads((run / "summary.json").read_text())
    usage, judge = summary["usage"], summary["judge"]
    model_calls, judge_calls = usage["model"]["calls"], usage["judge"]["calls"]
    assert model_calls > 0 and judge_calls > 0
    assert usage["model_from_cache"]["calls"] == model_calls and usage["judge_from_cache"]["calls"] == judge_calls
    assert usage["cache_hits"] == model_calls + judge_calls and judge["cache_hits"] == 0  # a fresh verdict cache
    assert (f"model cache: {model_calls} of {model_calls} model call(s), {judge_calls} of {judge_calls} judge "
            "call(s); verdict cache: 0 verdict(s) reused") in " ".join(replay.stdout.split())

    events = 0
    for task_id in IDS:
        transcript = read_transcript(run, task_id)
        model = transcript.of_kind("model")
        calls = [call for event in transcript.of_kind("judge") for call in event.calls]
        assert model and calls and all(e.cached for e in model) and all(c.cached for c in calls)
        events += len(model)
        counts = transcript.cache_counts()
        assert (counts.model_cached, counts.judge_calls_cached) == (len(model), len(calls))
        shown = vtb("transcript", str(run), task_id, env=openai_env(sentinel.base_url), columns=100, timeout=600)
        assert shown.returncode == 0, shown.stderr
        assert f"model cache: {len(model)} of {len(model)} model call(s), {len(calls)} of {len(calls)} judge" in \
            " ".join(shown.stdout.split())
        headings = [line for line in shown.stdout.splitlines() if line.startswith("━━ #") and " model " in line]
        assert len(headings) == len(model) and all("cached (model cache)" in line for line in headings)
        page = task_page_file(run, task_id).read_text()
        assert page.count('data-cached="yes"') == len(model) and 'data-cached="no"' not in page
        assert f"model cache: {len(model)} of {len(model)} model call(s)" in html.unescape(page)
    assert events == model_calls

    report = (run / "report.html").read_text()
    verdicts = dict(kv_rows(report, "Verdicts"))
    assert verdicts["LLM judge verdicts (a judge model asked)"] == str(judge["calls"])
    assert verdicts["verdict cache hits (verdicts reused, no judge call)"] == str(judge["cache_hits"])
    calls_rows = kv_rows(report, "Calls and the model cache (--model-cache)")
    assert calls_rows == [("model calls", str(model_calls)), ("of them answered by the model cache", str(model_calls)),
                          ("judge calls", str(judge_calls)), ("of them answered by the model cache", str(judge_calls)),
                          ("model cache hits in all (model and judge)", str(usage["cache_hits"]))]
