"""Judge-human alignment: compare a run's rubric verdicts with human labels (VTB_FACTS "Scoring").

The paper reports about 90% judge-human agreement, higher on objective rubrics than subjective
ones. Here: agreement overall, by rubric objectivity and explicitness, and Cohen's kappa
(chance-corrected), with the paper's figure as a reference.

Labels file: JSON lines, ``{"task_id", "turn" (1-based; optional when the rubric id is unique in the
task), "rubric_id", "label": "met" | "not_met"}``. Only met/not_met verdicts are comparable;
unjudged and error verdicts are counted apart as "not comparable".
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from vtb_agents.results import RubricVerdict
from vtb_agents.rundir.read import TaskSource, open_finished_run

LABELS = ("met", "not_met")
OBJECTIVITY = ("objective", "subjective", "unspecified")
EXPLICITNESS = ("explicit", "implicit", "unspecified")
PAPER_AGREEMENT = 0.9
"""The paper's judge-human agreement (about 90% overall), shown as a reference."""


class LabelsError(ValueError):
    """A labels file that cannot be used (names the file and line)."""


@dataclass(frozen=True)
class HumanLabel:
    """One human judgement of one rubric; ``turn`` is 1-based or None; ``line`` is where it was read."""

    task_id: str
    rubric_id: str
    label: str
    turn: int | None = None
    line: int = 0


def read_labels(path: Path | str) -> list[HumanLabel]:
    """Parse a labels file; any bad line is a :class:`LabelsError` naming file and line."""
    path = Path(path)
    if not path.is_file():
        raise LabelsError(f"{path}: no such labels file")
    labels = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not raw.strip():
            continue
        where = f"{path}: line {number}"
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise LabelsError(f"{where}: not valid JSON ({exc.msg})") from None
        if not isinstance(data, dict):
            raise LabelsError(f"{where}: expected a JSON object, got {type(data).__name__}")
        for key in ("task_id", "rubric_id"):
            if not isinstance(data.get(key), str) or not data[key]:
                raise LabelsError(f"{where}: {key!r} must be a non-empty string")
        if data.get("label") not in LABELS:
            raise LabelsError(f"{where}: 'label' must be \"met\" or \"not_met\", got {data.get('label')!r}")
        turn = data.get("turn")
        if turn is not None and (isinstance(turn, bool) or not isinstance(turn, int) or turn < 1):
            raise LabelsError(f"{where}: 'turn' must be a positive integer (turns count from 1), got {turn!r}")
        labels.append(HumanLabel(data["task_id"], data["rubric_id"], data["label"], turn, number))
    return labels


def cohen_kappa(pairs: Sequence[tuple[str, str]]) -> float | None:
    """Cohen's kappa of two raters over ``pairs``: (p_o - p_e) / (1 - p_e).

    None when undefined: no pairs, or expected agreement p_e = 1, which happens exactly when both
    raters gave one and the same label to every item (kappa would be 0/0). Computed on integer
    counts so that the degenerate case is detected exactly.
    """
    n = len(pairs)
    if n == 0:
        return None
    first, second = Counter(a for a, _ in pairs), Counter(b for _, b in pairs)
    agree = sum(a == b for a, b in pairs)
    chance = sum(first[label] * second[label] for label in first)  # p_e * n^2
    if chance == n * n:
        return None
    return (agree * n - chance) / (n * n - chance)


def _rate(agree: int, n: int) -> dict[str, Any]:
    return {"n": n, "agree": agree, "agreement": agree / n if n else None}


@dataclass
class AlignmentReport:
    """Agreement between human labels and a run's verdicts (``agreement``/``kappa`` None when n = 0)."""

    labels_file: str
    judge: str
    n: int
    agreement: float | None
    kappa: float | None
    by_objectivity: dict[str, dict[str, Any]]
    by_source: dict[str, dict[str, Any]]
    confusion: dict[str, dict[str, int]]
    not_comparable: dict[str, int] = field(default_factory=dict)
    disagreements: list[dict[str, Any]] = field(default_factory=list)
    by_explicitness: dict[str, dict[str, Any]] = field(default_factory=dict)
    paper_agreement: float = PAPER_AGREEMENT

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return asdict(self)


def _find_verdict(label: HumanLabel, verdicts: list[RubricVerdict], where: str) -> RubricVerdict:
    matches = [v for v in verdicts if v.rubric_id == label.rubric_id
               and (label.turn is None or v.turn == label.turn - 1)]
    if not matches:
        turn = f" in turn {label.turn}" if label.turn is not None else ""
        raise LabelsError(f"{where}: task {label.task_id!r} has no rubric {label.rubric_id!r}{turn}")
    if len(matches) > 1:
        turns = ", ".join(str(v.turn + 1) for v in matches)
        raise LabelsError(f"{where}: rubric {label.rubric_id!r} of task {label.task_id!r} is in turns {turns}: "
                          "give 'turn'")
    return matches[0]


def alignment_report(run_dir: Path | str, labels_path: Path | str, *,
                     tasks: TaskSource | None = None) -> AlignmentReport:
    """Compare the human labels in ``labels_path`` with the verdicts of the run in ``run_dir``."""
    finished = open_finished_run(run_dir).single_epoch("judge alignment")
    results = finished.results
    labels = read_labels(labels_path)
    verdicts = {r.task_id: r.grade.verdicts for r in results}
    for label in labels:
        if label.task_id not in verdicts:
            raise LabelsError(f"{labels_path}: line {label.line}: unknown task id {label.task_id!r} (not in the run)")
    by_id = finished.tasks(tasks, needed=sorted({label.task_id for label in labels}))
    pairs: list[tuple[str, str]] = []
    groups: dict[str, list[bool]] = defaultdict(list)
    explicitness: dict[str, list[bool]] = defaultdict(list)
    sources: dict[str, list[bool]] = defaultdict(list)
    confusion = {human: {judge: 0 for judge in LABELS} for human in LABELS}
    not_comparable: Counter[str] = Counter()
    disagreements: list[dict[str, Any]] = []
    seen: dict[tuple[str, int, str], int] = {}
    for label in labels:
        where = f"{labels_path}: line {label.line}"
        verdict = _find_verdict(label, verdicts[label.task_id], where)
        key = (label.task_id, verdict.turn, verdict.rubric_id)
        if key in seen:
            raise LabelsError(f"{where}: task {label.task_id!r} turn {verdict.turn + 1} rubric {verdict.rubric_id!r} "
                              f"is labelled twice (first on line {seen[key]})")
        seen[key] = label.line
        if verdict.status not in LABELS:
            not_comparable[verdict.status] += 1
            continue
        rubric = next((r for turn, r in by_id[label.task_id].rubrics
                       if turn == verdict.turn and r.id == verdict.rubric_id), None)
        kind = rubric.objectivity.strip().lower() if rubric else ""
        same = label.label == verdict.status
        pairs.append((label.label, verdict.status))
        groups[kind if kind in OBJECTIVITY[:2] else "unspecified"].append(same)
        stated = rubric.explicitness.strip().lower() if rubric else ""
        explicitness[stated if stated in EXPLICITNESS[:2] else "unspecified"].append(same)
        sources[verdict.judge].append(same)
        confusion[label.label][verdict.status] += 1
        if not same:
            disagreements.append({"task_id": label.task_id, "turn": verdict.turn + 1, "rubric_id": label.rubric_id,
                                  "human": label.label, "judge": verdict.status, "source": verdict.judge,
                                  "justification": verdict.justification})
    agree = sum(a == b for a, b in pairs)
    return AlignmentReport(
        labels_file=str(labels_path), judge=finished.run.config.judge,
        n=len(pairs), agreement=agree / len(pairs) if pairs else None, kappa=cohen_kappa(pairs),
        by_objectivity={k: _rate(sum(groups[k]), len(groups[k])) for k in OBJECTIVITY},
        by_source={k: _rate(sum(v), len(v)) for k, v in sorted(sources.items())},
        confusion=confusion, not_comparable=dict(sorted(not_comparable.items())), disagreements=disagreements,
        by_explicitness={k: _rate(sum(explicitness[k]), len(explicitness[k])) for k in EXPLICITNESS},
    )
