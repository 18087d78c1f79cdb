"""Failure taxonomy of a run: why did each failed task fail? (VTB_FACTS "Tool-use analytics").

An LLM classifier (any ``provider:model`` or an injected chat model, structured output, retried with
backoff) puts every graded, failed task in one of the paper's categories: visual perception,
reasoning, calculation, other. A classifier that still fails gives category ``error``: the task stays
in the report, visibly. A deterministic pre-pass leaves out tasks that are not model failures (an
errored episode, an ungraded task) and counts them separately. Output: ``RUN_DIR/failures.json``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal, Sequence

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from vtb_agents.models.retry import BACKOFF_INITIAL_S, BACKOFF_MAX_S, with_backoff
from vtb_agents.results import TaskResult, is_infrastructure
from vtb_agents.rundir.read import TaskSource, open_finished_run
from vtb_agents.rundir.store import write_json_atomic
from vtb_agents.tasks.model import Task

FAILURES_FILE = "failures.json"
PROMPT_VERSION = "vtb-failures-v1"
CATEGORIES: tuple[str, ...] = ("visual_perception", "reasoning", "calculation", "other")
ERROR = "error"
"""The category of a task the classifier could not classify."""

SYSTEM = (
    "You diagnose why an AI model failed one task of a visual question-answering benchmark. The model saw "
    "one or more images and could call tools (image cropping and enhancement, code, a calculator, web "
    "search). You cannot see the images: the reference answers are the truth about them. Your job is to "
    "name the single kind of mistake that made the task fail."
)
GUIDE = (
    "Categories:\n"
    "- visual_perception: the model got something in the image wrong or overlooked it (a value, text, "
    "object, count, colour, position, or a change between images), so it started from a false observation.\n"
    "- reasoning: the model's observations agree with the reference, but it drew the wrong conclusion, "
    "misread the question, used the wrong method, or did not ask for clarification when it should have.\n"
    "- calculation: the inputs and the method were right, but an arithmetic, numeric, unit or rounding "
    "step went wrong.\n"
    "- other: none of these, e.g. an empty, cut-off or off-topic answer, a refusal, or a formatting or "
    "instruction-following problem.\n"
    "If several apply, name the first mistake in the chain (perception, then reasoning, then calculation).\n"
    "Reply with the category and a one- or two-sentence explanation that cites the evidence."
)


class FailureLabel(BaseModel):
    """The structured reply the classifier model must give."""

    category: Literal["visual_perception", "reasoning", "calculation", "other"] = Field(
        description="The kind of mistake that made the task fail.")
    explanation: str = Field(description="One or two sentences citing the evidence.")


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else f"{text[:limit]}... [{len(text) - limit} more chars]"


def failure_prompt(task: Task, result: TaskResult, *, answer_chars: int = 2000, output_chars: int = 200,
                   max_calls: int = 30) -> str:
    """The classifier's user message: turns (question, reference, answer), failed rubrics, tool trace."""
    answers = {t.index: t for t in result.episode.turns}
    parts = [f"## Task (category: {task.category or '?'}, domain: {task.domain or '?'})"]
    for i, turn in enumerate(task.turns):
        record = answers.get(i)
        answer = _clip(record.answer, answer_chars) if record else "(no answer)"
        status = f" (turn ended: {record.status})" if record and record.status != "answered" else ""
        parts.append(f"### Turn {i + 1} of {len(task.turns)}\nQuestion: {turn.prompt}\n"
                     f"Reference answer: {turn.golden_answer}\nModel answer{status}: {answer}")
    rubrics = {(turn, r.id): r for turn, r in task.rubrics}
    failed = []
    for v in result.grade.verdicts:
        if v.status == "not_met":
            rubric = rubrics.get((v.turn, v.rubric_id))
            text = rubric.description if rubric else "(rubric not in the task source)"
            tag = "critical, " if v.critical else ""
            failed.append(f"- turn {v.turn + 1} {v.rubric_id} ({tag}weight {v.weight}): {text}\n"
                          f"  grader: {_clip(v.justification, 300)}")
    parts.append("## Rubrics not met\n" + ("\n".join(failed) or "(none)"))
    calls = result.episode.tool_calls
    trace = [f"- {c.place} {c.name} [{'ok' if c.ok else 'failed'}]: "
             f"{_clip(c.output, output_chars) or '(no output)'}" for c in calls[:max_calls]]
    if len(calls) > max_calls:
        trace.append(f"- ... {len(calls) - max_calls} more call(s)")
    parts.append("## Tool calls\n" + ("\n".join(trace) or "(no tool calls)"))
    parts.append(GUIDE)
    return "\n\n".join(parts)


class FailureClassifier:
    """Asks a chat model for a :class:`FailureLabel` per task; a failure after retries is ``error``."""

    def __init__(self, model: BaseChatModel, name: str, *, attempts: int = 3,
                 backoff_initial_s: float = BACKOFF_INITIAL_S, backoff_max_s: float = BACKOFF_MAX_S,
                 max_concurrency: int = 4,
                 method: Literal["json_schema", "function_calling", "json_mode"] = "json_schema") -> None:
        self.name = name
        self.attempts = attempts
        self.max_concurrency = max_concurrency
        self._runnable = with_backoff(model.with_structured_output(FailureLabel, method=method), attempts,
                                      backoff_initial_s, backoff_max_s)

    def classify(self, items: Sequence[tuple[Task, TaskResult]]) -> list[tuple[str, str]]:
        """(category, explanation) per item, in order; calls run concurrently."""
        if not items:
            return []
        prompts: list[Any] = [[SystemMessage(SYSTEM), HumanMessage(failure_prompt(t, r))] for t, r in items]
        replies = self._runnable.batch(prompts, config={"max_concurrency": self.max_concurrency},
                                       return_exceptions=True)
        return [self._outcome(reply) for reply in replies]

    def _outcome(self, reply: Any) -> tuple[str, str]:
        if isinstance(reply, BaseException):  # recorded as category "error", never dropped
            return ERROR, f"classifier failed after {self.attempts} attempts: {type(reply).__name__}: {reply}"[:500]
        if not isinstance(reply, FailureLabel):
            return ERROR, f"classifier gave no label (got {type(reply).__name__})"
        return reply.category, reply.explanation.strip()


@dataclass(frozen=True)
class TaskFailure:
    """One failed task and why it failed."""

    task_id: str
    category: str
    explanation: str
    task_category: str
    domain: str


@dataclass
class FailureReport:
    """Failed tasks with their categories, and the tasks left out of the analysis (with the reason)."""

    classifier: str
    tasks: int
    passed: int
    failures: list[TaskFailure]
    excluded: dict[str, list[str]] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """Failed tasks per failure category (every category listed, ``error`` last)."""
        found = Counter(f.category for f in self.failures)
        return {c: found.get(c, 0) for c in (*CATEGORIES, ERROR)}

    def by_task_category(self) -> dict[str, dict[str, int]]:
        """Failure-category counts per task category (e.g. ``region_switch``)."""
        groups: dict[str, Counter[str]] = defaultdict(Counter)
        for f in self.failures:
            groups[f.task_category][f.category] += 1
        return {name: {c: groups[name].get(c, 0) for c in (*CATEGORIES, ERROR)} for name in sorted(groups)}

    def to_dict(self) -> dict[str, Any]:
        """The content of ``failures.json``."""
        return {"classifier": self.classifier, "prompt_version": PROMPT_VERSION, "tasks": self.tasks,
                "passed": self.passed, "failed": len(self.failures),
                "excluded": {k: sorted(v) for k, v in self.excluded.items()},
                "counts": self.counts(), "by_task_category": self.by_task_category(),
                "failures": [asdict(f) for f in self.failures]}


def classify_failures(run_dir: Path | str, classifier: FailureClassifier | Callable[[], FailureClassifier], *,
                      tasks: TaskSource | None = None) -> FailureReport:
    """Classify every graded, failed task of ``run_dir`` and write ``RUN_DIR/failures.json`` atomically.

    ``classifier`` is a ready :class:`FailureClassifier`, or a function that builds one once the run and
    its tasks are read (``vtb analyze errors`` builds its model from ``--model`` with
    :func:`vtb_agents.runner.plan.classifier_model`; a bad run directory is reported before a model's
    credentials are needed).
    """
    finished = open_finished_run(run_dir)
    results = finished.results
    excluded: dict[str, list[str]] = {"episode_error": [], "ungraded": []}
    failed: list[TaskResult] = []
    for r in results:
        if is_infrastructure(r.episode.ended):  # not the model's doing: nothing to classify
            excluded["episode_error"].append(r.task_id)
        elif not r.grade.graded:
            excluded["ungraded"].append(r.task_id)
        elif r.grade.passed is False:
            failed.append(r)
    by_id = finished.tasks(tasks, needed=[r.task_id for r in failed])
    classifier = classifier if isinstance(classifier, FailureClassifier) else classifier()
    labels = classifier.classify([(by_id[r.task_id], r) for r in failed])
    report = FailureReport(
        classifier=classifier.name, tasks=len(results), passed=sum(r.grade.passed is True for r in results),
        failures=[TaskFailure(r.task_id, category, why, r.category, r.domain)
                  for r, (category, why) in zip(failed, labels)],
        excluded=excluded,
    )
    write_json_atomic(Path(run_dir) / FAILURES_FILE, report.to_dict())
    return report
