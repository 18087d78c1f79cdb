"""Runner throughput with simulated API latency, and harness overhead per task.

A local chat-completions server, in its own process as a real API would be, plays a model that
takes 1 s per call (one vision call, then the answer: 2 calls per task). Single-turn sample tasks
run at concurrency 1, 4 and 16, side by side in one run, through the real runner (ChatOpenAI,
graphs, sandboxes, grading, results store). Each level runs ``waves`` x N tasks (at least 16), so
that its throughput is the steady state of a long run rather than the start-up and drain of one or
two waves; a fixed 32-task run at every level is reported too. Speed-up is throughput relative to
concurrency 1. With a zero-latency model the time per task is the harness's own overhead.

    .venv/bin/python bench/throughput.py [--tasks 32] [--latency 1.0]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.openai_server import OpenAIServer  # noqa: E402  (the tests' real chat-completions server)

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


@contextmanager
def api_server(latency: float) -> Iterator[str]:
    """Serve the scripted model from a separate process; yield its base URL."""
    process = subprocess.Popen([sys.executable, __file__, "--serve", str(latency)], stdout=subprocess.PIPE, text=True)
    try:
        yield process.stdout.readline().strip()
    finally:
        process.terminate()
        process.wait(timeout=10)


def serve(latency: float) -> None:
    """The server process: print the base URL, then serve until terminated."""
    with OpenAIServer(responder(latency)) as server:
        print(server.base_url, flush=True)
        while True:
            time.sleep(3600)


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
    parser.add_argument("--tasks", type=int, default=32, help="tasks of the fixed-size comparison")
    parser.add_argument("--waves", type=int, default=6, help="steady state: waves x N tasks at concurrency N")
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--serve", type=float, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve)
        return
    levels = (1, 4, 16)
    steady_counts = {n: max(16, args.waves * n) for n in levels}
    os.environ["OPENAI_API_KEY"] = "bench"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with api_server(args.latency) as url:
            os.environ["OPENAI_BASE_URL"] = url
            steady, fixed = {}, {}
            for n in levels:  # interleaved: each level's two measurements run back to back
                steady[n] = steady_counts[n] / timed_run(bench_tasks(steady_counts[n]), n, root, f"s{n}")
                fixed[n] = args.tasks / timed_run(bench_tasks(args.tasks), n, root, f"f{n}")
        with api_server(0.0) as url:
            os.environ["OPENAI_BASE_URL"] = url
            zero = timed_run(bench_tasks(args.tasks), 1, root, "zero")
    print(f"2 model calls per task, {args.latency:g} s per call; throughput in tasks/s")
    print("concurrency | steady state (tasks) | speed-up | fixed 32 tasks | speed-up")
    for n in levels:
        print(f"{n:11d} | {steady[n]:5.2f} ({steady_counts[n]:3d} tasks)   | {steady[n] / steady[1]:5.2f}x = "
              f"{steady[n] / steady[1] / n:.2f} x N | {fixed[n]:5.2f}          | {fixed[n] / fixed[1]:5.2f}x = "
              f"{fixed[n] / fixed[1] / n:.2f} x N")
    print(f"zero-latency model, concurrency 1: {1000 * zero / args.tasks:.0f} ms per task (harness overhead)")


if __name__ == "__main__":
    main()
