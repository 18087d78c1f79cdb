"""What measuring "looked at the right place" costs a run, side by side.

The sample suite (20 tasks, 40 turns) run in-process with the ``replay`` model and the rule judge at
concurrency 2, in interleaved rounds: (a) as shipped, the reference code of each task run once in a
fresh sandbox (the process's cache of reference crops emptied before every run, so that each run pays
it, as a single ``vtb run`` does), and (b) with the measurement switched off. The region tracking in
the sandbox itself runs in both (it is part of every worker). Medians of the rounds' wall times.

    .venv/bin/python bench/region_overhead.py             # writes the section in BENCHMARKS.md
    .venv/bin/python bench/region_overhead.py --no-write --rounds 1
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vtb_agents.episodes.regions import has_reference_code  # noqa: E402
from vtb_agents.runner import run as runner  # noqa: E402
from vtb_agents.runner.executors import LocalExecutor  # noqa: E402
from vtb_agents.runner.run import RunConfig, run_suite  # noqa: E402
from vtb_agents.tasks import load_tasks  # noqa: E402

SECTION = "## Cost of the region metric"


def one_run(measure: bool) -> float:
    """Wall time of one replay run of the sample suite, with or without the reference crops measured."""
    tasks = load_tasks("sample")
    original = runner.measure_regions
    if not measure:
        runner.measure_regions = lambda *args: None  # type: ignore[assignment]
    try:
        with tempfile.TemporaryDirectory(prefix="vtb-bench-regions-") as scratch:
            started = time.perf_counter()
            run_suite(tasks, RunConfig(model="replay"), Path(scratch) / "run", executor=LocalExecutor(2))
            return time.perf_counter() - started
    finally:
        runner.measure_regions = original


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    one_run(True)  # warm-up: imports, the sandbox level probe
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(args.rounds):
        for measure in (True, False):
            times[measure].append(one_run(measure))
    on, off = statistics.median(times[True]), statistics.median(times[False])
    tasks = load_tasks("sample")
    with_code = sum(has_reference_code(t) for t in tasks)
    text = (f"{SECTION}\n\n`bench/region_overhead.py`: the sample suite ({len(tasks)} tasks; {with_code} run reference "
            "code) with the `replay` model, rule judge, concurrency 2, in process; interleaved rounds, medians of "
            f"{args.rounds}.\n\n| run | wall time | ratio |\n|---|---|---|\n"
            f"| reference crops measured (a fresh sandbox per task runs its reference code) | {on:.2f} s | "
            f"{on / off:.2f} |\n| measurement off | {off:.2f} s | 1.00 |\n\n"
            f"Load average when it ended: {', '.join(f'{v:.1f}' for v in os.getloadavg())} (a shared 2-core "
            "machine; compare the rows, measured side by side).\n\n"
            "The replay model answers without latency, so this is the worst case: the reference run costs about "
            "what the replay episode's own code costs (the same code, plus a sandbox start). With a real model "
            "the same seconds sit next to episodes of many model calls; a process runs each task's reference "
            "once (epochs, repeated runs reuse it).\n\n"
            "Reproduce: `.venv/bin/python bench/region_overhead.py`.\n")
    print(text)
    if not args.no_write:
        path = ROOT / "BENCHMARKS.md"
        old = path.read_text(encoding="utf-8")
        pattern = re.compile(rf"{re.escape(SECTION)}\n.*?(?=\n## |\Z)", re.DOTALL)
        new = pattern.sub(text.rstrip("\n"), old) if pattern.search(old) else old.rstrip("\n") + "\n\n" + text
        path.write_text(new, encoding="utf-8")


if __name__ == "__main__":
    main()
