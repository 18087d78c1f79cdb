"""Generate the bundled sample suite: small VisualToolBench-style tasks drawn with Pillow.

Usage::

    python -m vtb_agents.tasks.sample_suite [--out DIR]

Without ``--out`` it rewrites ``vtb_agents/tasks/sample/`` (the copy shipped with the package).
The output is deterministic: the same code and Pillow version give byte-identical files.

Every task covers one VTB category and domain with flat-colour scenes whose answer-bearing
details are small, faint or far apart, so that a model has to crop, zoom or enhance. Each turn
carries a golden answer, VTB-format rubrics with deterministic checks (for the ``rule`` judge),
and a reference trajectory of ``python_image_processing`` / ``calculator`` steps that really
runs (the ``replay`` agent uses it). The scenes live in :mod:`vtb_agents.tasks.sample_scenes`.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from vtb_agents.tasks.local import TASK_FILE, write_task_dir
from vtb_agents.tasks.sample_scenes import follow_up, hybrid_tool, progressive, region_switch, temporal
from vtb_agents.tasks.sample_scenes.kit import SampleTask

DEFAULT_OUT = Path(__file__).resolve().parent / "sample"

BUILDERS: tuple[Callable[[], SampleTask], ...] = (
    region_switch.rs_finance_invoice,
    region_switch.rs_sports_scoreboard,
    region_switch.rs_chemistry_bench,
    region_switch.rs_generalist_street,
    hybrid_tool.ht_engineering_circuit,
    hybrid_tool.ht_medical_dosage,
    hybrid_tool.ht_finance_stockchart,
    follow_up.fu_generalist_shelf,
    follow_up.fu_medical_labs,
    follow_up.fu_sports_roster,
    temporal.te_physics_gauge,
    temporal.te_medical_monitor,
    temporal.te_generalist_map,
    progressive.pr_maths_plot,
    progressive.pr_biology_plates,
    progressive.pr_sports_boxscore,
    progressive.pr_finance_ledger,
)


def build_suite() -> list[SampleTask]:
    """Build every sample task in memory (images as PNG bytes), sorted by task id."""
    built = [builder() for builder in BUILDERS]
    ids = [b.task.id for b in built]
    if len(set(ids)) != len(ids):
        raise ValueError(f"duplicate sample task ids: {sorted(ids)}")
    return sorted(built, key=lambda b: b.task.id)


def _check_replaceable(out: Path) -> None:
    """Refuse to delete a directory that holds anything but task folders (a mistyped ``--out``)."""
    if not out.exists():
        return
    if not out.is_dir():
        raise SystemExit(f"--out {out} exists and is not a directory")
    strangers = sorted(p.name for p in out.iterdir() if not (p.is_dir() and (p / TASK_FILE).is_file()))
    if strangers:
        raise SystemExit(f"refusing to replace {out}: it holds entries that are not task folders: "
                         f"{', '.join(strangers[:5])}")


def generate(out: Path = DEFAULT_OUT) -> list[Path]:
    """Delete ``out`` and write one folder per sample task into it; returns the folders."""
    out = Path(out)
    _check_replaceable(out)
    tasks = build_suite()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    return [write_task_dir(sample.task, out) for sample in tasks]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vtb_agents.tasks.sample_suite", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output directory (default: {DEFAULT_OUT})")
    args = parser.parse_args(argv)
    folders = generate(args.out)
    size = sum(f.stat().st_size for folder in folders for f in folder.iterdir())
    print(f"wrote {len(folders)} tasks to {args.out} ({size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
