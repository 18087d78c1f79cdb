"""The grading graph for Studio: a task and one answer per turn in, per-rubric verdicts and score out.

```
START -> grade (the grading graph of vtb run, a subgraph: one judge call per rubric) -> END
```
Input ``{"task": <task.json object>, "answers": ["...", ...]}`` (images are not needed); output
``{"grade": {"verdicts": [...], "score", "passed", "graded", "reason", "by_turn", ...}}``. The judge
and the critical rule come from the context (``judge``, ``critical_rule``).
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from vtb_agents.judges.graph import GradingContext, build_grading_graph
from vtb_agents.results import Episode, TurnRecord
from vtb_agents.strategies.base import as_node
from vtb_agents.config import RunConfig
from vtb_agents.studio.context import context_of, judge_for
from vtb_agents.studio.inputs import task_from_json


class GradingInput(TypedDict):
    """A task.json object and the answer given at each of its turns."""

    task: dict[str, Any]
    answers: list[str]


class GradingOutput(TypedDict):
    """The task's grade: per-rubric verdicts, score, pass and why a task is ungraded."""

    grade: dict[str, Any]


class StudioGradingState(GradingInput, total=False):
    """Input and grade."""

    grade: dict[str, Any]


def answers_episode(task_id: str, model: str, answers: Any, num_turns: int) -> Episode:
    """An episode whose turns gave ``answers`` (checked: one string per turn)."""
    if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        raise ValueError("'answers' must be a list of strings, one answer per turn")
    if len(answers) != num_turns:
        raise ValueError(f"'answers' has {len(answers)} answer(s) but task {task_id!r} has {num_turns} turn(s): "
                         "give one answer per turn")
    return Episode(task_id=task_id, model=model,
                   turns=[TurnRecord(index=i, answer=answer, status="answered") for i, answer in enumerate(answers)])


def build_studio_grading_graph() -> CompiledStateGraph[StudioGradingState, RunConfig, GradingInput, GradingOutput]:
    """Compile the Studio grading graph."""
    vtb_grading = build_grading_graph()

    def grade(state: StudioGradingState, config: RunnableConfig, runtime: Runtime[RunConfig]) -> dict[str, Any]:
        ctx = context_of(runtime.context)
        task = task_from_json(state["task"], with_images=False)
        episode = answers_episode(task.id, ctx.model, state.get("answers"), len(task.turns))
        out = vtb_grading.invoke({"task": task, "episode": episode}, config,
                                 context=GradingContext(judge=judge_for(ctx.judge), critical_rule=ctx.critical_rule))
        return {"grade": out["grade"].model_dump(mode="json")}

    builder = StateGraph(StudioGradingState, context_schema=RunConfig, input_schema=GradingInput,
                         output_schema=GradingOutput)
    builder.add_node("grade", as_node(grade))
    builder.add_edge(START, "grade")
    builder.add_edge("grade", END)
    return builder.compile(name="grading")
