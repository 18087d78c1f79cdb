"""Throughput of the real ``vtb run`` command, next to a minimal hand-written openai-client loop.

A chat-completions server in its own process (the tests' real one, ``tests/support/openai_server.py``) plays
a model that takes ``--latency`` seconds per call. Each task makes 3 calls: two tool rounds, then
the answer (``--workload calc``: the calculator twice, so no code runs and no sandbox process starts;
``--workload code``: a Python crop of the image in the sandbox, then the calculator); every call
carries the task's image, as a vision model's would. ``--tasks`` copies of a one-turn sample task
are written to a temporary suite. For every concurrency N (1, 4, 16, 32) the two contenders run
back to back, interleaved, ``--repeat`` times, each as its own command:

* ``vtb``: ``python -m vtb_agents run --tasks SUITE --model openai:... --concurrency N`` (start,
  sandboxes, graphs, grading, results, summary and report included);
* ``loop``: ``python bench/loop_client.py``, a thread pool of N workers sharing one
  ``openai.OpenAI`` client, making the same calls with the same image (the calculator in-process,
  code in a fresh ``python -I`` per call).

Reported: share of ideal (ideal wall time = tasks x calls x latency / N) for the whole command and
for its model span (first to last request seen by the server), peak RSS of each process tree
(sampled from /proc every 50 ms), the time from start to the first model request next to the time
of importing what a first request needs (``langgraph``, ``langchain_openai``), ``vtb --help``
against ``python -c "import typer, rich"``, and the time vtb adds per model call over the loop with a
zero-latency model (model spans compared, concurrency 1). ``--write`` puts the table into
BENCHMARKS.md (one section per workload).

``--executor processes`` adds a third contender, ``vtb run --executor processes`` (``--workers``),
interleaved with the others, and reports next to the thread executor the CPU each process spends
per model call during the model span (sampled from /proc: the command's process, and each worker
process by its name ``vtb-worker-N``); ``--write`` then puts that table in its own section.

    .venv/bin/python bench/cli_throughput.py [--workload calc|code] [--executor local|processes] [--quick] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.openai_server import OpenAIServer  # noqa: E402  (the tests' real chat-completions server)

NEUTRAL_CWD = tempfile.gettempdir()
"""Where every measured command runs: ``python -m`` puts its working directory first on sys.path, so
from this checkout a ``--baseline`` run would import this checkout's package instead of its own."""
SAMPLE_TASK = ROOT / "vtb_agents" / "tasks" / "sample" / "rs-chemistry-bench"
CALLS_PER_TASK = 3
EXPRESSIONS = ("0.125 * 2", "4418 - 0")
CROP = ("from PIL import Image\nim = Image.open('image_0.png')\n"
        "im.crop((0, 0, im.width // 2, im.height // 2)).save('transformed_image_0.png')\nprint(im.size)")
ANSWER = "The bottle is HCl 0.25 M; the flask's lot number is 7Q-4418."
SECTIONS = {"calc": "## Throughput through the CLI",
            "code": "## Throughput through the CLI, with code in the sandbox"}
WORKLOADS = tuple(SECTIONS)
ROUNDS = {"calc": "two calculator rounds, then the answer; no code runs, so no sandbox process starts",
          "code": ("a Python crop of the image (`python_image_processing`, in the sandbox), a calculator "
                   "round, then the answer")}


# ---------------------------------------------------------------- the scripted model (server process)

def respond(body: dict[str, Any], latency: float, log: Path, workload: str) -> object:
    """Two tool rounds (``calc``: calculator twice; ``code``: a crop in Python, then the calculator),
    then the answer; log (model, arrival time) of every request."""
    with log.open("a") as handle:
        handle.write(f"{body.get('model')} {time.time():.6f}\n")
    time.sleep(latency)
    rounds = sum(1 for m in body["messages"] if m.get("role") == "tool")
    if rounds == 0 and workload == "code":
        return {"tool_calls": [{"id": "call_0", "name": "python_image_processing", "arguments": {"code": CROP}}]}
    if rounds < len(EXPRESSIONS):
        return {"tool_calls": [{"id": f"call_{rounds}", "name": "calculator",
                                "arguments": {"expression": EXPRESSIONS[rounds]}}]}
    return ANSWER


def serve(latency: float, log: Path, workload: str) -> None:
    """The server process: print the base URL, then serve until terminated."""
    with OpenAIServer(lambda body: respond(body, latency, log, workload)) as server:
        print(server.base_url, flush=True)
        while True:
            time.sleep(3600)


@contextmanager
def api_server(latency: float, log: Path, workload: str) -> Iterator[str]:
    """Serve the scripted model from a separate process; yield its base URL."""
    process = subprocess.Popen([sys.executable, __file__, "--serve", str(latency), str(log), workload],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        yield process.stdout.readline().strip()
    finally:
        process.terminate()
        process.wait(timeout=10)


def request_times(log: Path, model: str) -> list[float]:
    """Arrival times (epoch seconds) of the requests made for ``model``."""
    if not log.exists():
        return []
    return [float(t) for name, t in (line.split() for line in log.read_text().splitlines()) if name == model]


# ---------------------------------------------------------------- the suite

def write_suite(root: Path, count: int) -> Path:
    """``count`` copies of a one-turn sample task (first turn, its image) as task folders."""
    task = json.loads((SAMPLE_TASK / "task.json").read_text())
    task["turns"] = task["turns"][:1]
    suite = root / "suite"
    for i in range(count):
        folder = suite / f"bench-{i:03d}"
        folder.mkdir(parents=True)
        shutil.copy(SAMPLE_TASK / "image_0.png", folder / "image_0.png")
        (folder / "task.json").write_text(json.dumps({**task, "id": f"bench-{i:03d}"}))
    return suite


# ---------------------------------------------------------------- the contenders, each a command

@dataclass(frozen=True)
class Proc:
    """One process of a tree at one moment: resident memory, CPU time so far, its name (``comm``)."""

    rss: int
    cpu_s: float
    name: str


def tree_snapshot(*roots: int) -> dict[int, Proc]:
    """The processes ``roots`` and all their descendants, from /proc (one scan)."""
    children: dict[int, list[int]] = {}
    procs: dict[int, Proc] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            statm = Path(f"/proc/{entry}/statm").read_text().split()
        except OSError:
            continue
        name, rest = stat.split("(", 1)[1].rsplit(")", 1)
        fields = rest.split()
        children.setdefault(int(fields[1]), []).append(int(entry))
        procs[int(entry)] = Proc(int(statm[1]) * os.sysconf("SC_PAGE_SIZE"), (int(fields[11]) + int(fields[12])) / tick,
                                 name)
    found, todo = {}, list(roots)
    while todo:
        current = todo.pop()
        if current in procs:
            found[current] = procs[current]
        todo += children.get(current, [])
    return found


def tree_rss(*roots: int) -> int:
    """Resident memory (bytes) of the processes ``roots`` and all their descendants, from /proc."""
    return sum(p.rss for p in tree_snapshot(*roots).values())


@dataclass
class Measured:
    wall: float
    span: float  # first to last model request
    first_request: float | None = None  # seconds from start to the first request
    peak_rss: int = 0
    calls: int = 0  # model requests in the span
    cpu_main: float = 0.0  # CPU seconds of the command's own process during the model span
    cpu_workers: tuple[float, ...] = ()  # the same, per worker process (`vtb-worker-N`), by N
    stderr: str = field(default="", repr=False)  # what the command wrote there (its -v log lines)

    def cpu_per_call_ms(self) -> tuple[float, tuple[float, ...]]:
        """CPU per model call (ms) of the command's process, and of each worker process: CPU in the
        model span over the calls made in it (a worker: its share, the calls over the workers)."""
        calls = max(self.calls, 1)
        share = calls / len(self.cpu_workers) if self.cpu_workers else calls
        return 1000 * self.cpu_main / calls, tuple(1000 * cpu / share for cpu in self.cpu_workers)


def span_cpu(samples: list[tuple[float, dict[int, Proc]]], times: list[float],
             pids: list[int]) -> tuple[int, list[float | None]]:
    """The model requests between the first and the last sample taken within the model span (request
    ``times``), and the CPU seconds each of ``pids`` spent between those two samples (None for a
    process not alive at both: a short-lived child that briefly bore its parent's name)."""
    within = [(t, snapshot) for t, snapshot in samples if min(times) <= t <= max(times)] or samples[-1:]
    (t0, begin), (t1, end) = within[0], within[-1]
    calls = sum(1 for t in times if t0 <= t <= t1)
    return calls, [end[pid].cpu_s - begin[pid].cpu_s if pid in begin and pid in end else None for pid in pids]


def run_command(command: list[str], env: dict[str, str], log: Path, model: str, also: Sequence[int] = ()) -> Measured:
    """Run ``command`` to its end: its wall time, model span, first request, the peak RSS of its tree
    (with the trees of the processes ``also``: the nodes of a Ray cluster it uses, say), the CPU its
    process and its worker processes spent during the model span, and its stderr."""
    start_epoch, start = time.time(), time.perf_counter()
    with tempfile.TemporaryFile("w+") as errors:  # a file, not a pipe: a chatty command never blocks on it
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=errors, text=True,
                                   cwd=NEUTRAL_CWD)
        peak, samples = 0, []
        while process.poll() is None:
            snapshot = tree_snapshot(process.pid, *also)
            samples.append((time.time(), snapshot))
            peak = max(peak, sum(p.rss for p in snapshot.values()))
            time.sleep(0.05)
        wall = time.perf_counter() - start
        errors.seek(0)
        stderr = errors.read()
    if process.returncode != 0:
        raise RuntimeError(f"{command[1]} exited {process.returncode}: {stderr.strip()[-500:]}")
    times = request_times(log, model)
    first, last = min(times), max(times)
    workers = sorted({(p.name, pid) for _, snapshot in samples for pid, p in snapshot.items()
                      if p.name.startswith("vtb-worker")})
    calls, cpu = span_cpu(samples, times, [process.pid, *(pid for _, pid in workers)])
    return Measured(wall, last - first, first - start_epoch, peak, calls=calls, cpu_main=round(cpu[0] or 0.0, 3),
                    cpu_workers=tuple(round(c, 3) for c in cpu[1:] if c is not None), stderr=stderr)


def run_vtb(suite: Path, out: Path, url: str, model: str, concurrency: int, log: Path, source: Path = ROOT,
            executor: list[str] | None = None) -> Measured:
    """One ``vtb run`` (of the checkout ``source``) over the suite; ``executor``: its executor flags."""
    env = {**os.environ, "OPENAI_BASE_URL": url, "OPENAI_API_KEY": "bench", "PYTHONPATH": str(source)}
    command = [sys.executable, "-m", "vtb_agents", "run", "--tasks", str(suite), "--model", f"openai:{model}",
               "--judge", "rule", "--concurrency", str(concurrency), "--out", str(out), *(executor or [])]
    return run_command(command, env, log, model)


def run_loop(suite: Path, url: str, model: str, concurrency: int, log: Path) -> Measured:
    """The suite through the hand-written loop (``bench/loop_client.py``), as its own command."""
    measured = run_command([sys.executable, str(ROOT / "bench" / "loop_client.py"), str(suite), url, model,
                            str(concurrency)], dict(os.environ), log, model)
    answers = json.loads((suite.parent / f"answers-{model}.json").read_text())
    assert answers and all(a == ANSWER for a in answers), answers[:3]
    return measured


# ---------------------------------------------------------------- start-up

def command_time(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, cwd=NEUTRAL_CWD)
    return time.perf_counter() - start


FLOOR_IMPORTS = "import langgraph.graph, langchain_openai"
"""What any LangGraph run of an OpenAI model imports before its first request (timed up to there:
the interpreter's teardown after it is left out with ``os._exit``)."""


def startup_times(repeat: int, baseline: str | None) -> tuple[float, float, float, float | None]:
    """Median times of ``vtb --help``, of ``python -c "import typer, rich"``, of importing
    :data:`FLOOR_IMPORTS` and of the ``baseline`` checkout's ``vtb --help``, interleaved."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    helps, bases, floors, befores = [], [], [], []
    for _ in range(repeat):
        helps.append(command_time([sys.executable, "-m", "vtb_agents", "--help"], env))
        bases.append(command_time([sys.executable, "-c", "import typer, rich"], env))
        floors.append(command_time([sys.executable, "-c", f"{FLOOR_IMPORTS}; import os; os._exit(0)"], env))
        if baseline:
            befores.append(command_time([sys.executable, "-m", "vtb_agents", "--help"],
                                        {**env, "PYTHONPATH": baseline}))
    return (statistics.median(helps), statistics.median(bases), statistics.median(floors),
            statistics.median(befores) if befores else None)


# ---------------------------------------------------------------- main

def retried(attempt: Any, tries: int = 3) -> Measured:
    """``attempt(k)`` until one succeeds: on this shared machine other people's runs can break one
    (each failure is printed, never hidden)."""
    for k in range(tries):
        try:
            return attempt(k)
        except RuntimeError as exc:
            print(f"  attempt {k} failed, measured again: {exc}", flush=True)
    raise SystemExit(f"{tries} attempts failed")


def share(ideal: float, wall: float) -> float:
    return ideal / wall if wall else 0.0


def median_of(rows: list[Measured], field: str) -> float:
    values = [getattr(r, field) for r in rows if getattr(r, field) is not None]
    return statistics.median(values) if values else float("nan")


def measure(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    suite = write_suite(root, args.tasks)
    log = root / "requests.log"
    contenders = ("vtb", "loop", *(["base"] if args.baseline else []),
                  *(["proc"] if args.executor == "processes" else []))
    results: dict[int, dict[str, list[Measured]]] = {n: {who: [] for who in contenders} for n in args.levels}
    runs = 0
    with api_server(args.latency, log, args.workload) as url:
        for rep in range(args.repeat):
            for n in args.levels:
                order = contenders if rep % 2 == 0 else contenders[::-1]
                for who in order:
                    runs += 1
                    model = f"{who}-{n}-{rep}"
                    if who != "loop":
                        source = Path(args.baseline) if who == "base" else ROOT
                        flags = processes_flags(args) if who == "proc" else []
                        results[n][who].append(retried(
                            lambda k, runs=runs, model=model, n=n, source=source, flags=flags: run_vtb(
                                suite, root / f"run-{runs}-{k}", url, f"{model}-{k}", n, log, source, flags)))
                    else:
                        results[n]["loop"].append(run_loop(suite, url, model, n, log))
                    print(f"  N={n:2d} {who:4s} rep {rep}: {results[n][who][-1]}", flush=True)
    zero_vtb, zero_loop, zero_base = [], [], []
    with api_server(0.0, log, args.workload) as url:
        for rep in range(args.repeat):
            runs += 1
            zero_vtb.append(retried(lambda k, runs=runs, rep=rep: run_vtb(
                suite, root / f"run-{runs}-{k}", url, f"zvtb-{rep}-{k}", 1, log)))
            zero_loop.append(run_loop(suite, url, f"zloop-{rep}", 1, log))
            if args.baseline:
                runs += 1
                zero_base.append(retried(lambda k, runs=runs, rep=rep: run_vtb(
                    suite, root / f"run-{runs}-{k}", url, f"zbase-{rep}-{k}", 1, log, Path(args.baseline))))
    help_s, base_s, floor_s, before_s = startup_times(max(5, args.repeat * 2), args.baseline)
    return {"results": results, "zero_vtb": zero_vtb, "zero_loop": zero_loop, "zero_base": zero_base,
            "help": help_s, "base": base_s, "floor": floor_s, "help_before": before_s}


def processes_flags(args: argparse.Namespace) -> list[str]:
    """The executor flags of the ``proc`` contender: ``--executor processes`` (and ``--workers``)."""
    return ["--executor", "processes", *(["--workers", str(args.workers)] if args.workers else [])]


def processes_table(args: argparse.Namespace, m: dict[str, Any]) -> str:
    """Threads (``--executor local``) and processes side by side: share of ideal, CPU per model call
    in each process that runs tasks (and in the parent that writes the results), peak RSS."""
    calls = args.tasks * CALLS_PER_TASK
    lines = ["| concurrency N | threads: share of ideal (whole command / model span) | processes: share of ideal "
             "(whole command / model span) | loop: share of ideal (whole command) | processes / threads (whole "
             "command) | CPU per model call, threads: the one process | CPU per model call, processes: each worker "
             "process; the parent | peak RSS of the tree: threads / processes |",
             "|---|---|---|---|---|---|---|---|"]
    for n in args.levels:
        ideal = calls * args.latency / n
        vtb, proc, loop = (m["results"][n][who] for who in ("vtb", "proc", "loop"))
        threads_whole, proc_whole = share(ideal, median_of(vtb, "wall")), share(ideal, median_of(proc, "wall"))
        thread_ms = statistics.median(r.cpu_per_call_ms()[0] for r in vtb)
        worker_ms = [statistics.median(r.cpu_per_call_ms()[1][i] for r in proc if len(r.cpu_per_call_ms()[1]) > i)
                     for i in range(max(len(r.cpu_workers) for r in proc))]
        parent_ms = statistics.median(r.cpu_per_call_ms()[0] for r in proc)
        lines.append(
            f"| {n} | {threads_whole:.2f} / {share(ideal - args.latency, median_of(vtb, 'span')):.2f} | "
            f"{proc_whole:.2f} / {share(ideal - args.latency, median_of(proc, 'span')):.2f} | "
            f"{share(ideal, median_of(loop, 'wall')):.2f} | {proc_whole / threads_whole:.2f} | {thread_ms:.1f} ms | "
            f"{' and '.join(f'{w:.1f} ms' for w in worker_ms)} ({len(worker_ms)} workers); {parent_ms:.1f} ms | "
            f"{median_of(vtb, 'peak_rss') / 2**20:,.0f} MB / {median_of(proc, 'peak_rss') / 2**20:,.0f} MB |")
    return "\n".join(lines)


def table(args: argparse.Namespace, m: dict[str, Any]) -> str:
    calls = args.tasks * CALLS_PER_TASK
    lines = ["| concurrency N | vtb: share of ideal (whole command) | vtb: share of ideal (model span) | "
             "loop: share of ideal (whole command) | vtb / loop | peak RSS of the tree: vtb / loop | "
             "first model request: vtb / loop |",
             "|---|---|---|---|---|---|---|"]
    if args.baseline:
        lines[0] += " before (baseline checkout): whole / model span / peak RSS / first request |"
        lines[1] += "---|"
    for n in args.levels:
        ideal = calls * args.latency / n
        vtb, loop = m["results"][n]["vtb"], m["results"][n]["loop"]
        whole = share(ideal, median_of(vtb, "wall"))
        span = share(ideal - args.latency, median_of(vtb, "span"))
        looped = share(ideal, median_of(loop, "wall"))
        row = (f"| {n} | {whole:.2f} | {span:.2f} | {looped:.2f} | {whole / looped:.2f} | "
               f"{median_of(vtb, 'peak_rss') / 2**20:,.0f} MB / {median_of(loop, 'peak_rss') / 2**20:,.0f} MB | "
               f"{median_of(vtb, 'first_request'):.2f} s / {median_of(loop, 'first_request'):.2f} s |")
        if args.baseline:
            base = m["results"][n]["base"]
            before_span = share(ideal - args.latency, median_of(base, 'span'))
            row += (f" {share(ideal, median_of(base, 'wall')):.2f} / {before_span:.2f} / "
                    f"{median_of(base, 'peak_rss') / 2**20:,.0f} MB / {median_of(base, 'first_request'):.2f} s |")
        lines.append(row)
    added = (median_of(m["zero_vtb"], "span") - median_of(m["zero_loop"], "span")) / calls * 1000
    added_base = (median_of(m["zero_base"], "span") - median_of(m["zero_loop"], "span")) / calls * 1000
    lines += ["", f"- Added harness time per model call over the loop, zero-latency model, concurrency 1 "
              f"(model spans): **{added:.1f} ms** (vtb {median_of(m['zero_vtb'], 'span'):.2f} s, loop "
              f"{median_of(m['zero_loop'], 'span'):.2f} s for {calls} calls); whole `vtb run` at zero latency "
              f"{median_of(m['zero_vtb'], 'wall'):.2f} s.",
              *([f"- Baseline checkout, same measurement: **{added_base:.1f} ms** per call."] if args.baseline else []),
              f"- `vtb --help`: {m['help']:.2f} s; `python -c \"import typer, rich\"`: {m['base']:.2f} s "
              f"(**{m['help'] / m['base']:.1f}x**), medians of interleaved runs"
              + (f"; the baseline checkout's `vtb --help`: {m['help_before']:.2f} s "
                 f"({m['help_before'] / m['base']:.1f}x)." if m["help_before"] is not None else "."),
              f"- `python -c \"{FLOOR_IMPORTS}\"` (what the first request of any LangGraph run of an OpenAI "
              f"model needs): {m['floor']:.2f} s, interleaved with the above."]
    return "\n".join(lines)


PROCESSES_SECTION = "## Many cores: threads and processes, CPU per model call"


def write_section(title: str, section: str) -> None:
    """Put ``section`` (starting with its ``title`` line) into BENCHMARKS.md, replacing the one there."""
    path = ROOT / "BENCHMARKS.md"
    text = path.read_text()
    start = text.find(title + "\n")
    if start >= 0:
        end = text.find("\n## ", start + len(title))
        text = text[:start] + section + ("\n" + text[end + 1:] if end >= 0 else "")
    else:
        first = text.find("\n## ")
        text = text[:first + 1] + section + "\n" + text[first + 1:]
    path.write_text(text)


def write_processes(args: argparse.Namespace, body: str) -> None:
    """The threads-and-processes section of BENCHMARKS.md."""
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    repeats = f"medians of {args.repeat} repetitions" if args.repeat > 1 else "one repetition"
    workers = f"--workers {args.workers}" if args.workers else "the default --workers"
    cores = len(os.sched_getaffinity(0))
    section = (f"{PROCESSES_SECTION}\n\n`bench/cli_throughput.py --workload {args.workload} --executor processes`: "
               f"the real `vtb run` with the thread executor (`--executor local`) and with `--executor processes` "
               f"({workers}), next to the loop, interleaved, {repeats}; {args.tasks} one-turn tasks, "
               f"{CALLS_PER_TASK} calls each ({ROUNDS[args.workload]}), {args.latency:g} s per call. CPU per model "
               f"call: the CPU time a process spent between the first and the last model request (sampled from "
               f"/proc every 50 ms, start-up and the report left out) over the requests made meanwhile; for a "
               f"worker process (`vtb-worker-N` in `ps`), over its share of them. One process of threads can make "
               f"at most 1,000 / (CPU ms per call) calls per second, whatever the API's speed.\n\n{body}\n\n"
               f"This machine has {cores} cores (shared; load average when the run ended: {load}), so processes "
               f"cannot show here what they give on a machine with many: the columns to read are the CPU per call "
               f"per process (the ceiling each process has) and that the shares match.\n\n"
               f"Reproduce: `.venv/bin/python bench/cli_throughput.py --workload {args.workload} --executor "
               f"processes --tasks {args.tasks} --latency {args.latency:g} --levels "
               f"{' '.join(map(str, args.levels))} --repeat {args.repeat} --write`.\n")
    write_section(PROCESSES_SECTION, section)


def write_benchmarks(args: argparse.Namespace, body: str) -> None:
    repeats = f"medians of {args.repeat} repetitions" if args.repeat > 1 else "one repetition"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    title = SECTIONS[args.workload]
    section = (f"{title}\n\n`bench/cli_throughput.py --workload {args.workload}`: the real `vtb run` as a "
               f"subprocess against a local chat-completions server (its own process) with {args.latency:g} s "
               f"per call; {args.tasks} one-turn tasks, {CALLS_PER_TASK} calls each ({ROUNDS[args.workload]}; the "
               f"task's image in every call); next to the hand-written openai-client loop `bench/loop_client.py` "
               f"(threads, one client, the same calls, also run as its own command), interleaved, {repeats}. "
               f"Ideal = tasks x calls x latency / N. \"Whole command\" is start to exit (for vtb: start-up, "
               f"sandboxes, grading, summary, report); \"model span\" is first to last model request (ideal "
               f"minus one call).\n\n{body}\n\n"
               f"Load average when the run ended: {load} (a shared 2-core machine; compare the columns of one "
               f"row, measured side by side, rather than absolute numbers).\n\n"
               f"Reproduce: `.venv/bin/python bench/cli_throughput.py --workload {args.workload} --write` "
               f"(`--quick` for a smoke check).\n")
    write_section(title, section)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=64)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 4, 16, 32])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="smoke check: 8 tasks, 0.2 s, N = 1 and 4, once")
    parser.add_argument("--write", action="store_true", help="put the table into BENCHMARKS.md")
    parser.add_argument("--baseline", default=None,
                        help="another checkout (e.g. `git archive main`) whose vtb runs too, interleaved: before/after")
    parser.add_argument("--workload", choices=WORKLOADS, default="calc",
                        help="calc: two calculator rounds (no code, so no sandbox process); "
                             "code: a Python crop in the sandbox, then the calculator")
    parser.add_argument("--executor", choices=("local", "processes"), default="local",
                        help="processes: also run vtb with --executor processes, side by side with the thread "
                             "executor, and report the CPU per model call of each process")
    parser.add_argument("--workers", type=int, default=None, help="--workers of --executor processes")
    parser.add_argument("--serve", nargs=3, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(float(args.serve[0]), Path(args.serve[1]), args.serve[2])
        return
    if args.quick:
        args.tasks, args.latency, args.levels, args.repeat = 8, 0.2, [1, 4], 1
    with tempfile.TemporaryDirectory() as tmp:
        measured = measure(args, Path(tmp))
    body = table(args, measured)
    print(body)
    if args.executor == "processes":
        both = processes_table(args, measured)
        print(both)
    if args.write and args.executor == "processes":  # its own section: the workload's stays as measured
        write_processes(args, both)
    elif args.write:
        write_benchmarks(args, body)


if __name__ == "__main__":
    main()
