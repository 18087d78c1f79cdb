"""inspect_ai against a rate limit: the same plan as ``vtb run``, with inspect's adaptive connections.

Runs in the bench's own inspect_ai environment (``make bench-inspect-venv``: ``bench/.venv-inspect``),
never in the package's. One ``Sample`` per task of ``bench/rate_limit_plan.py``'s plan, its epochs as
inspect's ``epochs``; the solver sends the task's turns (prompt and images, the model's earlier answers
as history) and the scorer one judge call per judged rubric, all to one model (``openai/scripted`` at
``OPENAI_BASE_URL``, chat completions). ``max_samples=CONCURRENCY`` and no ``max_connections``: inspect's
default, adaptive connections (start at 20, between 10 and 100, cut on rate-limit retries), with its
own retries (exponential backoff from 3 s, no limit on attempts). Prints ``{"episodes": N, "lost": K,
"errors": {...}, "connection_limits": [...]}`` (a lost episode is a sample that ended in an error; the
limits the adaptive controller set, in order).

    bench/.venv-inspect/bin/python bench/inspect_rate_limits.py PLAN_JSON CONCURRENCY LOG_DIR
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path
from typing import Any

from inspect_ai import Task, eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.model import (ChatMessage, ChatMessageSystem, ChatMessageUser, ContentImage, ContentText,
                              get_model)
from inspect_ai.scorer import Score, Target, accuracy, scorer
from inspect_ai.solver import Generate, TaskState, solver

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rate_limit_plan import image_url  # noqa: E402


@solver
def turns() -> Any:
    """The task's turns, one model call each."""
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        model = get_model()
        messages: list[ChatMessage] = [ChatMessageSystem(content="You answer questions about images.")]
        for turn in state.metadata["task"]["turns"]:
            messages.append(ChatMessageUser(content=[ContentText(text=turn["prompt"]),
                                                     *(ContentImage(image=image_url(p)) for p in turn["images"])]))
            output = await model.generate(messages)
            messages.append(output.message)
        state.messages, state.output = messages, output
        return state
    return solve


@scorer(metrics=[accuracy()])
def judge() -> Any:
    """One judge call per judged rubric, to the same model."""
    async def score(state: TaskState, target: Target) -> Score:
        for rubric in state.metadata["task"]["judged"]:
            await get_model().generate([
                ChatMessageSystem(content="Grade the answer against the rubric. Reply in JSON."),
                ChatMessageUser(content=f"Rubric: {rubric}\nAnswer: {state.output.completion}")])
        return Score(value=1)
    return score


def main() -> None:
    plan, concurrency, log_dir = json.loads(Path(sys.argv[1]).read_text()), int(sys.argv[2]), sys.argv[3]
    task = Task(dataset=[Sample(input=t["id"], id=t["id"], metadata={"task": t}) for t in plan["tasks"]],
                solver=turns(), scorer=judge(), epochs=plan["epochs"])
    log = inspect_eval(task, model="openai/scripted", model_args={"responses_api": False}, max_samples=concurrency,
                       fail_on_error=False, log_dir=log_dir, display="none")[0]
    samples = log.samples or []
    errors = collections.Counter(sample.error.message.splitlines()[0][:80] for sample in samples if sample.error)
    changes = log.stats.connection_limit_history  # the adaptive controller's moves: evidence it was on
    print(json.dumps({"episodes": len(plan["tasks"]) * plan["epochs"], "lost": sum(errors.values()) +
                      len(plan["tasks"]) * plan["epochs"] - len(samples), "errors": dict(errors),
                      "status": log.status, "connection_limits": [change.new_limit for change in changes]}))


if __name__ == "__main__":
    main()
