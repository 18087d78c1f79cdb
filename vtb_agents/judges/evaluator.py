"""VTB rubric grading as an openevals / LangSmith evaluator.

``make_rubric_evaluator`` returns ``evaluator(*, inputs, outputs, reference_outputs) -> list[dict]``,
the signature openevals uses and ``langsmith.evaluate`` calls with keyword arguments (``inputs`` and
``reference_outputs`` are the dataset example's inputs and outputs, ``outputs`` the target run's).
Grading is :func:`vtb_agents.judges.graph.grade_episode` (checks first, the judge otherwise), so
scores match ``vtb run``. Contract:

* ``inputs``: ``{"task_id": str, "prompts": [str, ...]}``: the prompts are for the target; ``task_id``,
  if given, must match the task;
* ``outputs``: ``{"answers": [str per turn]}``, or ``{"answer": str}`` / ``{"messages": [...]}``
  (the last AI message's text) for single-turn tasks; ``{"output": ...}`` (what LangSmith makes of a
  target returning a string or a list) counts as ``answer`` / ``answers``. Missing turns (or no
  outputs: the target failed) leave the task ungraded (scores None);
* ``reference_outputs``: the task as ``Task.model_dump(mode="json")``, or a task id (a string, or
  ``{"task_id": ...}``, or nothing: then ``inputs["task_id"]``) looked up in ``task_lookup``.

Results (openevals ``EvaluatorResult`` fields; ``source_run_id`` is left for LangSmith to fill in):
``vtb_rubric_score`` (float or None when ungraded) and ``vtb_pass`` (bool or None), each with a comment.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from langchain_core.messages import AIMessage, BaseMessage

from vtb_agents.judges import RubricJudge, RuleJudge
from vtb_agents.config import CriticalRule
from vtb_agents.judges.graph import grade_episode
from vtb_agents.results import Episode, TaskGrade, TurnRecord
from vtb_agents.tasks.model import Task

SCORE_KEY = "vtb_rubric_score"
PASS_KEY = "vtb_pass"
AI_ROLES = {"ai", "assistant", "AIMessage", "AIMessageChunk"}
RubricEvaluator = Callable[..., list[dict[str, Any]]]


def _text(content: Any) -> str:
    """The text of message content: a string, or the text blocks of a block list."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else ():
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type", "text") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def _last_ai_text(messages: Iterable[Any]) -> str | None:
    """The text of the last AI message: LangChain messages, role/type dicts, or serialised (``lc``) dicts."""
    last: str | None = None
    for message in messages:
        if isinstance(message, BaseMessage):
            if isinstance(message, AIMessage):
                last = str(message.text)
            continue
        if isinstance(message, dict):
            data = message["kwargs"] if "lc" in message and isinstance(message.get("kwargs"), dict) else message
            if (data.get("role") or data.get("type")) in AI_ROLES:
                last = _text(data.get("content"))
    return last


def answers_from_outputs(outputs: Mapping[str, Any] | None, turns: int) -> list[str]:
    """Per-turn answers from a target's outputs (see the module contract)."""
    outputs = dict(outputs or {})
    if "output" in outputs and not {"answers", "answer", "messages"} & set(outputs):
        # LangSmith wraps a target's non-dict return value as {"output": value}
        outputs = {"answers" if isinstance(outputs["output"], list) else "answer": outputs["output"]}
    if "answers" in outputs:
        answers = outputs["answers"]
        if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
            raise ValueError("outputs['answers'] must be a list of strings, one per turn")
        if len(answers) > turns:
            raise ValueError(f"outputs hold {len(answers)} answers for a {turns}-turn task")
        return answers
    if "answer" in outputs or "messages" in outputs:
        if turns != 1:
            raise ValueError(f"a {turns}-turn task needs outputs['answers'] (one answer per turn)")
        if "answer" in outputs:
            if not isinstance(outputs["answer"], str):
                raise ValueError("outputs['answer'] must be a string")
            return [outputs["answer"]]
        text = _last_ai_text(outputs["messages"] or [])
        return [] if text is None else [text]
    return []


def resolve_task(inputs: Mapping[str, Any] | None, reference_outputs: Any,
                 lookup: Mapping[str, Task]) -> Task:
    """The task to grade against: serialised in ``reference_outputs`` or looked up by id."""
    inputs = inputs or {}
    if isinstance(reference_outputs, Task):
        task = reference_outputs
    elif isinstance(reference_outputs, Mapping) and "turns" in reference_outputs:
        task = Task.model_validate(dict(reference_outputs))
    else:
        ref_id = reference_outputs.get("task_id") if isinstance(reference_outputs, Mapping) else reference_outputs
        task_id = ref_id or inputs.get("task_id")
        if not task_id:
            raise ValueError("no task: reference_outputs holds neither a task nor a task id, and inputs no 'task_id'")
        if str(task_id) not in lookup:
            raise ValueError(f"unknown task id {task_id!r} (not in the evaluator's task lookup)")
        task = lookup[str(task_id)]
    given = inputs.get("task_id")
    if given and given != task.id:
        raise ValueError(f"inputs['task_id'] is {given!r} but the reference task is {task.id!r}")
    return task


def _comments(grade: TaskGrade) -> tuple[str, str]:
    if not grade.graded:
        reason = f"ungraded: {grade.reason}"
        return reason, reason
    judged = [v for v in grade.verdicts if v.status in ("met", "not_met")]
    met = sum(v.weight for v in judged if v.status == "met")
    unjudged = len(grade.verdicts) - len(judged)
    score = (f"{met}/{sum(v.weight for v in judged)} rubric weight met over {len(judged)} judged rubric(s)"
             + (f"; {unjudged} unjudged (not counted)" if unjudged else ""))
    failed = [v for v in judged if v.critical and v.status == "not_met"]
    if not failed:
        return score, f"passed: all {sum(v.critical for v in judged)} critical rubric(s) met"
    details = "; ".join(f"turn {v.turn + 1} {v.rubric_id}: {v.justification}" for v in failed)
    return score, f"failed: {len(failed)} critical rubric(s) not met: {details}"


def make_rubric_evaluator(task_lookup: Mapping[str, Task] | Iterable[Task] | None = None,
                          judge: RubricJudge | None = None,
                          critical_rule: CriticalRule = "weight") -> RubricEvaluator:
    """An openevals-style evaluator grading answers against VTB rubrics (see the module contract).

    ``judge`` is a :class:`RubricJudge` (None: the ``rule`` judge); the judge a spec names is
    :func:`vtb_agents.runner.plan.plan_judge`'s (``plan_judge("openai:o4-mini").judge``).
    """
    lookup = dict(task_lookup) if isinstance(task_lookup, Mapping) else {t.id: t for t in task_lookup or ()}
    rubric_judge = judge if judge is not None else RuleJudge()

    def vtb_rubric_evaluator(*, inputs: dict[str, Any] | None = None, outputs: dict[str, Any] | None = None,
                             reference_outputs: Any = None, **_: Any) -> list[dict[str, Any]]:
        """Grade ``outputs`` against the task's rubrics; two results: score and pass."""
        task = resolve_task(inputs, reference_outputs, lookup)
        answers = answers_from_outputs(outputs, len(task.turns))
        episode = Episode(task_id=task.id, model="evaluator",
                          turns=[TurnRecord(index=i, answer=a, status="answered") for i, a in enumerate(answers)])
        grade = grade_episode(task, episode, rubric_judge, critical_rule)
        score_comment, pass_comment = _comments(grade)
        metadata = {"task_id": task.id, "graded": grade.graded, "judge": rubric_judge.name,
                    "critical_rule": critical_rule,
                    "verdicts": [{"turn": v.turn + 1, "rubric_id": v.rubric_id, "status": v.status,
                                  "weight": v.weight, "critical": v.critical, "source": v.judge,
                                  "justification": v.justification} for v in grade.verdicts]}
        return [{"key": SCORE_KEY, "score": grade.score, "comment": score_comment, "metadata": metadata},
                {"key": PASS_KEY, "score": grade.passed, "comment": pass_comment, "metadata": {"task_id": task.id}}]

    return vtb_rubric_evaluator
