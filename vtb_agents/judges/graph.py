"""The grading graph: fan out one judge call per rubric (``Send``), then aggregate to a task grade.

```
START --Send per rubric--> judge_rubric --> aggregate --> END
```
Input: ``{"task": Task, "episode": Episode}``; output adds ``grade`` (a :class:`TaskGrade`).
The judge, the critical rule and a judge call's time limit come from a :class:`GradingContext`
passed as ``context=``; :func:`grade_episode` may also give the whole grading a time window (the
current deadline of :mod:`vtb_agents.timebox`, which every judge call keeps to).
"""

from __future__ import annotations

import operator
from contextlib import nullcontext
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Annotated, Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send
from typing_extensions import TypedDict

from vtb_agents.judges.base import RubricJudge
from vtb_agents.judges.bounded import judge_time_limit
from vtb_agents.config import CriticalRule
from vtb_agents.judges.grade import rubric_verdict, score_verdicts
from vtb_agents.judges.record import record_verdict
from vtb_agents.strategies.base import as_node
from vtb_agents.transcript import JUDGING_STEP, STEP_METADATA_KEY
from vtb_agents.results import Episode, RubricVerdict, TaskGrade
from vtb_agents.tasks.model import Task
from vtb_agents.timebox import until


class GradingState(TypedDict, total=False):
    """A task, its episode, the verdicts collected so far and the final grade."""

    task: Task
    episode: Episode
    verdicts: Annotated[list[tuple[int, RubricVerdict]], operator.add]
    grade: TaskGrade


class RubricJob(TypedDict):
    """What one fanned-out judge call receives."""

    task: Task
    episode: Episode
    index: int


@dataclass(frozen=True)
class GradingContext:
    """The judge (possibly cached), the critical-rubric rule and a judge call's own time limit
    (:func:`~vtb_agents.judges.bounded.judge_time_limit`) of a grading run."""

    judge: RubricJudge
    critical_rule: CriticalRule = "weight"
    call_limit_s: float = field(default_factory=judge_time_limit)


def _fan_out(state: GradingState) -> list[Send] | str:
    rubrics = state["task"].rubrics
    if not rubrics:
        return "aggregate"
    return [Send("judge_rubric", {"task": state["task"], "episode": state["episode"], "index": i})
            for i in range(len(rubrics))]


def _judge_rubric(state: RubricJob, runtime: Runtime[GradingContext], config: RunnableConfig) -> dict[str, Any]:
    turn, rubric = state["task"].rubrics[state["index"]]
    ctx = runtime.context
    verdict = rubric_verdict(state["task"], state["episode"], ctx.judge, turn, rubric, ctx.critical_rule,
                             ctx.call_limit_s)
    record_verdict(config, state["task"], state["episode"], ctx.judge, state["index"], verdict)
    return {"verdicts": [(state["index"], verdict)]}


def _aggregate(state: GradingState, runtime: Runtime[GradingContext]) -> dict[str, Any]:
    ordered = [verdict for _, verdict in sorted(state.get("verdicts", []), key=lambda item: item[0])]
    return {"grade": score_verdicts(ordered, runtime.context.critical_rule)}


@lru_cache(maxsize=1)
def build_grading_graph() -> CompiledStateGraph[GradingState, GradingContext, GradingState, GradingState]:
    """Compile the grading graph (stateless, so one compiled graph serves every task)."""
    builder = StateGraph(GradingState, context_schema=GradingContext)
    builder.add_node("judge_rubric", as_node(_judge_rubric))
    builder.add_node("aggregate", _aggregate)
    builder.add_conditional_edges(START, _fan_out, ["judge_rubric", "aggregate"])
    builder.add_edge("judge_rubric", "aggregate")
    builder.add_edge("aggregate", END)
    return builder.compile(name="vtb_grading")


def grade_episode(task: Task, episode: Episode, judge: RubricJudge, critical_rule: CriticalRule = "weight",
                  *, max_concurrency: int | None = None, callbacks: list[BaseCallbackHandler] | None = None,
                  time_limit_s: float | None = None, call_limit_s: float | None = None) -> TaskGrade:
    """Grade ``episode`` of ``task`` through the grading graph (judge calls run in parallel).

    ``callbacks`` see the grading run: the task's transcript recorder gets every rubric's verdict
    (a custom event, cached ones included) with the judge model calls made for it. Each judge call
    may take ``call_limit_s`` (default :func:`~vtb_agents.judges.bounded.judge_time_limit`) and must
    end within ``time_limit_s`` of the grading's start (``vtb run --task-timeout``; None: no window):
    a judge that does not is a judge error (:mod:`vtb_agents.judges.bounded`)."""
    config: RunnableConfig = {"run_name": f"vtb-grade:{task.id}", "callbacks": list(callbacks or []),
                              "metadata": {"task_id": task.id, "judge": judge.name, STEP_METADATA_KEY: JUDGING_STEP}}
    if max_concurrency:
        config["max_concurrency"] = max_concurrency
    context = GradingContext(judge=judge, critical_rule=critical_rule,
                             call_limit_s=judge_time_limit() if call_limit_s is None else call_limit_s)
    window = nullcontext() if time_limit_s is None else until(time.monotonic() + time_limit_s)
    with window:
        state = build_grading_graph().invoke({"task": task, "episode": episode}, config, context=context)
    return state["grade"]
