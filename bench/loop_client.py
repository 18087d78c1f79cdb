"""The simplest alternative to ``vtb run`` a user could write: a thread pool over one ``openai`` client.

Run as its own command by ``bench/cli_throughput.py``, so that it pays what ``vtb run`` pays to start
(the interpreter, the ``openai`` import) and is measured the same way, from start to exit. Each task:
the system prompt and the task's prompt with its image, then the model's tool calls run until it
answers. ``calculator`` is ``eval`` of the expression; ``python_image_processing`` runs the code in a
fresh ``python -I`` process in the task's folder (no isolation: what a quick script would do).

    python bench/loop_client.py SUITE BASE_URL MODEL CONCURRENCY
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai

TOOLS = [
    {"type": "function", "function": {
        "name": "calculator", "description": "Evaluate an arithmetic expression and return the number.",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}},
                       "required": ["expression"]}}},
    {"type": "function", "function": {
        "name": "python_image_processing", "description": "Run Python code on the task's images.",
        "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}}},
]


def run_tool(name: str, args: dict[str, Any], folder: Path) -> str:
    """One tool call's result as text."""
    if name == "calculator":
        return json.dumps({"expression": args["expression"],
                           "result": eval(args["expression"], {"__builtins__": {}})})  # noqa: S307 (scripted)
    with tempfile.TemporaryDirectory() as scratch:  # the task's image, and room for the code's files
        shutil.copy(folder / "image_0.png", scratch)
        done = subprocess.run([sys.executable, "-I", "-c", args["code"]], cwd=scratch, capture_output=True,
                              text=True, timeout=60)
    return done.stdout + done.stderr


def run_task(client: openai.OpenAI, model: str, folder: Path) -> str:
    """One task: call, run the tools, call again until an answer."""
    task = json.loads((folder / "task.json").read_text())
    image = base64.b64encode((folder / "image_0.png").read_bytes()).decode()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You answer questions about images."},
        {"role": "user", "content": [{"type": "text", "text": task["turns"][0]["prompt"]},
                                     {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image}"}}]}]
    while True:
        reply = client.chat.completions.create(model=model, messages=messages,  # type: ignore[arg-type]
                                               tools=TOOLS, temperature=0).choices[0].message  # type: ignore[arg-type]
        if not reply.tool_calls:
            return reply.content or ""
        messages.append(reply.model_dump(exclude_none=True))
        for call in reply.tool_calls:
            messages.append({"role": "tool", "tool_call_id": call.id,
                             "content": run_tool(call.function.name, json.loads(call.function.arguments), folder)})


def main() -> None:
    suite, base_url, model, concurrency = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
    client = openai.OpenAI(base_url=base_url, api_key="bench", max_retries=0)
    with ThreadPoolExecutor(concurrency) as pool:
        answers = list(pool.map(lambda folder: run_task(client, model, folder), sorted(suite.iterdir())))
    (suite.parent / f"answers-{model}.json").write_text(json.dumps(answers))


if __name__ == "__main__":
    main()
