"""The LLM judge's prompt, in our own words, with the reference harness's leniency rules."""

from __future__ import annotations

from vtb_agents.tasks.model import Rubric, Task

PROMPT_VERSION = "vtb-judge-v1"
"""Part of every judge-cache key: change it whenever the prompt's meaning changes."""

SYSTEM = (
    "You are a strict but fair grader for a visual question-answering benchmark. You judge ONE answer "
    "against ONE rubric criterion and say whether the criterion is met. You cannot see the images: rely "
    "on the reference answer for facts about them."
)

RULES = (
    "Rules:\n"
    "- Judge only the criterion given; ignore other qualities of the answer.\n"
    "- Do not require correctness beyond what the criterion asks for.\n"
    "- Criteria about style or presentation are judged leniently.\n"
    "- A criterion can be met implicitly: if the answer clearly satisfies it without using the same "
    "words, it is met.\n"
    "- Numbers must match the criterion (allow rounding the criterion itself allows).\n"
    'Reply with verdict "met" or "not_met" and a one- or two-sentence justification.'
)


def judge_prompt(task: Task, turn: int, rubric: Rubric, answer: str) -> str:
    """The user message for judging ``rubric`` of turn ``turn`` (0-based) against ``answer``.

    Multi-turn tasks show earlier turns (question and reference answer) as context.
    """
    parts = []
    if turn > 0:
        earlier = "\n\n".join(
            f"Turn {i + 1} question: {t.prompt}\nTurn {i + 1} reference answer: {t.golden_answer}"
            for i, t in enumerate(task.turns[:turn])
        )
        parts.append(f"## Earlier turns of the conversation\n{earlier}")
    current = task.turns[turn]
    label = f" (turn {turn + 1} of {len(task.turns)})" if len(task.turns) > 1 else ""
    parts += [
        f"## Question{label}\n{current.prompt}",
        f"## Reference answer\n{current.golden_answer}",
        f"## Criterion\n{rubric.description}",
        f"## Answer to grade\n{answer}",
        RULES,
    ]
    return "\n\n".join(parts)
