"""The hand-written loop against a rate limit: a thread pool over one ``openai`` client, the SDK's own retries.

What a user writes without a harness: ``concurrency`` episodes at once; each sends its task's turns
(the prompt and its images, the model's earlier answers as history), then one judge call per judged
rubric (JSON mode). ``openai.OpenAI()`` as it comes: ``max_retries=2``, which honours
``retry-after-ms`` / ``retry-after`` and otherwise backs off exponentially (``MAX_RETRIES``: what a
user who saw episodes lost would raise it to); an episode whose call still fails is lost. Prints
``{"episodes": N, "lost": K, "errors": {...}}``.

    python bench/rate_limit_loop.py PLAN_JSON BASE_URL CONCURRENCY [MAX_RETRIES]
"""

from __future__ import annotations

import collections
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rate_limit_plan import image_url  # noqa: E402


def run_episode(client: openai.OpenAI, task: dict[str, Any]) -> None:
    """The task's turns, then its judge calls; raises what the SDK raised once its retries were spent."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You answer questions about images."}]
    answer = ""
    for turn in task["turns"]:
        content = [{"type": "text", "text": turn["prompt"]},
                   *({"type": "image_url", "image_url": {"url": image_url(path)}} for path in turn["images"])]
        messages.append({"role": "user", "content": content})
        answer = client.chat.completions.create(model="scripted", messages=messages,  # type: ignore[arg-type]
                                                temperature=0).choices[0].message.content or ""
        messages.append({"role": "assistant", "content": answer})
    for rubric in task["judged"]:
        client.chat.completions.create(model="scripted", response_format={"type": "json_object"}, messages=[
            {"role": "system", "content": "Grade the answer against the rubric. Reply in JSON."},
            {"role": "user", "content": f"Rubric: {rubric}\nAnswer: {answer}"}])


def main() -> None:
    plan, base_url, concurrency = json.loads(Path(sys.argv[1]).read_text()), sys.argv[2], int(sys.argv[3])
    retries = int(sys.argv[4]) if len(sys.argv) > 4 else openai.DEFAULT_MAX_RETRIES  # the SDK's default: 2
    client = openai.OpenAI(base_url=base_url, api_key="bench", max_retries=retries)
    episodes = [task for task in plan["tasks"] for _ in range(plan["epochs"])]
    errors: collections.Counter[str] = collections.Counter()

    def episode(task: dict[str, Any]) -> None:
        try:
            run_episode(client, task)
        except openai.APIError as error:  # the episode is lost: counted by its error's type
            errors[type(error).__name__] += 1

    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(episode, episodes))
    print(json.dumps({"episodes": len(episodes), "lost": sum(errors.values()), "errors": dict(errors)}))


if __name__ == "__main__":
    main()
