"""Start-up of the real ``vtb`` command: ``vtb --help`` and ``vtb run --help`` next to ``import typer, rich``.

Each contender is a fresh process of this virtual environment's interpreter, timed from start to
exit: the ``vtb`` script the package installs (``.venv/bin/vtb``, as a user runs it), and the
floor, an interpreter that imports only the CLI's two libraries. The contenders run in turn, one
after the other, ``--repeat`` rounds, the order rotated every round (so neither always runs
first on a loaded machine); the medians are compared (ratio of medians). ``--baseline DIR`` adds
the same ``vtb --help`` run from another checkout (e.g. ``git archive``: its package first on
``PYTHONPATH``), interleaved too: before and after. ``--write`` puts the table into BENCHMARKS.md.

    .venv/bin/python bench/cli_startup.py [--repeat 41] [--baseline DIR] [--write]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VTB = str(Path(sys.executable).with_name("vtb"))
FLOOR = "import typer, rich"
SECTION = "## Start-up: `vtb --help` against `import typer, rich`"


def command_time(command: list[str], env: dict[str, str]) -> float:
    """Seconds ``command`` takes from start to exit (output discarded; it must succeed)."""
    start = time.perf_counter()
    subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True,
                   cwd=tempfile.gettempdir())
    return time.perf_counter() - start


def contenders(baseline: str | None) -> dict[str, tuple[list[str], dict[str, str]]]:
    """Each contender's command line and environment, by its name in the table."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    found = {"`vtb --help`": ([VTB, "--help"], env),
             "`vtb run --help`": ([VTB, "run", "--help"], env),
             f'`python -c "{FLOOR}"`': ([sys.executable, "-c", FLOOR], env)}
    if baseline:
        found["`vtb --help`, baseline checkout"] = ([VTB, "--help"], {**env, "PYTHONPATH": baseline})
    return found


def measure(repeat: int, baseline: str | None) -> dict[str, list[float]]:
    """``repeat`` times of every contender, run in turn, the order rotated each round."""
    commands = contenders(baseline)
    names = list(commands)
    times: dict[str, list[float]] = {name: [] for name in names}
    for name in names:  # one untimed start each: file caches warm for all alike
        command_time(*commands[name])
    for round_ in range(repeat):
        for name in names[round_ % len(names):] + names[:round_ % len(names)]:
            times[name].append(command_time(*commands[name]))
    return times


def table(times: dict[str, list[float]]) -> str:
    """The Markdown table: median, quartiles and ratio of medians to the floor, per contender."""
    floor = statistics.median(times[f'`python -c "{FLOOR}"`'])
    rows = ["| command | median | quartiles | median / floor's median |", "|---|---|---|---|"]
    for name, values in times.items():
        q1, _, q3 = statistics.quantiles(values, n=4)
        median = statistics.median(values)
        rows.append(f"| {name} | {median * 1000:.0f} ms | {q1 * 1000:.0f}-{q3 * 1000:.0f} ms | "
                    f"**{median / floor:.2f}x** |")
    return "\n".join(rows)


def section(times: dict[str, list[float]], repeat: int) -> str:
    """The BENCHMARKS.md section for ``times``."""
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return "\n".join([
        SECTION, "",
        "`bench/cli_startup.py`: the real `vtb` script of the virtual environment (`.venv/bin/vtb`) and "
        f"`python -c \"{FLOOR}\"` (the CLI's own libraries, nothing of ours), each a fresh process timed from "
        f"start to exit, run in turn {repeat} rounds (order rotated every round); medians and the ratio of "
        "medians. \"Baseline checkout\" is the code before `vtb --help` stopped importing pydantic (it "
        "built the run options from `RunConfig`'s fields; now from `vtb_agents/cli/run_settings.json`, "
        "derived from them), run by the same script with its package first on `PYTHONPATH`.", "",
        table(times), "",
        "`vtb run --help` loads pydantic whatever the options are made from: typer (0.29) coerces a "
        "command's parameter values with pydantic as soon as it parses them, `--help` included; the "
        "group's help parses no command's parameters.", "",
        f"Load average when the run ended: {load} (a shared 2-core machine, loaded on purpose: compare the "
        "rows of one run, measured side by side, rather than absolute numbers).", "",
        "Reproduce: `.venv/bin/python bench/cli_startup.py --write` (`--baseline DIR` with a checkout of "
        "another commit, e.g. `git archive COMMIT | tar x -C DIR`).", ""])


def write_section(text: str) -> None:
    """Put ``text`` (starting with :data:`SECTION`) into BENCHMARKS.md, replacing the one there or
    adding it after the CLI throughput sections."""
    path = ROOT / "BENCHMARKS.md"
    page = path.read_text(encoding="utf-8")
    start = page.find(SECTION + "\n")
    if start < 0:
        start = end = page.index("\n## Where the time goes through the CLI") + 1
    else:
        end = page.find("\n## ", start + len(SECTION))
        end = len(page) if end < 0 else end + 1
    path.write_text(page[:start] + text + "\n" + page[end:], encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=41, help="rounds (each runs every contender once)")
    parser.add_argument("--baseline", default=None, help="another checkout whose `vtb --help` runs too")
    parser.add_argument("--write", action="store_true", help="put the table into BENCHMARKS.md")
    args = parser.parse_args()
    times = measure(args.repeat, args.baseline)
    text = section(times, args.repeat)
    print(text)
    if args.write:
        write_section(text)


if __name__ == "__main__":
    main()
