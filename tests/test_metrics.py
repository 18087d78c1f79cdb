"""``summary.json`` computed by hand: APR, ARS and every breakdown, tool success and volume.

Every expected value is a literal worked out in the comments beside it, never a value the code under
test produced: a plausible bug in the metrics (APR as "score == 1", a breakdown grouped by the wrong
field, a failed call counted as a success) changes at least one of them.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from vtb_agents.analysis.cost import RunPrices
from vtb_agents.analysis.metrics import call_succeeded, summarize, tool_metrics
from vtb_agents.episodes.driver import turn_record
from vtb_agents.models.presets import prices_for
from vtb_agents.models.replay import turn_message_id
from vtb_agents.results import Episode, RubricVerdict, TaskGrade, TaskResult, ToolCallRecord, TurnRecord


def call(name: str, output: str, *, ok: bool = True, images: int = 0, code: str = "") -> ToolCallRecord:
    return ToolCallRecord(turn=0, round=0, id=f"c-{name}-{output[:8]}", name=name, args={"code": code} if code else {},
                          ok=ok, output=output, images=[{"name": f"{i}.png", "ref": f"img{i}"} for i in range(images)])


def result(task_id: str, category: str, domain: str, turncase: str, *, score: float | None, passed: bool | None,
           outcome: str, calls: tuple[ToolCallRecord, ...] = (),
           verdicts: tuple[RubricVerdict, ...] = ()) -> TaskResult:
    """A result line with a literal grade (graded when ``score`` is given)."""
    episode = Episode(task_id=task_id, model="m", outcome=outcome,
                      status="error" if outcome in ("provider_error", "step_limit") else "completed",
                      turns=[TurnRecord(index=0, answer="an answer", status="answered", tool_calls=list(calls))])
    grade = TaskGrade(score=score, passed=passed, graded=score is not None, verdicts=list(verdicts),
                      reason=None if score is not None else "ungraded")
    return TaskResult(task_id=task_id, category=category, category_raw=category, domain=domain, domain_raw=domain,
                      turncase=turncase, model="m", episode=episode, grade=grade, duration_s=1.0, outcome=outcome)


def verdict(weight: int, status: str, *, critical_flag: bool, judge: str = "rule",
            cached: bool = False) -> RubricVerdict:
    return RubricVerdict(rubric_id=f"r{weight}", turn=0, weight=weight, critical=weight >= 4,
                         critical_flag=critical_flag, status=status, judge=judge, cached=cached,
                         model_call=judge not in ("rule", "check", "episode") and not cached)


CODE = "python_image_processing"
RUN = [
    # A passes with a score below 1 (a critical rubric met, a minor one missed)
    result("A", "Chart Q&A", "finance", "single", score=0.75, passed=True, outcome="answered",
           calls=(call(CODE, "cropped to the legend\n", code="print('cropped to the legend')"),
                  call("calculator", "Error: division by zero", ok=False)),
           verdicts=(verdict(5, "met", critical_flag=True, judge="o4-mini", cached=True),
                     verdict(2, "not_met", critical_flag=True, judge="check"))),
    # B: a perfect multi-turn task
    result("B", "Chart Q&A", "science", "multi", score=1.0, passed=True, outcome="answered",
           calls=(call("calculator", '{"ok": true, "expression": "1+1", "result": 2}'),),
           verdicts=(verdict(4, "met", critical_flag=False, judge="o4-mini"),)),
    # C fails a critical rubric at the round cap
    result("C", "Map Reading", "finance", "multi", score=0.25, passed=False, outcome="tool_round_cap",
           calls=(call("web_search", '{"ok": true, "query": "x", "results": []}'),
                  call("web_search", '{"ok": true, "query": "x", "error": "rate limited"}'),
                  call(CODE, "", images=1, code="im.save('transformed_image_0.png')")),
           verdicts=(verdict(5, "not_met", critical_flag=True, judge="o4-mini"),
                     verdict(1, "unjudged", critical_flag=False))),
    # D: the provider failed, ungraded and out of APR and ARS
    result("D", "Map Reading", "finance", "single", score=None, passed=None, outcome="provider_error",
           verdicts=(verdict(5, "error", critical_flag=True, judge="episode"),)),
    # E: graded after the step limit, the unanswered part not met
    result("E", "Chart Q&A", "science", "single", score=0.5, passed=False, outcome="step_limit",
           calls=(call(CODE, "", code="x = 1"),)),
    # F: a critical rubric nobody could judge: ungraded, but not an infrastructure failure
    result("F", "Map Reading", "science", "single", score=None, passed=None, outcome="unjudged",
           verdicts=(verdict(5, "error", critical_flag=True, judge="o4-mini"),)),
]


def paper(blocks: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The paper's figures of each breakdown group (the intervals are pinned in test_uncertainty.py)."""
    return {name: {key: block[key] for key in ("n", "graded", "apr", "ars")} for name, block in blocks.items()}


def test_summary_of_a_mixed_run_matches_the_hand_computed_values():
    summary = summarize(RUN, judge_name="o4-mini", prices=RunPrices(judge=prices_for("o4-mini")), expected=7,
                        extra={"model": "replay"})
    # 6 tasks; A, B, C, E graded; D (provider) and F (unjudged) not
    assert (summary["tasks"], summary["graded"], summary["ungraded"], summary["missing"]) == (6, 4, 2, 1)
    assert summary["apr"] == 0.5  # A and B pass, C and E fail: 2 / 4 (A passes with score 0.75)
    assert summary["ars"] == 0.625  # (0.75 + 1 + 0.25 + 0.5) / 4 = 2.5 / 4
    assert summary["complete"] is False  # D is an infrastructure failure, and one expected task is missing
    assert summary["infrastructure_errors"] == {"count": 1, "task_ids": ["D"]}  # F is ungraded, not infrastructure
    assert summary["outcomes"] == {"answered": 2, "provider_error": 1, "step_limit": 1, "tool_round_cap": 1,
                                   "unjudged": 1}
    assert paper(summary["by_category"]) == {
        "Chart Q&A": {"n": 3, "graded": 3, "apr": 0.666667, "ars": 0.75},  # A B E: 2/3 pass; (0.75+1+0.5)/3
        "Map Reading": {"n": 3, "graded": 1, "apr": 0.0, "ars": 0.25},  # C D F: only C graded, failed at 0.25
    }
    assert paper(summary["by_domain"]) == {
        "finance": {"n": 3, "graded": 2, "apr": 0.5, "ars": 0.5},  # A C D: 1/2 pass; (0.75+0.25)/2
        "science": {"n": 3, "graded": 2, "apr": 0.5, "ars": 0.75},  # B E F: 1/2 pass; (1+0.5)/2
    }
    assert paper(summary["by_turncase"]) == {
        "multi": {"n": 2, "graded": 2, "apr": 0.5, "ars": 0.625},  # B C: 1/2; (1+0.25)/2
        "single": {"n": 4, "graded": 2, "apr": 0.5, "ars": 0.625},  # A D E F: A, E graded; (0.75+0.5)/2
    }
    assert summary["tool_metrics"]["proactivity"] == 0.666667  # A B C E called a tool: 4 / 6
    assert summary["tool_metrics"]["volume"] == 1.166667  # 2 + 1 + 3 + 0 + 1 + 0 = 7 calls over 6 tasks
    # succeeded: A's print, B's result, C's image; failed: A's error, C's empty search and error payload, E's silence
    assert summary["tool_metrics"]["success_rate"] == 0.428571  # 3 / 7
    assert summary["tool_metrics"]["calls"] == 7
    assert summary["tool_metrics"]["by_tool"] == {"calculator": 2, CODE: 3, "web_search": 2}
    # judge calls: A's first (cached) is not a call; B's, C's first and F's are: 3. checks: A's second.
    # errors: F's (D's is the episode's, not the judge's)
    assert summary["judge"] == {"model": "o4-mini", "calls": 3, "checks": 1, "unjudged": 1,
                                "errors": 1, "cache_hits": 1, "pending": 0}
    # weight >= 4 against the dataset's flag: A's weight-2 flagged rubric, B's unflagged weight 4
    assert summary["critical_disagreements"] == 2
    # D and E errored
    assert summary["episodes"] == {"errors": 2, "task_timeout": 0, "tool_round_cap": 0, "context_exceeded": 0}
    assert summary["model"] == "replay"


def test_a_complete_run_says_so_and_an_empty_run_has_no_rates():
    graded = [r for r in RUN if r.grade.graded]
    summary = summarize(graded, judge_name="rule", prices=RunPrices(), expected=4)
    assert summary["complete"] is True and summary["missing"] == 0
    assert summary["infrastructure_errors"] == {"count": 0, "task_ids": []}
    empty = summarize([], judge_name="rule", prices=RunPrices())
    assert (empty["tasks"], empty["apr"], empty["ars"], empty["complete"]) == (0, None, None, True)
    assert empty["tool_metrics"]["proactivity"] is None and empty["tool_metrics"]["success_rate"] is None
    assert summarize(RUN[:1], judge_name="rule", prices=RunPrices(), expected=0)["missing"] == 0  # never negative


def turn_calls(*outcomes: tuple[str, dict[str, Any], ToolMessage]) -> list[ToolCallRecord]:
    """The tool calls of one real turn (as the episode driver records them) from (tool, args, reply)."""
    messages: list[Any] = [HumanMessage("What is shown?", id=turn_message_id(0))]
    for i, (name, args, reply) in enumerate(outcomes):
        messages.append(AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"call-{i}"}]))
        reply.tool_call_id = f"call-{i}"
        messages.append(reply)
    messages.append(AIMessage("The answer."))
    return turn_record(messages, 0, "answered").tool_calls


IMAGE = {"ok": True, "images": [{"ref": "sha256-abc", "name": "transformed_image_0.png"}]}


@pytest.mark.parametrize("name, args, reply, succeeded", [
    pytest.param("calculator", {"expression": "1/0"},
                 ToolMessage("Error: ZeroDivisionError: division by zero", tool_call_id="", status="error"),
                 False, id="error ToolMessage"),
    pytest.param(CODE, {"code": "x = 1"}, ToolMessage("", tool_call_id="", artifact={"ok": True}),
                 False, id="code call that printed and saved nothing"),
    pytest.param(CODE, {"code": "print(7)"}, ToolMessage("7\n", tool_call_id="", artifact={"ok": True}),
                 True, id="code call that printed"),
    pytest.param(CODE, {"code": "1/0"}, ToolMessage("Traceback ...\nZeroDivisionError", tool_call_id="",
                                                    artifact={"ok": False}),
                 False, id="code call that raised (artifact ok false)"),
    pytest.param("web_search", {"query": "x"}, ToolMessage('{"ok": true, "query": "x", "results": []}',
                                                           tool_call_id=""),
                 False, id="empty results"),
    pytest.param("web_search", {"query": "x"}, ToolMessage('{"ok": true, "query": "x", "results": [{"title": "t"}]}',
                                                           tool_call_id=""),
                 True, id="non-empty results"),
    pytest.param("fetch_url", {"url": "u"}, ToolMessage('{"url": "u", "error": "HTTP 404", "text": "Not found"}',
                                                        tool_call_id=""),
                 False, id="error payload"),
    pytest.param("calculator", {"expression": "0*1"}, ToolMessage('{"expression": "0*1", "result": 0}',
                                                                  tool_call_id=""),
                 True, id="zero is a result"),
    pytest.param(CODE, {"code": "im.save('t.png')"}, ToolMessage("", tool_call_id="", artifact=IMAGE),
                 True, id="image-only call"),
    pytest.param("weather", {"location": "x"}, ToolMessage("   \n", tool_call_id=""),
                 False, id="whitespace only"),
    pytest.param("fetch_url", {"url": "u"}, ToolMessage('{"url": "u", "text": " \\n "}', tool_call_id=""),
                 False, id="a JSON field of whitespace only"),
    pytest.param("weather", {"location": "x"}, ToolMessage('{"ok": true, "location": "x", "units": "metric"}',
                                                           tool_call_id=""),
                 False, id="only status and echoed keys"),
    pytest.param("weather", {"location": "x"}, ToolMessage('{"location": "x", "forecast": {"today": null}}',
                                                           tool_call_id=""),
                 False, id="nested nulls"),
])
def test_tool_success_of_each_kind_of_reply(name, args, reply, succeeded):
    [record] = turn_calls((name, args, reply))
    assert call_succeeded(record) is succeeded
    metrics = tool_metrics([result("T", "c", "d", "single", score=1.0, passed=True, outcome="answered",
                                   calls=(record,))])
    assert metrics["success_rate"] == (1.0 if succeeded else 0.0)
    assert (metrics["calls"], metrics["volume"], metrics["proactivity"]) == (1, 1.0, 1.0)


def test_success_rate_and_volume_over_a_turn_of_mixed_replies():
    records = turn_calls(
        ("calculator", {"expression": "1/0"}, ToolMessage("Error: division by zero", tool_call_id="", status="error")),
        (CODE, {"code": "x = 1"}, ToolMessage("", tool_call_id="", artifact={"ok": True})),
        ("web_search", {"query": "x"}, ToolMessage(json.dumps({"ok": True, "results": []}), tool_call_id="")),
        ("fetch_url", {"url": "u"}, ToolMessage(json.dumps({"error": "timeout"}), tool_call_id="")),
        (CODE, {"code": "im.save('t.png')"}, ToolMessage("", tool_call_id="", artifact=IMAGE)),
    )
    task = result("T", "c", "d", "single", score=1.0, passed=True, outcome="answered", calls=tuple(records))
    idle = result("U", "c", "d", "single", score=1.0, passed=True, outcome="answered")
    metrics = tool_metrics([task, idle])
    assert [call_succeeded(r) for r in records] == [False, False, False, False, True]
    assert metrics["success_rate"] == 0.2  # 1 of 5 calls
    assert metrics["volume"] == 2.5  # 5 calls + 0 calls over 2 tasks
    assert metrics["proactivity"] == 0.5  # 1 of 2 tasks used a tool
    assert metrics["by_tool"] == {"calculator": 1, "fetch_url": 1, CODE: 2, "web_search": 1}


def test_judge_episode_usage_cost_and_image_op_counts_by_hand():
    from vtb_agents.results import TaskUsage, TokenUsage

    judged = result("J", "c", "d", "single", score=0.5, passed=False, outcome="task_timeout",
                    calls=(call(CODE, "ok\n", code="im.crop((0, 0, 5, 5))\nim.rotate(90)"),
                           call("calculator", "4", code="im.crop((0, 0, 1, 1))")),  # not the vision tool: no ops
                    verdicts=(verdict(5, "met", critical_flag=True, judge="o4-mini"),
                              verdict(4, "met", critical_flag=True, judge="o4-mini"),
                              verdict(3, "not_met", critical_flag=False, judge="o4-mini", cached=True),
                              verdict(2, "met", critical_flag=False, judge="check"),
                              verdict(1, "error", critical_flag=False, judge="o4-mini")))
    judged.episode.turns[0].status = "tool_round_cap"
    judged.usage = TaskUsage(model=TokenUsage(calls=1, input_tokens=1_000_000, output_tokens=100_000),
                             judge=TokenUsage(calls=3, input_tokens=100_000, output_tokens=10_000))
    summary = summarize([judged], judge_name="o4-mini", prices=RunPrices(prices_for("gpt-4o"), prices_for("o4-mini")),
                        extra={"model": "gpt-4o"})
    # calls: the weight 5, 4 and 1 verdicts (the weight-3 one came from the cache); checks: the weight-2 one
    assert summary["judge"] == {"model": "o4-mini", "calls": 3, "checks": 1, "unjudged": 0, "errors": 1,
                                "cache_hits": 1, "pending": 0}
    assert summary["episodes"] == {"errors": 0, "task_timeout": 1, "tool_round_cap": 1, "context_exceeded": 0}
    rejected = result("K", "c", "d", "single", score=0.0, passed=False, outcome="context_exceeded")
    assert summarize([rejected, judged], judge_name="rule", prices=RunPrices())["episodes"] == {
        "errors": 0, "task_timeout": 1, "tool_round_cap": 1, "context_exceeded": 1}
    assert summary["usage"]["model"]["input_tokens"] == 1_000_000 and summary["usage"]["tasks_without_usage"] == 0
    # gpt-4o at 2.50 / 10.00 per million: 1,000,000 x 2.5 + 100,000 x 10 = 3.5 USD; the judge, o4-mini at
    # 1.10 / 4.40: 100,000 x 1.1 + 10,000 x 4.4 = 0.154 USD
    assert (summary["cost"]["model"], summary["cost"]["judge"], summary["cost"]["total"]) == (3.5, 0.154, 3.654)
    assert summary["tool_metrics"]["image_ops"] == {"cropping": 1, "resizing": 0, "rotation": 1, "flipping": 0,
                                                    "brightness": 0, "contrast": 0, "editing": 0, "other": 0}
    # no infrastructure failure but a missing task: still incomplete
    assert summarize([judged], judge_name="rule", prices=RunPrices(), expected=2)["complete"] is False
