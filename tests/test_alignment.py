"""Judge-human alignment: hand-made labels against the verdicts of a real replay run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from conftest import write_task
from typer.testing import CliRunner

from vtb_agents.analysis.alignment import LabelsError, alignment_report, cohen_kappa, read_labels
from vtb_agents.cli.analyze import analyze_app
from vtb_agents.runner.run import RunConfig, RunError, run_suite
from vtb_agents.tasks import load_tasks

SUBJECTIVE_R3 = {"description": "Answers in a full sentence", "weight": 2, "critical": "no",
                 "objective/subjective": "subjective", "check": {"type": "contains_any", "values": ["number"]}}


def edit_task(folder: Path, golden: str, *, r1_objectivity: str = "objective", second_turn: bool = False) -> None:
    """Give a written task a golden answer (replay answers with it), a subjective r3, no trajectory."""
    data = json.loads((folder / "task.json").read_text())
    first = data["turns"][0]
    first.update(golden_answer=golden, trajectory=[])
    first["rubrics"]["r1"]["objective/subjective"] = r1_objectivity
    first["rubrics"]["r3"] = SUBJECTIVE_R3
    if second_turn:  # r1 again in turn 2 (objectivity unspecified): labels must name the turn
        data["turns"].append({"prompt": "Double it?", "images": [], "golden_answer": "84", "rubrics": {
            "r1": {"description": "Says 84", "weight": 5, "check": {"type": "number", "value": 84}}}})
    (folder / "task.json").write_text(json.dumps(data))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """Verdicts: a r1 met, r3 met | b r1 not_met, r3 not_met | c r1 not_met, r3 met | mt all met.
    r2 (no check, rule judge) is unjudged everywhere."""
    root = tmp_path_factory.mktemp("alignment-tasks")
    edit_task(write_task(root, "a"), "The number is 42.")
    edit_task(write_task(root, "b"), "It is 47.", r1_objectivity=" Objective ")
    edit_task(write_task(root, "c"), "The number is 47.")
    edit_task(write_task(root, "mt", category="Progressive Visual Reasoning"), "The number is 42.", second_turn=True)
    out = tmp_path_factory.mktemp("runs") / "run"
    run_suite(load_tasks(root), RunConfig(model="replay", tasks=str(root)), out)
    return out


def write_labels(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def lab(task: str, rubric: str, label: str, turn: int | None = None) -> dict:
    row = {"task_id": task, "rubric_id": rubric, "label": label}
    return row if turn is None else {**row, "turn": turn}


HAND_LABELS = [
    lab("a", "r1", "met"),            # objective    judge met      agree
    lab("a", "r3", "not_met"),        # subjective   judge met      disagree
    lab("a", "r2", "met"),            # unjudged: not comparable
    lab("b", "r1", "not_met"),        # objective    judge not_met  agree
    lab("b", "r3", "not_met"),        # subjective   judge not_met  agree
    lab("c", "r1", "met"),            # objective    judge not_met  disagree
    lab("c", "r3", "met"),            # subjective   judge met      agree
    lab("mt", "r1", "met", turn=2),   # unspecified  judge met      agree
    lab("mt", "r3", "met"),           # subjective   judge met      agree (r3 is unique in the task)
    lab("mt", "r1", "not_met", turn=1),  # objective judge met      disagree
]


def test_agreement_and_kappa_match_a_hand_computation(run_dir, tmp_path):
    report = alignment_report(run_dir, write_labels(tmp_path / "labels.jsonl", HAND_LABELS))
    assert report.n == 9 and report.not_comparable == {"unjudged": 1}
    assert report.agreement == pytest.approx(6 / 9)
    assert report.by_objectivity == {
        "objective": {"n": 4, "agree": 2, "agreement": 0.5},
        "subjective": {"n": 4, "agree": 3, "agreement": 0.75},
        "unspecified": {"n": 1, "agree": 1, "agreement": 1.0},
    }
    assert report.by_explicitness == {  # r1 of turn 1 is explicit; r3 and mt's turn-2 r1 say nothing
        "explicit": {"n": 4, "agree": 2, "agreement": 0.5},
        "implicit": {"n": 0, "agree": 0, "agreement": None},
        "unspecified": {"n": 5, "agree": 4, "agreement": 0.8},
    }
    assert report.confusion == {"met": {"met": 4, "not_met": 1}, "not_met": {"met": 2, "not_met": 2}}
    # human: 5 met, 4 not_met; judge: 6 met, 3 not_met -> p_e = (5*6 + 4*3) / 81, p_o = 6/9
    p_o, p_e = 6 / 9, (5 * 6 + 4 * 3) / 81
    assert report.kappa == pytest.approx((p_o - p_e) / (1 - p_e)) and report.kappa == pytest.approx(4 / 13)
    assert report.by_source == {"check": {"n": 9, "agree": 6, "agreement": pytest.approx(6 / 9)}}
    assert report.judge == "rule"
    assert [(d["task_id"], d["turn"], d["rubric_id"]) for d in report.disagreements] == [
        ("a", 1, "r3"), ("c", 1, "r1"), ("mt", 1, "r1")]
    assert report.disagreements[1]["justification"] == "expected 42 ± 0; answer has 47"
    assert json.loads(json.dumps(report.to_dict()))["kappa"] == pytest.approx(4 / 13)


def test_kappa_is_none_when_expected_agreement_is_one(run_dir, tmp_path):
    labels = write_labels(tmp_path / "labels.jsonl", [lab("a", "r1", "met"), lab("a", "r3", "met"),
                                                      lab("c", "r3", "met")])
    report = alignment_report(run_dir, labels)  # both raters said "met" to everything: kappa is 0/0
    assert report.n == 3 and report.agreement == 1.0 and report.kappa is None


def test_cohen_kappa_directly():
    assert cohen_kappa([]) is None
    assert cohen_kappa([("met", "met")] * 4) is None
    assert cohen_kappa([("met", "not_met"), ("not_met", "met")]) == -1.0
    assert cohen_kappa([("met", "met"), ("not_met", "not_met")]) == 1.0
    assert cohen_kappa([("met", "met"), ("met", "not_met")]) == 0.0  # p_o = p_e = 1/2


def test_nothing_comparable_gives_none(run_dir, tmp_path):
    report = alignment_report(run_dir, write_labels(tmp_path / "labels.jsonl", [lab("a", "r2", "met")]))
    assert report.n == 0 and report.agreement is None and report.kappa is None
    assert report.not_comparable == {"unjudged": 1}


@pytest.mark.parametrize(("row", "message"), [
    ("{oops", "line 2: not valid JSON"),
    ('["a", "r1"]', "line 2: expected a JSON object, got list"),
    ({"rubric_id": "r1", "label": "met"}, "line 2: 'task_id' must be a non-empty string"),
    (lab("a", "r1", "yes"), "line 2: 'label' must be \"met\" or \"not_met\", got 'yes'"),
    (lab("a", "r1", "met", turn=0), "line 2: 'turn' must be a positive integer"),
    ({**lab("a", "r1", "met"), "turn": "1"}, "line 2: 'turn' must be a positive integer"),
    (lab("zzz", "r1", "met"), "line 2: unknown task id 'zzz' (not in the run)"),
    (lab("a", "r9", "met"), "line 2: task 'a' has no rubric 'r9'"),
    (lab("mt", "r3", "met", turn=2), "line 2: task 'mt' has no rubric 'r3' in turn 2"),
    (lab("mt", "r1", "met"), "line 2: rubric 'r1' of task 'mt' is in turns 1, 2: give 'turn'"),
    (lab("b", "r1", "met", turn=1), "line 2: task 'b' turn 1 rubric 'r1' is labelled twice (first on line 1)"),
])
def test_bad_label_lines_name_file_and_line(run_dir, tmp_path, row, message):
    labels = write_labels(tmp_path / "labels.jsonl", [lab("b", "r1", "met"), row, ""])
    with pytest.raises(LabelsError) as caught:
        alignment_report(run_dir, labels)
    assert str(caught.value).startswith(f"{labels}: ") and message in str(caught.value)


def test_read_labels_skips_blank_lines_and_keeps_line_numbers(tmp_path):
    labels = read_labels(write_labels(tmp_path / "l.jsonl", ["", lab("a", "r1", "met", turn=1), "  "]))
    assert [(x.task_id, x.turn, x.rubric_id, x.label, x.line) for x in labels] == [("a", 1, "r1", "met", 2)]
    with pytest.raises(LabelsError, match="no such labels file"):
        read_labels(tmp_path / "missing.jsonl")


def test_tasks_can_be_given_and_must_hold_the_labelled_tasks(run_dir, tmp_path):
    labels = write_labels(tmp_path / "labels.jsonl", HAND_LABELS)
    source = json.loads((run_dir / "run.json").read_text())["config"]["tasks"]
    assert alignment_report(run_dir, labels, tasks=load_tasks(source)).n == 9
    with pytest.raises(RunError, match="not found in the task source: b, c, mt"):
        alignment_report(run_dir, labels, tasks=[t for t in load_tasks(source) if t.id == "a"])


def cli() -> typer.Typer:
    app = typer.Typer()
    app.add_typer(analyze_app, name="analyze")
    return app


def test_cli_alignment_table_and_json(run_dir, tmp_path):
    labels = write_labels(tmp_path / "labels.jsonl", HAND_LABELS)
    table = CliRunner().invoke(cli(), ["analyze", "alignment", str(run_dir), "--labels", str(labels)])
    assert table.exit_code == 0, table.output
    assert "66.7%" in table.output and "Cohen's kappa: 0.308" in table.output
    assert "not comparable (verdict not met/not_met): 1 unjudged; disagreements: 3" in table.output
    as_json = CliRunner().invoke(cli(), ["analyze", "alignment", str(run_dir), "--labels", str(labels), "--json"])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.output) == alignment_report(run_dir, labels).to_dict()


def test_cli_alignment_exit_2_on_bad_input(run_dir, tmp_path):
    runner = CliRunner()
    bad = write_labels(tmp_path / "bad.jsonl", [lab("a", "r1", "maybe")])
    result = runner.invoke(cli(), ["analyze", "alignment", str(run_dir), "--labels", str(bad)])
    assert result.exit_code == 2 and "line 1: 'label' must be" in result.output
    unknown = write_labels(tmp_path / "unknown.jsonl", [lab("nope", "r1", "met")])
    result = runner.invoke(cli(), ["analyze", "alignment", str(run_dir), "--labels", str(unknown)])
    assert result.exit_code == 2 and "unknown task id 'nope'" in result.output
    result = runner.invoke(cli(), ["analyze", "alignment", str(tmp_path / "no-run"), "--labels", str(bad)])
    assert result.exit_code == 2 and "no such run directory" in result.output
    result = runner.invoke(cli(), ["analyze", "alignment", str(run_dir), "--labels", str(tmp_path / "none.jsonl")])
    assert result.exit_code == 2 and "no such labels file" in result.output
