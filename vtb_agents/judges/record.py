"""A rubric's verdict into the task's transcript, from the grading graph (cached verdicts too).

The grading node dispatches a :class:`~vtb_agents.transcript.JudgeEvent` as a LangChain custom
event; the task's recorder (one of the grading run's callbacks) attaches to it the judge model
calls made under the same node, so the rubric, prompt, raw verdict and explanation stay together.
"""

from __future__ import annotations

from langchain_core.callbacks import dispatch_custom_event
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ensure_config

from vtb_agents.judges.base import RubricJudge
from vtb_agents.judges.llm import LLMJudge
from vtb_agents.judges.prompt import judge_prompt
from vtb_agents.results import Episode, RubricVerdict
from vtb_agents.tasks.model import Task
from vtb_agents.transcript import JUDGE_EVENT, JudgeEvent


def uses_judge_prompt(judge: RubricJudge) -> bool:
    """Whether ``judge`` (or the judge behind its verdict cache) asks with :func:`judge_prompt`."""
    return isinstance(getattr(judge, "inner", judge), LLMJudge)


def judge_event(task: Task, episode: Episode, judge: RubricJudge, index: int, verdict: RubricVerdict) -> JudgeEvent:
    """The transcript's event of ``verdict`` on rubric ``index`` of ``task``: the result's verdict itself,
    with the rubric's text (without its model calls, which the recorder attaches); ``prompt`` is the
    judge prompt when the package's LLM judge decided it (asked or from its cache, which is keyed by
    that prompt)."""
    turn, rubric = task.rubrics[index]
    answers = {record.index: record.answer for record in episode.turns}
    prompt = (judge_prompt(task, turn, rubric, answers[turn])
              if verdict.judge == judge.name and turn in answers and uses_judge_prompt(judge) else None)
    return JudgeEvent(index=index, rubric=rubric.description, prompt=prompt, verdict=verdict)


def record_verdict(config: RunnableConfig | None, task: Task, episode: Episode, judge: RubricJudge, index: int,
                   verdict: RubricVerdict) -> None:
    """Dispatch the verdict's :func:`judge_event` to the grading run's callbacks (none: nothing recorded)."""
    config = ensure_config(config)
    if not config.get("callbacks"):
        return
    dispatch_custom_event(JUDGE_EVENT, judge_event(task, episode, judge, index, verdict), config=config)
