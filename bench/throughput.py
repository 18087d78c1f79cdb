"""Runner throughput with simulated API latency, and harness overhead per task.

A local chat-completions server plays a model that takes 1 s per call (one vision call, then
the answer: 2 calls per task). The same 32 single-turn tasks run at concurrency 1, 4 and 16, side
by side in one run, through the real runner (ChatOpenAI, graphs, sandboxes, grading, results
store). Speed-up is throughput relative to concurrency 1. With a zero-latency model the time per
task is the harness's own overhead.

    .venv/bin/python bench/throughput.py [--tasks 32] [--latency 1.0]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from openai_server import OpenAIServer  # noqa: E402  (the tests' real chat-completions server)

from vtb_agents.runner.executors import LocalExecutor  # noqa: E402
from vtb_agents.runner.run import RunConfig, run_suite  # noqa: E402
from vtb_agents.tasks import load_tasks  # noqa: E402

CROP = "from PIL import Image\nImage.open('image_0.png').crop((0, 0, 400, 300)).save('transformed_image_0.png')"


def responder(latency: float):
    def respond(body: dict) -> object:
        time.sleep(latency)
        if body["messages"][-1]["role"] == "user" and not any(m["role"] == "tool" for m in body["messages"]):
            return {"tool_calls": [{"name": "python_image_processing", "arguments": {"code": CROP}}]}
        return "The answer is 42."
    return respond


def bench_tasks(count: int):
    singles = [t for t in load_tasks("sample") if len(t.turns) == 1]
    return [singles[i % len(singles)].model_copy(update={"id": f"{singles[i % len(singles)].id}-{i}"})
            for i in range(count)]


def timed_run(tasks, concurrency: int, root: Path, name: str) -> float:
    start = time.perf_counter()
    summary = run_suite(tasks, RunConfig(model="openai:bench", tasks="bench"), root / name,
                        executor=LocalExecutor(concurrency))
    elapsed = time.perf_counter() - start
    assert summary["tasks"] == len(tasks) and summary["episodes"]["errors"] == 0, summary["episodes"]
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=32)
    parser.add_argument("--latency", type=float, default=1.0)
    args = parser.parse_args()
    tasks = bench_tasks(args.tasks)
    os.environ["OPENAI_API_KEY"] = "bench"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with OpenAIServer(responder(args.latency)) as server:
            os.environ["OPENAI_BASE_URL"] = server.base_url
            times = {n: timed_run(tasks, n, root, f"c{n}") for n in (1, 4, 16)}
        with OpenAIServer(responder(0.0)) as server:
            os.environ["OPENAI_BASE_URL"] = server.base_url
            zero = timed_run(tasks, 1, root, "zero")
    print(f"{args.tasks} tasks, 2 model calls each, {args.latency:g} s per call")
    for n, elapsed in times.items():
        speedup = times[1] / elapsed
        print(f"concurrency {n:2d}: {elapsed:6.1f} s  {args.tasks / elapsed:5.2f} tasks/s  "
              f"speed-up {speedup:5.2f}x  ({speedup / n:.2f} x N)")
    print(f"zero-latency model, concurrency 1: {1000 * zero / args.tasks:.0f} ms per task (harness overhead)")


if __name__ == "__main__":
    main()
