"""``leaderboard.json``: the models of one many-model command side by side (``vtb run --model A --model B``).

Why: running the benchmark for several models is one command (:mod:`vtb_agents.runner.many`), which
writes one ordinary run directory per model under its ``--out`` (named by :func:`model_slug`) and ends
with this file beside them. Each :class:`LeaderboardRow` copies its figures from its run's
``summary.json``, never recomputes them: APR and ARS with their 95% intervals
(:mod:`vtb_agents.analysis.uncertainty`), the estimated cost and cost per passed task
(:mod:`vtb_agents.analysis.cost`; None where a price is unknown, never 0) and the outcomes. The file
carries its format version (:data:`LEADERBOARD_FORMAT`), checked by :func:`read_leaderboard` before
anything else is read, as the run files' are. docs/how-to/many-models.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from vtb_agents.rundir.errors import FormatVersionError, RunError, check_format, format_version
from vtb_agents.rundir.read import RunMeta, _problems, read_meta
from vtb_agents.rundir.store import write_json_atomic

__all__ = ["LEADERBOARD_FILE", "LEADERBOARD_FORMAT", "Leaderboard", "LeaderboardRow", "leaderboard_of",
           "model_dirs", "model_slug", "read_leaderboard", "write_leaderboard"]

LEADERBOARD_FILE = "leaderboard.json"
LEADERBOARD_FORMAT = 1
"""The format version of ``leaderboard.json`` that this vtb writes and reads (its ``format_version``)."""
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def model_slug(spec: str) -> str:
    """The run directory name of model ``spec`` in a many-model ``--out``: every run of characters
    outside ``[A-Za-z0-9._-]`` becomes one ``-`` (``openai:gpt-4o`` -> ``openai-gpt-4o``), leading
    and trailing ``-`` and ``.`` dropped. A spec with nothing left is a ValueError naming it."""
    slug = _UNSAFE.sub("-", spec).strip("-.")
    if not slug:
        raise ValueError(f"--model {spec!r}: no letter or digit to name its run directory by")
    return slug


def model_dirs(specs: Sequence[str], out: Path) -> dict[str, Path]:
    """The run directory of each model of ``specs`` under ``out`` (``out/<slug>``, :func:`model_slug`).
    A spec given twice, or two specs with the same slug, is a ValueError naming them."""
    dirs: dict[str, Path] = {}
    by_slug: dict[str, str] = {}
    for spec in specs:
        if spec in dirs:
            raise ValueError(f"--model {spec!r} is given twice")
        slug = model_slug(spec)
        if slug in by_slug:
            raise ValueError(f"--model {by_slug[slug]!r} and --model {spec!r} would share the run directory "
                             f"{out / slug} (a directory is named by the spec, its characters other than letters, "
                             "digits, '.', '_' and '-' made '-'): run them in separate commands")
        by_slug[slug] = spec
        dirs[spec] = Path(out) / slug
    return dirs


class LeaderboardRow(BaseModel):
    """One model's figures, as its run's ``summary.json`` has them (rates 0..1; None where not defined)."""

    model: str
    run_dir: str
    """The model's run directory, relative to the leaderboard's folder (its ``report.html`` is inside)."""
    tasks: int
    graded: int
    epochs: int
    complete: bool
    apr: float | None
    apr_ci95: list[float] | None
    ars: float | None
    ars_ci95: list[float] | None
    cost: float | None
    """Estimated USD of model and judge (None: a price or a usage is unknown)."""
    cost_per_pass: float | None
    """``cost`` per passed task (None: unknown, or no task passed)."""
    outcomes: dict[str, int] = Field(default_factory=dict)
    infrastructure_errors: int = 0


class Leaderboard(BaseModel):
    """``leaderboard.json``: the judge every row was graded by, and one row per model, best APR first."""

    format_version: int = LEADERBOARD_FORMAT
    """The format of this file (:data:`LEADERBOARD_FORMAT` when this vtb wrote it)."""
    judge: str
    rows: list[LeaderboardRow]


def _row(meta: RunMeta, folder: Path) -> LeaderboardRow:
    summary = meta.summary
    return LeaderboardRow(
        model=meta.run.config.model, run_dir=meta.path.relative_to(folder).as_posix(), tasks=summary.tasks,
        graded=summary.graded, epochs=summary.epochs, complete=summary.complete, apr=summary.apr,
        apr_ci95=summary.apr_ci95, ars=summary.ars, ars_ci95=summary.ars_ci95, cost=summary.cost.total,
        cost_per_pass=summary.cost.per_passed_task, outcomes=dict(summary.outcomes),
        infrastructure_errors=summary.infrastructure_errors.count)


def leaderboard_of(folder: Path, dirs: Mapping[str, Path]) -> Leaderboard:
    """The leaderboard of the finished runs ``dirs`` (model spec: run directory inside ``folder``), from
    their ``run.json`` and ``summary.json`` (:func:`~vtb_agents.rundir.read.read_meta`; a run without them
    raises its ReportError), best APR first (an APR that is not defined last)."""
    metas = [read_meta(path) for path in dirs.values()]
    rows = sorted((_row(meta, Path(folder)) for meta in metas),
                  key=lambda row: (row.apr is None, -(row.apr or 0.0), -(row.ars or 0.0), row.model))
    judges = sorted({meta.summary.judge.model or meta.run.config.judge for meta in metas})
    return Leaderboard(judge=", ".join(judges), rows=rows)


def write_leaderboard(folder: Path, board: Leaderboard) -> Path:
    """Write ``board`` to ``folder/leaderboard.json`` (atomically) and return the path."""
    path = Path(folder) / LEADERBOARD_FILE
    write_json_atomic(path, board.model_dump(mode="json"))
    return path


def read_leaderboard(path: Path) -> Leaderboard:
    """The leaderboard at ``path``: its format version checked first
    (:class:`~vtb_agents.rundir.errors.FormatVersionError`), a file that is not one a RunError naming it."""
    try:
        raw = Path(path).read_bytes()
        check_format(path, format_version(raw), LEADERBOARD_FORMAT)
        return Leaderboard.model_validate_json(raw)
    except FormatVersionError:
        raise
    except (OSError, ValidationError, ValueError) as exc:
        raise RunError(f"{path}: not a readable {LEADERBOARD_FILE}: {_problems(exc)}") from None
