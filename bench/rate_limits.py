"""Three ways to spend one account's rate limit, side by side: ``vtb run``, inspect_ai, a hand-written loop.

The held-out-style workload (``bench/rate_limit_plan.py``: 5 tasks x 12 epochs = 60 episodes, 168
requests, agent and judge one model of one key) at each ``--concurrency`` against
``bench/rate_limited_server.py`` (its own thread here, a fresh server per run), which enforces
``--limit`` requests/s and ``--tokens`` tokens/s with OpenAI's (or ``--style anthropic``: Anthropic's)
429 body and headers. The model answers at once (a different answer each time, so that no verdict
comes from vtb's judge cache); the judge says met.

* ``vtb``: ``vtb run --tasks sample --task-id ... --epochs 12``, **no ``--rps``**, in threads;
  ``vtb-processes``: the same with ``--executor processes --workers 2`` (one budget for both workers).
* ``inspect``: ``bench/inspect_rate_limits.py`` in the bench's own inspect_ai environment
  (``--inspect-python``, made by ``make bench-inspect-venv``), adaptive connections (its default).
* ``loop``: ``bench/rate_limit_loop.py``, a thread pool over ``openai.OpenAI()`` and its own retries (2);
  ``loop-retries-10``: the same with ``max_retries=10``.

Per run: the share of the limit used over the model span (accepted requests over what the server's
bucket allowed from the first to the last accepted one; the token limit's likewise), 429s per accepted
request, episodes lost. One line per run, then the markdown table (``--json`` writes the rows).

    nice -n 10 .venv/bin/python bench/rate_limits.py --concurrency 8 32 128 [--tokens 8000]
        [--contenders vtb vtb-processes inspect loop] [--style anthropic]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rate_limit_plan import HELD_OUT, build_plan, requests_per_epoch  # noqa: E402
from rate_limited_server import Measure, RateLimitedServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
CONTENDERS = ("vtb", "vtb-processes", "inspect", "loop", "loop-retries-10")


def respond_factory() -> Any:
    """The scripted agent and judge (see the module's docstring)."""
    replies = itertools.count()

    def respond(body: dict[str, Any]) -> str:
        if "response_format" in body:
            return json.dumps({"verdict": "met", "justification": "It says so."})
        return f"Final answer: 42 (reply {next(replies)})."

    return respond


@dataclass(frozen=True)
class Row:
    """One contender's run: what the server measured and what the contender lost."""

    contender: str
    concurrency: int
    measure: Measure
    episodes: int
    lost: int
    detail: str
    seconds: float


def command(contender: str, args: argparse.Namespace, plan_file: Path, out: Path, concurrency: int) -> list[str]:
    """The contender's command line."""
    if contender.startswith("vtb"):
        ids = [part for task_id in HELD_OUT for part in ("--task-id", task_id)]
        extra = ["--executor", "processes", "--workers", "2"] if contender == "vtb-processes" else []
        return [sys.executable, "-m", "vtb_agents", "run", "--tasks", "sample", *ids, "--model", "openai:scripted",
                "--judge", "openai:scripted", "--concurrency", str(concurrency), "--epochs", str(args.epochs),
                "--out", str(out), *extra]
    if contender == "inspect":
        return [str(args.inspect_python), str(BENCH / "inspect_rate_limits.py"), str(plan_file), str(concurrency),
                str(out)]
    retries = ["10"] if contender == "loop-retries-10" else []
    return [sys.executable, str(BENCH / "rate_limit_loop.py"), str(plan_file), "BASE_URL", str(concurrency), *retries]


def lost_episodes(contender: str, done: subprocess.CompletedProcess[str], out: Path, episodes: int) -> tuple[int, str]:
    """Episodes that ended without a grade (vtb: infrastructure outcomes or never run), and what ended them."""
    if contender.startswith("vtb"):
        summary_file = out / "summary.json"
        if not summary_file.is_file():
            return episodes, f"exit {done.returncode}: {done.stderr.strip()[-300:]}"
        summary = json.loads(summary_file.read_text())
        outcomes = summary.get("outcomes", {})
        graded = sum(count for outcome, count in outcomes.items() if outcome == "answered")
        return episodes - graded, json.dumps(outcomes)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return episodes, f"exit {done.returncode}: {done.stderr.strip()[-300:]}"
    result = json.loads(lines[-1])
    lost = int(result.pop("lost"))
    result.pop("episodes")
    return lost, json.dumps(result)


def run_one(contender: str, args: argparse.Namespace, plan_file: Path, concurrency: int, scratch: Path) -> Row:
    """One contender at one concurrency against a fresh server."""
    out = scratch / f"{contender}-{concurrency}"
    episodes = len(HELD_OUT) * args.epochs
    with RateLimitedServer(respond_factory(), args.limit, args.tokens, style=args.style) as server:
        argv = [server.base_url if part == "BASE_URL" else part
                for part in command(contender, args, plan_file, out, concurrency)]
        env = {**os.environ, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "k", "PYTHONPATH": str(ROOT)}
        started = time.monotonic()
        done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=1800)
        seconds = time.monotonic() - started
        measure = server.measure()
    lost, detail = lost_episodes(contender, done, out, episodes)
    return Row(contender, concurrency, measure, episodes, lost, detail, seconds)


def table(rows: list[Row]) -> str:
    """The markdown table of BENCHMARKS.md's "Rate limits"."""
    lines = ["| N | contender | share of the request limit | share of the token limit | 429s per accepted request "
             "| episodes lost | model span (s) | wall time (s) |", "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        tokens = f"{row.measure.token_share:.2f}" if row.measure.token_share is not None else "-"
        lines.append(f"| {row.concurrency} | {row.contender} | {row.measure.share:.2f} | {tokens} | "
                     f"{row.measure.rejected_per_accepted:.2f} | {row.lost} of {row.episodes} | "
                     f"{row.measure.span_s:.1f} | "
                     f"{row.seconds:.0f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=float, default=12.0, help="requests per second the server allows")
    parser.add_argument("--tokens", type=float, default=None, help="tokens per second the server allows")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--contenders", nargs="+", choices=CONTENDERS, default=list(CONTENDERS))
    parser.add_argument("--epochs", type=int, default=12)
    parser.add_argument("--style", choices=["openai", "anthropic"], default="openai")
    parser.add_argument("--inspect-python", type=Path, default=BENCH / ".venv-inspect" / "bin" / "python")
    parser.add_argument("--json", type=Path, default=None, help="write the rows here")
    args = parser.parse_args()
    plan = build_plan(epochs=args.epochs)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        plan_file = scratch / "plan.json"
        plan_file.write_text(json.dumps(plan))
        print(f"limit {args.limit:g} requests/s, {args.tokens or 'no'} tokens/s ({args.style}); "
              f"{len(HELD_OUT)} tasks x {args.epochs} epochs, {requests_per_epoch(plan) * args.epochs} requests",
              flush=True)
        for concurrency in args.concurrency:
            for contender in args.contenders:
                row = run_one(contender, args, plan_file, concurrency, scratch)
                rows.append(row)
                print(f"N = {concurrency} {contender}: {row.seconds:.1f} s; {row.measure}; lost {row.lost} of "
                      f"{row.episodes} ({row.detail})", flush=True)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps([{**asdict(row), "measure": asdict(row.measure)} for row in rows], indent=1))


if __name__ == "__main__":
    main()
