"""Each class of bad task data gives a specific problem naming task, turn, field and file."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image
from typer.testing import CliRunner

from conftest import write_task
from vtb_agents.cli import app
from vtb_agents.tasks.validate import validate_source


def edit(folder: Path, change) -> None:
    data = json.loads((folder / "task.json").read_text())
    change(data)
    (folder / "task.json").write_text(json.dumps(data))


def problems_of(root: Path, **kwargs) -> list[str]:
    return [str(p) for p in validate_source(root, **kwargs)]


def only(problems: list[str], severity: str = "error") -> str:
    found = [p for p in problems if p.startswith(severity)]
    assert len(found) == 1, problems
    return found[0]


def test_valid_task_has_no_problems(task_root):
    assert validate_source(task_root) == []


def test_missing_image(task_root):
    (task_root / "t-corner" / "image_0.png").unlink()
    message = only(problems_of(task_root))
    assert "task 't-corner'" in message and "field 'images[0] (image_0.png)'" in message
    assert "missing or unreadable image file" in message and "t-corner" in message


def test_unreadable_image(task_root):
    (task_root / "t-corner" / "image_0.png").write_bytes(b"\x89PNG\r\n\x1a\nnot really a png")
    assert "cannot decode image" in only(problems_of(task_root))


def test_truncated_image(task_root):
    path = task_root / "t-corner" / "image_0.png"
    path.write_bytes(path.read_bytes()[:200])
    assert "cannot decode image" in only(problems_of(task_root))


def test_decompression_bomb(task_root):
    Image.new("1", (12_000, 12_000)).save(task_root / "t-corner" / "image_0.png")
    message = only(problems_of(task_root))
    assert "12000x12000 = 144,000,000 pixels, over the limit of 50,000,000" in message
    assert "decompression bomb" in message
    assert validate_source(task_root, max_pixels=200_000_000) == []


def test_weight_outside_range(task_root):
    edit(task_root / "t-corner", lambda d: d["turns"][0]["rubrics"]["r1"].update(weight=7))
    message = only(problems_of(task_root))
    assert "turn 1, field 'rubrics.r1.weight': weight 7 is outside 1..5" in message


def test_weight_of_wrong_type_names_the_field(task_root):
    edit(task_root / "t-corner", lambda d: d["turns"][0]["rubrics"]["r1"].update(weight="heavy"))
    message = only(problems_of(task_root))
    assert "task 't-corner', turn 1" in message and "weight" in message and "task.json" in message


def test_duplicate_task_ids(tmp_path):
    write_task(tmp_path, "a", id="same")
    write_task(tmp_path, "b", id="same")
    message = only(problems_of(tmp_path))
    assert "task 'same', field 'id': duplicate task id (also in" in message and str(tmp_path / "a") in message


def test_task_without_rubrics(task_root):
    edit(task_root / "t-corner", lambda d: d["turns"][0].update(rubrics={}))
    assert "field 'rubrics': task has no rubrics" in only(problems_of(task_root))


def test_turn_lists_of_different_lengths_in_parquet(tmp_path):
    image = {"bytes": (Path(write_task(tmp_path, "src")) / "image_0.png").read_bytes(), "path": "a.png"}
    rubric = json.dumps({"r1": {"description": "d", "weight": 5, "critical": "yes"}})
    row = {"id": "vtb-7", "turncase": "multi-turn", "num_turns": 3, "prompt_category": "finance",
           "eval_focus": "Progressive Visual Reasoning", "turn_prompts": ["a", "b", "c"],
           "turn_golden_answers": ["x", "y"], "turn_tool_trajectories": ["[]", "[]", "[]"],
           "rubrics_by_turn": [rubric, rubric, rubric], "images": [image], "images_by_turn": [[image], [], []],
           "num_images": 1}
    good = {**row, "id": "vtb-8", "turn_golden_answers": ["x", "y", "z"]}
    pq.write_table(pa.Table.from_pylist([row, good]), tmp_path / "vtb.parquet")
    problems = problems_of(tmp_path / "vtb.parquet")
    message = only(problems)
    assert "task 'vtb-7'" in message and "turn_golden_answers" in message
    assert "has 2 entries but turn_prompts has 3" in message and "vtb.parquet" in message


def test_warnings_unknown_category_no_critical_and_flag_disagreement(task_root):
    def change(d):
        d["category"] = "Mystery Category"
        d["turns"][0]["rubrics"]["r1"].update(weight=2, critical="yes")
    edit(task_root / "t-corner", change)
    problems = problems_of(task_root)
    assert not [p for p in problems if p.startswith("error")]
    text = "\n".join(problems)
    assert "field 'category': unknown category 'Mystery Category' (kept as 'mystery_category')" in text
    assert "field 'rubrics': task has no critical rubric" in text
    assert "field 'rubrics.r1.critical': critical flag yes disagrees with the weight rule (weight 2" in text


def test_cli_validate_exits_non_zero_and_names_the_problem(task_root):
    runner = CliRunner()
    ok = runner.invoke(app, ["tasks", "validate", str(task_root)])
    assert ok.exit_code == 0 and "0 error(s), 0 warning(s)" in ok.output
    (task_root / "t-corner" / "image_0.png").unlink()
    bad = runner.invoke(app, ["tasks", "validate", str(task_root), "--json"])
    assert bad.exit_code == 1
    problem = json.loads(bad.output.strip().splitlines()[0])
    assert problem["task_id"] == "t-corner" and problem["field"] == "images[0] (image_0.png)"


def test_cli_validate_bad_source(tmp_path):
    result = CliRunner().invoke(app, ["tasks", "validate", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "no such file or folder" in result.output
