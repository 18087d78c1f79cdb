"""``vtb run`` against an account's rate limit: share of the limit used, 429s per accepted request, tasks lost.

The bundled sample suite (20 tasks, ``--epochs E``) at ``--concurrency N``, the agent and the LLM judge one
model of one key of ``bench/rate_limited_server.py`` (its own thread here; a request limit of ``--limit``
per second, OpenAI's or Anthropic's headers and 429 body), no ``--rps``. The agent answers at once (a
different answer each time, so that no verdict comes from the judge's cache); the judge says met.
``--checkout DIR`` runs another checkout's ``vtb`` (say, the code before the limiter) with this
checkout's server. Results in BENCHMARKS.md, "Rate limits".

    .venv/bin/python bench/rate_limits.py --limit 12 --concurrency 32 --epochs 3 [--executor processes --workers 2]
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
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rate_limited_server import RateLimitedServer  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def respond_factory() -> Any:
    """The scripted agent and judge (see the module's docstring)."""
    replies = itertools.count()

    def respond(body: dict[str, Any]) -> str:
        if "response_format" in body:
            return json.dumps({"verdict": "met", "justification": "It says so."})
        return f"Final answer: 42 (reply {next(replies)})."

    return respond


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=float, default=12.0, help="requests per second the server allows")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--style", choices=["openai", "anthropic"], default="openai")
    parser.add_argument("--executor", default="local")
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the checkout whose vtb runs")
    args = parser.parse_args()
    extra = ["--executor", args.executor, *(["--workers", str(args.workers)] if args.workers else [])]
    with tempfile.TemporaryDirectory() as scratch, \
            RateLimitedServer(respond_factory(), args.limit, style=args.style) as server:
        out = Path(scratch) / "run"
        env = {**os.environ, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "k",
               "PYTHONPATH": str(args.checkout.resolve())}
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "vtb_agents", "run", "--tasks", "sample", "--model",
                               "openai:scripted", "--judge", "openai:scripted", "--concurrency", str(args.concurrency),
                               "--epochs", str(args.epochs), "--out", str(out), *extra],
                              capture_output=True, text=True, env=env, cwd=args.checkout, timeout=3600)
        took = time.monotonic() - started
        measure = server.measure()
        summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").is_file() else {}
    infrastructure = summary.get("infrastructure_errors", {}).get("count")
    print(f"limit {args.limit:g}/s ({args.style}), N = {args.concurrency}, {args.epochs} epochs, {args.executor}"
          f"{f' x {args.workers}' if args.workers else ''}, checkout {args.checkout}: exit {done.returncode} in "
          f"{took:.1f} s; {measure.accepted} accepted, {measure.rejected} rejected "
          f"({measure.rejected_per_accepted:.2f} per accepted) over {measure.span_s:.1f} s: share of the limit "
          f"{measure.share:.2f}; episodes {summary.get('outcomes')}, infrastructure failures {infrastructure}; "
          f"rate_limits {json.dumps({k: v for k, v in summary.get('rate_limits', {}).items() if k != 'keys'})}")


if __name__ == "__main__":
    main()
