"""One judge call, bounded in time and blamed right: whatever goes wrong is a judge error.

A judge is code we did not write (``--judge my_pkg.judges:strict``) or a model behind a provider;
neither is the model under test. So a judge call that raises, returns something that is not a
:class:`~vtb_agents.judges.base.Judgement` of a known status, or gives no verdict within its time,
becomes an ``error`` judgement naming the cause: the task's outcome is ``judge_error``
(infrastructure: the run is incomplete, exits 3, and ``--retry-errors`` or ``vtb grade`` asks
again), never a silently "unjudged" task (docs/concepts/outcomes.md).

Time: each call gets the judge's own limit (:func:`judge_time_limit`: what the LLM judge's attempts
may take) or what is left of the grading's time window (the current deadline of
:mod:`vtb_agents.timebox`, set by :func:`~vtb_agents.judges.graph.grade_episode`), whichever is
shorter. A judge still running then is left behind on its daemon thread (Python cannot stop it).

A judge that bounds its own calls has a ``judge_within(..., limit_s)`` method, which
:func:`bounded_judgement` calls instead: the verdict cache (:class:`~vtb_agents.judges.cache.CachedJudge`)
time-boxes only the judge behind it and reads and writes the cache in the caller's thread.
"""

from __future__ import annotations

from typing import get_args

from vtb_agents.defaults import DEFAULT_REQUEST_TIMEOUT_S
from vtb_agents.judges.base import Judgement, RubricJudge
from vtb_agents.models.retry import BACKOFF_MAX_S
from vtb_agents.results import VerdictStatus
from vtb_agents.tasks.model import Rubric, Task
from vtb_agents.timebox import CallTimedOut, call_within, time_left

JUDGE_ATTEMPTS = 3
"""Attempts the LLM judge makes per rubric (:class:`~vtb_agents.judges.llm.LLMJudge`)."""
_CAUSE_CHARS = 500
_STATUSES = frozenset(get_args(VerdictStatus))


def judge_time_limit(request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S) -> float:
    """A judge call's own time limit: what the LLM judge's attempts may take, each request up to
    ``request_timeout_s`` and the longest backoff after each (3 x (120 + 30) s = 450 s by default)."""
    return JUDGE_ATTEMPTS * (request_timeout_s + BACKOFF_MAX_S)


def _message(exc: BaseException) -> str:
    """``str(exc)``, or a note when the exception cannot be printed."""
    try:
        return str(exc)
    except Exception as error:
        return f"<message not printable: {type(error).__name__}>"


def verdict_problem(reply: object) -> str | None:
    """What keeps a judge's ``reply`` from being a verdict, or None if it is one."""
    if not isinstance(reply, Judgement):
        return f"it returned a {type(reply).__name__}, not a vtb_agents.judges.Judgement"
    if reply.status not in _STATUSES:
        return f"it returned the status {reply.status!r}, not one of {', '.join(sorted(_STATUSES))}"
    if not isinstance(reply.justification, str):
        return f"its justification is a {type(reply.justification).__name__}, not a string"
    return None


def ask_judge(judge: RubricJudge, *, task: Task, turn: int, rubric: Rubric, answer: str,
              limit_s: float) -> Judgement:
    """``judge``'s judgement of ``rubric`` (turn ``turn``, 0-based) within ``limit_s`` or what is left
    of the current deadline; an ``error`` judgement naming the cause when it raises, returns no
    verdict or runs out of time (see the module docstring)."""
    seconds = time_left(limit_s)
    who = f"judge {judge.name!r}"
    try:
        reply = call_within(lambda: judge.judge(task=task, turn=turn, rubric=rubric, answer=answer), seconds,
                            name=f"vtb-judge-{task.id}")
    except CallTimedOut:
        return Judgement("error", f"{who} gave no verdict within its time limit ({seconds:.1f} s)")
    except KeyboardInterrupt:  # Ctrl-C while this thread waits: the run's, never the judge's
        raise
    except BaseException as exc:  # on its own thread: even its SystemExit is only the judge's failure
        return Judgement("error", f"{who} failed: {type(exc).__name__}: {_message(exc)}"[:_CAUSE_CHARS])
    problem = verdict_problem(reply)
    if problem is not None:
        return Judgement("error", f"{who} gave no verdict: {problem}"[:_CAUSE_CHARS])
    return reply


def bounded_judgement(judge: RubricJudge, *, task: Task, turn: int, rubric: Rubric, answer: str,
                      limit_s: float) -> Judgement:
    """``judge``'s judgement within ``limit_s``: through its own ``judge_within`` if it has one (the
    verdict cache), else :func:`ask_judge`."""
    within = getattr(judge, "judge_within", None)
    if callable(within):
        judgement: Judgement = within(task=task, turn=turn, rubric=rubric, answer=answer, limit_s=limit_s)
        return judgement
    return ask_judge(judge, task=task, turn=turn, rubric=rubric, answer=answer, limit_s=limit_s)
