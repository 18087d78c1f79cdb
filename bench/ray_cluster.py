"""The Ray executor on a local 3-node Ray cluster, next to the local executor: same results, throughput.

A head and two worker nodes are started as separate ``ray start`` processes (``tests/support/ray_nodes.py``:
as on real machines, each with its own free ports and temporary folder; one CPU each), on this one
machine. The suite and the scripted model are ``bench/cli_throughput.py``'s: ``--tasks`` copies of
a one-turn sample task, 3 calls each to a chat-completions server (its own process) that takes
``--latency`` seconds per call (``--workload calc``: two calculator rounds; ``code``: a crop in the
sandbox, then the calculator). For every concurrency N, interleaved, each its own command:

* ``local``: ``vtb run --concurrency N`` (threads in one process);
* ``ray``: ``vtb -v run --concurrency N --executor ray --ray-address HEAD`` on a fresh cluster
  (started before, stopped after, outside the time measured);
* ``before`` (with ``--baseline CHECKOUT``): the same on a fresh cluster whose nodes and driver
  import the other checkout (e.g. ``git archive main``), for a before/after of the executor.

Asserted (here, not in a test): the Ray runs' ``summary.json`` equals the local run's, and every
task's outcome, answers, score and pass are the same; the current executor's workers ran on all three
nodes (its ``-v`` log names each worker's node and task count). Reported: share of ideal (ideal =
tasks x calls x latency / N) for the whole command and the model span, tasks per second, time to
the first model request, peak RSS of the driver's tree plus the cluster's nodes, and the tasks each
node ran. The nodes' API settings (``OPENAI_BASE_URL``, the key) are in the environment of ``ray
start``, as a cluster's would be. ``--write`` puts the table into BENCHMARKS.md.

    .venv/bin/python bench/ray_cluster.py [--tasks 128] [--levels 16 32] [--baseline DIR] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from cli_throughput import (CALLS_PER_TASK, ROUNDS, WORKLOADS, Measured, api_server,  # noqa: E402
                            run_command, share, tree_rss, write_section, write_suite)
from support.ray_nodes import CLUSTER_ENV, LocalRayCluster  # noqa: E402

from vtb_agents.rundir.store import ResultsStore  # noqa: E402

SECTIONS = {"calc": "## Ray executor on a local 3-node cluster",
            "code": "## Ray executor on a local 3-node cluster, with code in the sandbox"}
WORKER_LINE = re.compile(r"Ray worker (\d+) \(node ([0-9a-f]+)\): (\d+) task")
"""The executor's ``-v`` line at the end of a run: which node each worker ran on and how many tasks it ran."""


@dataclass
class RayMeasured:
    """One ``vtb run`` on a fresh cluster: the command's measure, the cluster's idle RSS before it, the
    cluster's node ids and the tasks each node ran (from the executor's log; empty for ``before``)."""

    measured: Measured
    idle_rss: int
    nodes: list[str]
    tasks_by_node: dict[str, int] = field(default_factory=dict)


def vtb_command(suite: Path, out: Path, model: str, concurrency: int, ray_address: str | None) -> list[str]:
    """``python -m vtb_agents [-v] run ...`` over the suite, local or on the Ray cluster at ``ray_address``."""
    ray = ["--executor", "ray", "--ray-address", ray_address] if ray_address else []
    return [sys.executable, "-m", "vtb_agents", *(["-v"] if ray_address else []), "run", "--tasks", str(suite),
            "--model", f"openai:{model}", "--judge", "rule", "--concurrency", str(concurrency), "--out", str(out),
            *ray]


def model_env(url: str, source: Path) -> dict[str, str]:
    """What the driver and the cluster's nodes need: the model server, a key, the checkout to import."""
    return {"OPENAI_BASE_URL": url, "OPENAI_API_KEY": "bench", "PYTHONPATH": str(source)}


def run_local(suite: Path, out: Path, url: str, model: str, n: int, log: Path) -> Measured:
    env = {**os.environ, **model_env(url, ROOT)}
    return run_command(vtb_command(suite, out, model, n, None), env, log, model)


def run_ray(suite: Path, out: Path, url: str, model: str, n: int, log: Path, source: Path) -> RayMeasured:
    """One run on a fresh 3-node cluster (one CPU per node) whose nodes import ``source``."""
    env = model_env(url, source)
    with LocalRayCluster(workers=2, cpus=1, env=env) as cluster:
        nodes = cluster.alive_nodes()
        idle = tree_rss(*cluster.pids())
        measured = run_command(vtb_command(suite, out, model, n, cluster.address),
                               {**os.environ, **CLUSTER_ENV, **env, "COLUMNS": "400"}, log, model,
                               also=cluster.pids())
    by_node: dict[str, int] = {}
    for _, node, count in WORKER_LINE.findall(measured.stderr):
        by_node[node] = by_node.get(node, 0) + int(count)
    return RayMeasured(measured, idle, nodes, by_node)


def outcomes(out: Path) -> dict[str, tuple[Any, ...]]:
    """Per task: outcome, answers, score and pass, as ``results.jsonl`` has them."""
    results, _ = ResultsStore(out).load()
    return {r.task_id: (r.outcome, [t.answer for t in r.episode.turns], r.grade.score, r.grade.passed)
            for r in results}


def check_same(local: Path, remote: Path, tasks: int) -> None:
    """Assert that two run directories hold the same summary (but for the model's name: each run has its
    own, to tell its requests apart) and the same per-task results."""
    summary, other = ({k: v for k, v in json.loads((d / "summary.json").read_text()).items() if k != "model"}
                      for d in (local, remote))
    differing = sorted(k for k in summary.keys() | other.keys() if summary.get(k) != other.get(k))
    assert not differing, f"summaries differ in {differing}: {local} / {remote}"
    assert summary["tasks"] == tasks and summary["complete"] is True, summary
    mine, theirs = outcomes(local), outcomes(remote)
    assert len(mine) == tasks and mine == theirs, f"per-task results differ: {local} / {remote}"


def check_spread(run: RayMeasured, tasks: int) -> None:
    """Assert that the workers ran on every node of the cluster and ran every task between them."""
    assert sorted(run.tasks_by_node) == sorted(run.nodes) and len(run.nodes) == 3, (run.tasks_by_node, run.nodes)
    assert sum(run.tasks_by_node.values()) == tasks, run.tasks_by_node


def measure(args: argparse.Namespace, root: Path) -> dict[int, dict[str, list[Any]]]:
    suite = write_suite(root, args.tasks)
    log = root / "requests.log"
    contenders = ("local", "ray", *(["before"] if args.baseline else []))
    results: dict[int, dict[str, list[Any]]] = {n: {who: [] for who in contenders} for n in args.levels}
    runs = 0
    with api_server(args.latency, log, args.workload) as url:
        for rep in range(args.repeat):
            for n in args.levels:
                order = contenders if rep % 2 == 0 else contenders[::-1]
                dirs: dict[str, Path] = {}
                for who in order:
                    runs += 1
                    model = f"{who}-{n}-{rep}"
                    dirs[who] = root / f"run-{runs}"
                    if who == "local":
                        results[n][who].append(run_local(suite, dirs[who], url, model, n, log))
                        print(f"  N={n:2d} {who:6s} rep {rep}: {results[n][who][-1]}", flush=True)
                    else:
                        source = ROOT if who == "ray" else Path(args.baseline)
                        ray_run = run_ray(suite, dirs[who], url, model, n, log, source)
                        results[n][who].append(ray_run)
                        print(f"  N={n:2d} {who:6s} rep {rep}: {ray_run.measured} tasks by node "
                              f"{sorted(ray_run.tasks_by_node.values())}", flush=True)
                        if who == "ray":
                            check_spread(ray_run, args.tasks)
                for who in contenders[1:]:
                    check_same(dirs["local"], dirs[who], args.tasks)
    return results


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def whole(ideal: float, rows: list[Measured]) -> float:
    """Share of ideal of whole commands (median wall time)."""
    return share(ideal, median([m.wall for m in rows]))


def span(ideal: float, latency: float, rows: list[Measured]) -> float:
    """Share of ideal of model spans (first to last request: ideal minus one call)."""
    return share(ideal - latency, median([m.span for m in rows]))


def rate(tasks: int, rows: list[Measured]) -> str:
    return f"{tasks / median([m.wall for m in rows]):.1f}"


def first(rows: list[Measured]) -> str:
    return f"{median([m.first_request or 0.0 for m in rows]):.1f} s"


def rss(rows: list[RayMeasured]) -> str:
    return f"{median([r.measured.peak_rss for r in rows]) / 2**20:,.0f} MB"


def table(args: argparse.Namespace, results: dict[int, dict[str, list[Any]]]) -> str:
    calls = args.tasks * CALLS_PER_TASK
    before = bool(args.baseline)
    head = ["concurrency N", "local: share of ideal (whole / model span)", "ray, 3 nodes: share of ideal "
            "(whole / model span)", "tasks/s: local / ray", "first model request: local / ray",
            "peak RSS, driver + cluster: ray (cluster idle before)", "tasks per node (ray)"]
    if before:
        head[3:3] = ["ray before (one actor per task slot): share of ideal (whole / model span)"]
        head[4] = "tasks/s: local / ray / before"
        head[5] = "first model request: local / ray / before"
        head[6] = "peak RSS, driver + cluster: ray / before (cluster idle before)"
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for n in args.levels:
        ideal = calls * args.latency / n
        local: list[Measured] = results[n]["local"]
        rays: list[RayMeasured] = results[n]["ray"]
        befores: list[RayMeasured] = results[n].get("before", [])

        ray_rows, before_rows = [r.measured for r in rays], [r.measured for r in befores]
        cells = [str(n), f"{whole(ideal, local):.2f} / {span(ideal, args.latency, local):.2f}",
                 f"{whole(ideal, ray_rows):.2f} / {span(ideal, args.latency, ray_rows):.2f}",
                 " / ".join(rate(args.tasks, rows) for rows in (local, ray_rows, *([before_rows] if before else []))),
                 " / ".join(first(rows) for rows in (local, ray_rows, *([before_rows] if before else []))),
                 " / ".join(rss(rows) for rows in (rays, *([befores] if before else [])))
                 + f" ({median([r.idle_rss for r in rays]) / 2**20:,.0f} MB)",
                 ", ".join(str(c) for c in sorted(rays[-1].tasks_by_node.values(), reverse=True))]
        if before:
            cells[3:3] = [f"{whole(ideal, before_rows):.2f} / {span(ideal, args.latency, before_rows):.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_benchmarks(args: argparse.Namespace, body: str) -> None:
    repeats = f"medians of {args.repeat} repetitions" if args.repeat > 1 else "one repetition"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    title = SECTIONS[args.workload]
    section = (f"{title}\n\n`bench/ray_cluster.py --workload {args.workload}`: a head and two worker nodes, "
               f"each its own `ray start` process with one CPU (`tests/support/ray_nodes.py`), **all on this 2-core "
               f"machine**: a cluster's wiring measured, not a cluster's capacity. The real `vtb run` with "
               f"`--executor ray --ray-address` against a fresh cluster each time, next to `vtb run` with the "
               f"local executor, interleaved, {repeats}; {args.tasks} one-turn tasks, {CALLS_PER_TASK} calls each "
               f"({ROUNDS[args.workload]}) to the local chat-completions server of `bench/cli_throughput.py` "
               f"with {args.latency:g} s per call. Ideal = tasks x calls x latency / N. Every Ray run's "
               f"`summary.json` equals the local run's (but for the model's name: each run has its own, to tell "
               f"its requests apart), and so does every task's outcome, answers, score and "
               f"pass (asserted by the bench); the workers' `-v` log shows they ran on all three nodes.\n\n"
               f"{body}\n\nLoad average when the run ended: {load}.\n\n"
               f"Reproduce: `.venv/bin/python bench/ray_cluster.py --workload {args.workload} --write` "
               f"(`--baseline DIR` adds another checkout's executor, e.g. `git archive main | tar -x -C DIR`).\n")
    write_section(title, section)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=128)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--levels", type=int, nargs="+", default=[16, 32])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--workload", choices=WORKLOADS, default="calc")
    parser.add_argument("--baseline", default=None, help="another checkout whose Ray executor runs too (before/after)")
    parser.add_argument("--quick", action="store_true", help="smoke check: 12 tasks, 0.2 s, N = 6, once")
    parser.add_argument("--write", action="store_true", help="put the table into BENCHMARKS.md")
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.latency, args.levels, args.repeat = 12, 0.2, [6], 1
    with tempfile.TemporaryDirectory() as tmp:
        results = measure(args, Path(tmp))
    body = table(args, results)
    print(body)
    if args.write:
        write_benchmarks(args, body)


if __name__ == "__main__":
    main()
