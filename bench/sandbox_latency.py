"""Per-call latency of the code sandbox, side by side, and its start time.

One call = open ``image_0.png`` (2000x1500 PNG), crop a 400x300 region, save
``transformed_image_N.png``: the typical VisualToolBench vision-tool call. Compared in interleaved
rounds (each round runs every method once, so machine noise hits all of them alike):

  (a) in-process ``exec`` with cwd = workdir (the reference harness: no isolation at all)
  (b) the persistent LocalSandbox at the "bwrap" level, its worker forked by the fork server
  (e) the same with its worker started as a program (bwrap), as without the fork server
  (c) the persistent LocalSandbox at the "fallback" level
  (d) a fresh Python process per call (``python -I -c CODE``, same imports)

Warm calls (the worker already imported PIL) are measured apart from the first call of a fresh
sandbox (its worker starts at its first call: start + PIL import + crop), side by side with a warm
call of the same sandbox, as a ratio. Start time = the first call (``pass``) of a fresh sandbox;
also 16 starts at once next to 16 bare interpreters, in machine CPU. Memory: 32 sandboxes that
ran one crop each, waiting (as tasks wait on the model): the PSS (``/proc/PID/smaps_rollup``) of
every process they hold, the fork server's included, per sandbox.

    .venv/bin/python bench/sandbox_latency.py            # writes the section in BENCHMARKS.md
    .venv/bin/python bench/sandbox_latency.py --no-write
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from support.proctree import tree  # noqa: E402  (the tests' helper)
from vtb_agents.sandbox import LocalSandbox, forkserver  # noqa: E402
from vtb_agents.sandbox import isolation as iso  # noqa: E402
from vtb_agents.sandbox.local import site_setup, worker_env  # noqa: E402

CONCURRENT = 16
"""Sandboxes started at once in the concurrent-start measurement."""
WAITING = 32
"""Sandboxes held open at once in the memory measurement."""
VARIANTS = {"fork": ("bwrap", True), "spawn": ("bwrap", False), "fallback": ("fallback", False)}
"""How a sandbox starts its worker: (isolation level, fork server)."""
VARIANT_NAMES = {"fork": "bwrap, forked by the fork server", "spawn": "bwrap, started as a program",
                 "fallback": "fallback, started as a program"}
CODE = ("from PIL import Image\nim = Image.open('image_0.png')\n"
        "im.crop((800, 600, 1200, 900)).save('transformed_image_{n}.png')\n")
SECTION = "## Sandbox latency"


def make_image(path: Path) -> None:
    """A 2000x1500 photo-like PNG (smooth colour field plus fine noise), in a child process so
    that this process has not imported PIL before method (a)'s first call."""
    script = ("import numpy as np\nfrom PIL import Image\nrng = np.random.default_rng(0)\n"
              "low = Image.fromarray(rng.integers(0, 255, (150, 200, 3), dtype=np.uint8))\n"
              "im = np.asarray(low.resize((2000, 1500), Image.BICUBIC), dtype=np.int16)\n"
              "im = im + rng.integers(-6, 7, im.shape)\n"
              f"Image.fromarray(im.clip(0, 255).astype(np.uint8)).save({str(path)!r})\n")
    subprocess.run([sys.executable, "-c", script], check=True)


class InProcess:
    """(a): exec in this process, cwd switched to the workdir for the call."""

    def __init__(self, workdir: Path) -> None:
        self.workdir, self.namespace = workdir, {"__name__": "__main__"}

    def __call__(self, code: str) -> None:
        previous = os.getcwd()
        os.chdir(self.workdir)
        try:
            exec(compile(code, "<cell>", "exec"), self.namespace)
        finally:
            os.chdir(previous)


def fresh_process(workdir: Path) -> Callable[[str], None]:
    """(d): one new interpreter per call."""
    def call(code: str) -> None:
        subprocess.run([sys.executable, "-I", "-c", code], cwd=workdir, check=True)
    return call


def sandbox_call(sandbox: LocalSandbox) -> Callable[[str], None]:
    """(b)/(c): one call in a persistent sandbox."""
    def call(code: str) -> None:
        result = sandbox.run(code)
        if not result.ok:
            raise RuntimeError(f"sandbox call failed: {result.error}\n{result.stderr}")
    return call


def timed(function: Callable[[], object]) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def open_variant(variant: str, workdir: Path | None = None) -> LocalSandbox:
    level, fork = VARIANTS[variant]
    return LocalSandbox(workdir, isolation=level, fork_server=fork)


def measure_starts(variant: str, image: bytes) -> tuple[float, float]:
    """Start time (worker start and an empty cell: the worker starts at the first ``run``) and
    first-call time (PIL import included) of one fresh sandbox."""
    with open_variant(variant) as sandbox:
        start = timed(lambda: sandbox_call(sandbox)("pass"))
        sandbox.put_file("image_0.png", image)
        return start, timed(lambda: sandbox_call(sandbox)(CODE.format(n=0)))


def first_and_warm(variant: str, image: bytes) -> tuple[float, float]:
    """(first code call of a fresh sandbox: worker start + PIL import + crop, the next crop)."""
    with open_variant(variant) as sandbox:
        sandbox.put_file("image_0.png", image)
        first = timed(lambda: sandbox_call(sandbox)(CODE.format(n=0)))
        return first, timed(lambda: sandbox_call(sandbox)(CODE.format(n=1)))


def memory_kb(pid: int) -> tuple[int, int]:
    """(PSS, RSS) of ``pid`` in kB, from ``/proc/PID/smaps_rollup``."""
    fields = {line.split(":")[0]: int(line.split()[1])
              for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]}
    return fields["Pss"], fields["Rss"]


def waiting_memory(variant: str, image: bytes, count: int, code: str) -> tuple[float, float]:
    """(PSS, summed RSS) in MB per sandbox of ``count`` sandboxes that each ran ``code`` and now
    wait; every process they hold counts, and the fork server's processes are shared among them."""
    sandboxes = [open_variant(variant) for _ in range(count)]
    try:
        for sandbox in sandboxes:
            sandbox.put_file("image_0.png", image)
            sandbox_call(sandbox)(code)
        pids = {p for s in sandboxes for p in tree(s.worker_pid or 0)}
        if VARIANTS[variant][1]:
            pids |= set(tree(next(iter(forkserver._servers.values())).pid))
        time.sleep(0.5)
        pss, rss = map(sum, zip(*(memory_kb(p) for p in pids)))
    finally:
        for sandbox in sandboxes:
            sandbox.close()
    return pss / 1024 / count, rss / 1024 / count


def fork_server_start() -> tuple[float, float]:
    """(seconds to start a fork server: bwrap, interpreter, the preloads; its PSS in MB)."""
    forkserver.close_all()
    python = sys.executable
    start = time.perf_counter()
    server = forkserver.fork_server(python, site_setup(python), worker_env(iso.INSIDE_WORKDIR))
    took = time.perf_counter() - start
    return took, sum(memory_kb(p)[0] for p in tree(server.pid)) / 1024


def machine_cpu_s() -> float:
    """CPU time the whole machine has spent (all processes, user and system), from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # minus idle and iowait


def concurrent_starts(start_one: Callable[[], object], count: int) -> tuple[float, float]:
    """(wall seconds, machine CPU seconds per start) for ``count`` starts at once, as a run's tasks do."""
    before, begin = machine_cpu_s(), time.perf_counter()
    with ThreadPoolExecutor(count) as pool:
        list(pool.map(lambda _: start_one(), range(count)))
    return time.perf_counter() - begin, (machine_cpu_s() - before) / count


def sandbox_start(variant: str) -> None:
    with open_variant(variant) as sandbox:
        result = sandbox.run("pass")
        assert result.ok, result.stderr


def interpreter_start() -> None:
    subprocess.run([sys.executable, "-I", "-c", "pass"], check=True)


def run(rounds: int, starts: int) -> dict[str, object]:
    """All measurements; medians in milliseconds."""
    base = Path(tempfile.mkdtemp(prefix="vtb-bench-"))
    zygote_s, zygote_pss = fork_server_start()
    try:
        make_image(base / "image_0.png")
        image = (base / "image_0.png").read_bytes()
        dirs = {m: base / m for m in "abcde"}
        for folder in dirs.values():
            folder.mkdir()
            (folder / "image_0.png").write_bytes(image)
        boxes = {"b": open_variant("fork", dirs["b"]), "e": open_variant("spawn", dirs["e"]),
                 "c": open_variant("fallback", dirs["c"])}
        memory_cap, syscall_filter = boxes["b"].memory_cap, boxes["b"].syscall_filter
        try:
            methods = {"a": InProcess(dirs["a"]), **{m: sandbox_call(box) for m, box in boxes.items()},
                       "d": fresh_process(dirs["d"])}
            first = {m: timed(lambda m=m: methods[m](CODE.format(n=0))) for m in "abec"}
            warm: dict[str, list[float]] = {m: [] for m in methods}
            empty: dict[str, list[float]] = {m: [] for m in methods}
            for n in range(1, rounds + 1):
                order = "abecd"[n % 5:] + "abecd"[:n % 5]
                for m in order:
                    warm[m].append(timed(lambda m=m, n=n: methods[m](CODE.format(n=n))))
                    empty[m].append(timed(lambda m=m: methods[m]("pass")))
        finally:
            for box in boxes.values():
                box.close()
        for variant in VARIANTS:  # the once-per-process isolation probe is not a start
            sandbox_start(variant)
        start_times: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
        pairs: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
        for _ in range(starts):  # interleaved
            for variant in VARIANTS:
                start_times[variant].append(measure_starts(variant, image))
                pairs[variant].append(first_and_warm(variant, image))
        together: dict[str, list[tuple[float, float]]] = {**{v: [] for v in VARIANTS}, "interpreter": []}
        for _ in range(3):  # interleaved repetitions
            for variant in VARIANTS:
                together[variant].append(concurrent_starts(lambda v=variant: sandbox_start(v), CONCURRENT))
            together["interpreter"].append(concurrent_starts(interpreter_start, CONCURRENT))
        memory = {v: (waiting_memory(v, image, WAITING, CODE.format(n=0)),
                      waiting_memory(v, image, WAITING, "pass")) for v in VARIANTS}
    finally:
        shutil.rmtree(base)
        forkserver.close_all()

    def median_ms(values: list[float]) -> float:
        return statistics.median(values) * 1000

    return {"warm": {m: median_ms(v) for m, v in warm.items()},
            "empty": {m: median_ms(v) for m, v in empty.items()},
            "png_bytes": len(image), "first": {m: v * 1000 for m, v in first.items()}, "rounds": rounds,
            "starts": {v: (median_ms([s for s, _ in t]), median_ms([f for _, f in t])) for v, t in start_times.items()},
            "n_starts": starts,
            "pairs": {v: (median_ms([f for f, _ in t]), median_ms([w for _, w in t]),
                          statistics.median(f / w for f, w in t)) for v, t in pairs.items()},
            "together": {k: (median_ms([w for w, _ in v]), median_ms([c for _, c in v])) for k, v in together.items()},
            "memory": memory, "zygote": (zygote_s * 1000, zygote_pss),
            "memory_cap": memory_cap, "syscall_filter": syscall_filter}


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    bwrap = subprocess.run(["bwrap", "--version"], capture_output=True, text=True).stdout.strip()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{os.cpu_count()} cores ({cpu}), Linux {platform.release()}, Python "
            f"{platform.python_version()}, {bwrap or 'no bwrap'}, running as "
            f"{'root' if os.geteuid() == 0 else 'non-root'}; load average {load} when the run "
            "ended (a shared machine: medians of interleaved rounds absorb most of the noise)")


def report(results: dict) -> str:
    warm, first, starts, empty = results["warm"], results["first"], results["starts"], results["empty"]
    names = {"a": "(a) in-process exec (reference harness)", "b": "(b) persistent sandbox, bwrap, fork server",
             "e": "(e) persistent sandbox, bwrap, worker started as a program",
             "c": "(c) persistent sandbox, fallback", "d": "(d) fresh Python process per call"}
    lines = [SECTION, "",
             "Per-call latency of one vision-tool call (open a 2000x1500 PNG of "
             f"{results['png_bytes'] / 1e6:.1f} MB, crop 400x300, save a PNG),",
             f"median over {results['rounds']} interleaved rounds of warm calls (PIL already imported;",
             "for (d) every call pays interpreter start and the PIL import). \"empty call\" runs `pass`:",
             "the fixed cost of a call (pipes, working-directory scan; for (d) a process start).", "",
             "| method | crop+save, warm, median | vs (a) | empty call, median | first crop+save of a "
             "fresh worker |", "|---|---|---|---|---|"]
    for m in "abecd":
        first_text = f"{first[m]:.1f} ms" if m in first else "(every call)"
        lines.append(f"| {names[m]} | {warm[m]:.1f} ms | {warm[m] / warm['a']:.2f}x | "
                     f"{empty[m]:.2f} ms | {first_text} |")
    lines += ["", "**A sandbox's first code call against a warm one** (target: within 1.5x). A fresh sandbox "
              "per pair: its first call (the worker starts: start + PIL import + crop + save), then the same "
              f"crop again in it; medians of {results['n_starts']} pairs, interleaved across the variants, and "
              "the median of the per-pair ratios:", "",
              "| worker | first call (start + crop) | warm call | first / warm |", "|---|---|---|---|"]
    for variant, (first_call, warm_call, ratio) in results["pairs"].items():
        lines.append(f"| {VARIANT_NAMES[variant]} | {first_call:.0f} ms | {warm_call:.0f} ms | {ratio:.2f}x |")
    zygote_ms, zygote_pss = results["zygote"]
    lines += ["", f"The fork server itself starts once per process, at the first code call of the run: "
              f"{zygote_ms:.0f} ms (bwrap, the interpreter, PIL, NumPy and OpenCV imported), "
              f"{zygote_pss:.0f} MB PSS while no sandbox runs.", "",
              "Sandbox start (the worker starts at the first call: here an empty one), median of "
              f"{results['n_starts']} starts; then the first crop, which imports PIL unless the fork server has:", "",
              "| worker | start | first crop |", "|---|---|---|"]
    for variant, (start, first_call) in starts.items():
        lines.append(f"| {VARIANT_NAMES[variant]} | {start:.0f} ms | {first_call:.0f} ms |")
    lines += ["", f"{CONCURRENT} starts at once (as a run's first tasks), median of 3 interleaved repetitions, "
              "next to as many bare interpreters (`python -I -c pass`) started at once; CPU is the whole "
              "machine's (all processes) per start:", "",
              "| what starts | wall, all of them | CPU per start | CPU vs a bare interpreter |", "|---|---|---|---|"]
    together = results["together"]
    names_together = {**{v: f"sandbox, {n} (worker + empty call)" for v, n in VARIANT_NAMES.items()},
                      "interpreter": "bare interpreter (`python -I -c pass`)"}
    for key, (wall, cpu) in together.items():
        lines.append(f"| {names_together[key]} | {wall:.0f} ms | {cpu:.1f} ms | "
                     f"{cpu / together['interpreter'][1]:.2f}x |")
    memory = results["memory"]
    lines += ["", f"**Memory per waiting sandbox**: {WAITING} sandboxes open at once, summed over every process "
              "they hold (started as a program: bwrap's two, the supervisor, the kernel; forked: the task's pid 1, "
              "the supervisor, the kernel, and the fork server's three processes shared among all of them), "
              f"divided by {WAITING}; once after one crop each (the kernel holds PIL and the image it opened: "
              "2000x1500 decoded is 12 MB of the task's own data), once after an empty call (what a sandbox "
              "costs before its task's data). PSS counts a page shared by k processes as 1/k in each; summed "
              "RSS counts it k times (a forked process maps the fork server's preloaded heap):", "",
              "| worker | PSS per sandbox, after a crop | vs started as a program | PSS, after an empty call | "
              "vs started as a program | summed RSS per sandbox, after a crop |", "|---|---|---|---|---|---|"]
    (spawn_crop, _), (spawn_empty, _) = memory["spawn"]
    for variant, ((pss, rss), (empty_pss, _)) in memory.items():
        lines.append(f"| {VARIANT_NAMES[variant]} | {pss:.1f} MB | {pss / spawn_crop:.2f}x | {empty_pss:.1f} MB | "
                     f"{empty_pss / spawn_empty:.2f}x | {rss:.1f} MB |")
    lines += ["", "Targets: persistent isolated sandbox within 1.25x of in-process exec (warm); start "
              "under 300 ms; a sandbox's first code call within 1.5x of a warm call (issue 25).", "",
              "The worker skips `site` (`python -I -S`, its site-packages put on `sys.path` from the host's): "
              "`site` runs every `.pth` file (an editable install's import hook, setuptools' distutils shim), "
              "which cost each sandbox about a sixth of its start (measured side by side: \"Where the time "
              "goes through the CLI\").", "",
              f"Sandboxes measured with all their confinement: memory cap {results['memory_cap']} "
              f"(a cgroup per sandbox, joined before the worker's first process forks), {results['syscall_filter']}, "
              "working-directory quota polled every 0.1 s.", "",
              f"Machine: {machine()}.", "",
              "Reproduce: `.venv/bin/python bench/sandbox_latency.py` (a few minutes; rewrites this "
              "section).", ""]
    return "\n".join(lines)


def write_section(path: Path, section: str) -> None:
    """Replace (or add) the "Sandbox latency" section of ``path``, keeping other sections."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n\n"
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    text = pattern.sub(lambda _: section + "\n", text) if pattern.search(text) else \
        text.rstrip("\n") + "\n\n" + section + "\n"
    path.write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--starts", type=int, default=10)
    parser.add_argument("--output", type=Path, default=ROOT / "BENCHMARKS.md")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    section = report(run(args.rounds, args.starts))
    print(section)
    if not args.no_write:
        write_section(args.output, section)
        print(f"written to {args.output}")


if __name__ == "__main__":
    main()
