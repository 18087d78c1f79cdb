"""Writing the report of a 1,204-task run: ``report.html`` (the task table) and 1,204 task pages.

The bundled sample suite runs once with the replay model (real sandbox, real images); its results
are copied to 1,204 tasks (``tests/support/big_run.py``, answers of about 3,000 characters). The report is
then written twice, side by side: with the images already made (what ``vtb run`` and ``evaluate()``
leave, their preparer having made them during the run) and cold (``report_files/`` removed first,
so the report decodes and shrinks every image itself). Prints the times, the sizes of report.html
and of the task pages, and the ratio.

    .venv/bin/python bench/report_pages.py
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.big_run import big_run  # noqa: E402  (the tests' run copier)

from vtb_agents.report import write_report  # noqa: E402
from vtb_agents.runner.run import RunConfig, run_suite  # noqa: E402
from vtb_agents.tasks import load_tasks  # noqa: E402

TASKS = 1204


def timed(run_dir: Path, tasks: list) -> tuple[float, float]:
    """Wall and CPU seconds of writing the report (CPU time says more on a loaded machine)."""
    start, cpu = time.perf_counter(), time.process_time()
    write_report(run_dir, tasks=tasks)
    return time.perf_counter() - start, time.process_time() - cpu


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="vtb-bench-report-") as scratch:
        small = Path(scratch) / "sample"
        run_suite(load_tasks("sample"), RunConfig(model="replay", tasks="sample"), small)
        big = Path(scratch) / "big"
        tasks = big_run(small, big, TASKS)
        cold = timed(big, tasks)  # makes every image: the same files the run's preparer would have made
        prepared = timed(big, tasks)
        shutil.rmtree(big / "report_files")
        cold_again = timed(big, tasks)
        report = (big / "report.html").stat().st_size
        pages = sorted((big / "tasks").glob("*.html"))
        page_bytes = sum(p.stat().st_size for p in pages)
        print(f"{TASKS} tasks ({len(load_tasks('sample'))} sample tasks copied), {len(pages)} task pages")
        coldest = min(cold, cold_again)
        print(f"write_report, images prepared: {prepared[0]:.2f} s wall, {prepared[1]:.2f} s CPU "
              f"({1000 * prepared[0] / TASKS:.2f} ms per task)")
        print(f"write_report, cold (images made): {coldest[0]:.2f} s wall, {coldest[1]:.2f} s CPU; "
              f"cold / prepared {coldest[0] / prepared[0]:.1f}x wall")
        print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        print(f"report.html {report / 1e3:.0f} kB ({report / TASKS:.0f} bytes per task); "
              f"task pages {page_bytes / 1e6:.1f} MB ({page_bytes / len(pages) / 1e3:.1f} kB each)")


if __name__ == "__main__":
    main()
