"""Parquet / HF import and export of VTB tasks: exact round trips and per-row errors."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image, ImageDraw

from vtb_agents.tasks.convert import export_tasks, import_tasks
from vtb_agents.tasks.errors import TaskLoadError
from vtb_agents.tasks.local import load_task_dir, task_dirs
from vtb_agents.tasks.model import Rubric, Task, TaskImage, ToolStep, Turn
from vtb_agents.tasks.parquet import SCHEMA, image_extension, iter_parquet, split_turn_markers, write_parquet

SAMPLE_DIR = Path(__file__).resolve().parents[1] / "vtb_agents" / "tasks" / "sample"

# ----------------------------------------------------------------------------- fixtures


def draw(fmt: str, color: str, size: tuple[int, int] = (64, 48)) -> bytes:
    """A small PIL-drawn image encoded as ``fmt`` (PNG or JPEG)."""
    image = Image.new("RGB", size, "white")
    pen = ImageDraw.Draw(image)
    pen.rectangle((4, 4, size[0] - 8, size[1] - 8), outline=color, width=3)
    pen.text((10, 15), fmt, fill=color)
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


PNG_A = draw("PNG", "red")
JPG_B = draw("JPEG", "blue")
PNG_C = draw("PNG", "green")

RUBRIC_1 = {
    "description": "States the total is 42.",
    "weight": 5,
    "objective/subjective": "objective",
    "explicit/implicit": "explicit",
    "category": ["visual understanding", "truthfulness"],
    "critical": "yes",
    "final_answer": "yes",
    "annotator_note": "unknown key kept",
}
RUBRIC_2 = {  # weight 2 but flagged critical, as in the public dataset
    "description": "Mentions the legend.",
    "weight": 2,
    "objective/subjective": "subjective",
    "explicit/implicit": "implicit",
    "category": ["reasoning"],
    "critical": "yes",
    "final_answer": "no",
    "extra_score": 0.5,
}
RUBRIC_3 = {
    "description": "Clear presentation.",
    "weight": 1,
    "objective/subjective": "subjective",
    "explicit/implicit": "explicit",
    "category": ["writing style / presentation"],
    "critical": "no",
    "final_answer": "no",
}
RAW_TRAJECTORY = '{"steps": [{"name": "crop", "input": "x"}], "note": "undocumented shape"}'
STEPS = [{"tool": "python_image_processing", "args": {"code": "img.crop((0, 0, 10, 10))"}},
         {"tool": "calculator", "args": {"expression": "6*7"}}]


def rubric(rid: str, body: dict[str, Any]) -> Rubric:
    return Rubric.model_validate({**body, "id": rid})


def expected_tasks() -> list[Task]:
    """The tasks that :func:`dataset_rows` encode."""
    single = Task(
        id="vtb-001", category="Region-Switch Q&A", domain="finance",
        turns=[Turn(prompt="What is the total in the chart?", images=[0], golden_answer="42",
                    trajectory=[ToolStep.model_validate(s) for s in STEPS],
                    rubrics=[rubric("r1", RUBRIC_1), rubric("r2", RUBRIC_2)])],
        images=[TaskImage(file="image_0.png", source_name="chart.png", data=PNG_A)],
        metadata={"extra_columns": {"difficulty": "hard", "annotator": 7}},
    )
    multi = Task(
        id="vtb-002", category="Temporal Visual Reasoning", domain="chemistry",
        turns=[
            Turn(prompt="Describe the flask.", images=[0], golden_answer="A round flask.",
                 rubrics=[rubric("t1", RUBRIC_3)]),
            Turn(prompt="What changed in the new photo?", images=[1], golden_answer="It turned blue.",
                 trajectory_raw=RAW_TRAJECTORY, rubrics=[rubric("t2", RUBRIC_1)]),
            Turn(prompt="Back to the first photo: what is the label?", images=[0],
                 golden_answer="NaCl", trajectory=[ToolStep(tool="python_image_processing",
                                                            args={"code": "zoom"})],
                 rubrics=[rubric("t3a", RUBRIC_2), rubric("t3b", RUBRIC_3)]),
        ],
        images=[TaskImage(file="image_0.png", source_name="flask_before.png", data=PNG_A),
                TaskImage(file="image_1.jpg", source_name="flask_after.jpg", data=JPG_B)],
    )
    return [single, multi]


def struct(data: bytes | None, path: str | None) -> dict[str, Any]:
    return {"bytes": data, "path": path}


def dataset_rows() -> list[dict[str, Any]]:
    """Rows written by hand the way the public dataset stores them (images as structs)."""
    traj = json.dumps(STEPS)
    return [
        {
            "id": "vtb-001", "turncase": "single-turn", "num_turns": 1, "prompt_category": "finance",
            "eval_focus": "Region-Switch Q&A", "turn_prompts": ["What is the total in the chart?"],
            "turn_golden_answers": ["42"], "turn_tool_trajectories": [traj],
            "rubrics_by_turn": [json.dumps({"r1": RUBRIC_1, "r2": RUBRIC_2})],
            "images": [struct(PNG_A, "chart.png")], "images_by_turn": [[struct(PNG_A, "chart.png")]],
            "num_images": 1, "difficulty": "hard", "annotator": 7,
        },
        {
            "id": "vtb-002", "turncase": "multi-turn", "num_turns": 3, "prompt_category": "chemistry",
            "eval_focus": "Temporal Visual Reasoning",
            "turn_prompts": ["Describe the flask.", "What changed in the new photo?",
                             "Back to the first photo: what is the label?"],
            "turn_golden_answers": ["A round flask.", "It turned blue.", "NaCl"],
            "turn_tool_trajectories": ["[]", RAW_TRAJECTORY,
                                       json.dumps([{"tool": "python_image_processing",
                                                    "args": {"code": "zoom"}}])],
            "rubrics_by_turn": [json.dumps({"t1": RUBRIC_3}), json.dumps({"t2": RUBRIC_1}),
                                json.dumps({"t3a": RUBRIC_2, "t3b": RUBRIC_3})],
            "images": [struct(PNG_A, "flask_before.png"), struct(JPG_B, "flask_after.jpg")],
            "images_by_turn": [[struct(PNG_A, "flask_before.png")], [struct(JPG_B, "flask_after.jpg")],
                               [struct(PNG_A, "flask_before.png")]],
            "num_images": 2, "difficulty": None, "annotator": None,
        },
    ]


IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
DATASET_SCHEMA = pa.schema([
    ("id", pa.string()), ("turncase", pa.string()), ("num_turns", pa.int64()),
    ("prompt_category", pa.string()), ("eval_focus", pa.string()),
    ("turn_prompts", pa.list_(pa.string())), ("turn_golden_answers", pa.list_(pa.string())),
    ("turn_tool_trajectories", pa.list_(pa.string())), ("rubrics_by_turn", pa.list_(pa.string())),
    ("images", pa.list_(IMAGE)), ("images_by_turn", pa.list_(pa.list_(IMAGE))), ("num_images", pa.int64()),
    ("difficulty", pa.string()), ("annotator", pa.int64()),
])


def write_rows(rows: list[dict[str, Any]], path: Path, schema: pa.Schema | None = DATASET_SCHEMA) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


def dump(task: Task) -> dict[str, Any]:
    """Everything a task carries: its JSON dump (minus provenance) and its image bytes."""
    data = task.model_dump(mode="json")
    data["metadata"].pop("source", None)
    data["image_bytes"] = [image.read_bytes() for image in task.images]
    return data


def load_all(path: Path) -> list[Task]:
    items = list(iter_parquet(path))
    errors = [i for i in items if isinstance(i, TaskLoadError)]
    assert not errors, errors
    return items  # type: ignore[return-value]


def canonical_rows(path: Path) -> list[dict[str, Any]]:
    """Parquet rows with JSON columns parsed (key order and spacing are not significant)."""
    rows = pq.read_table(path).to_pylist()
    for row in rows:
        row["rubrics_by_turn"] = [json.loads(r) for r in row["rubrics_by_turn"]]
        row["turn_tool_trajectories"] = [json.loads(t) for t in row["turn_tool_trajectories"]]
    return rows


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    return write_rows(dataset_rows(), tmp_path / "vtb" / "test-00000-of-00001.parquet")


# ----------------------------------------------------------------------------- round trips


def test_dataset_parquet_reads_as_tasks(dataset: Path) -> None:
    tasks = load_all(dataset)
    assert [dump(t) for t in tasks] == [dump(t) for t in expected_tasks()]
    single, multi = tasks
    assert single.category == "region_switch" and single.domain == "finance"
    assert multi.category == "temporal" and multi.domain == "stem" and multi.category_raw == "Temporal Visual Reasoning"
    assert [t.images for t in multi.turns] == [[0], [1], [0]]
    assert [i.file for i in multi.images] == ["image_0.png", "image_1.jpg"]
    assert multi.turns[1].trajectory == [] and multi.turns[1].trajectory_raw == RAW_TRAJECTORY
    assert multi.turns[0].trajectory == [] and multi.turns[0].trajectory_raw is None
    r2 = single.turns[0].rubrics[1]
    assert r2.weight == 2 and r2.critical and not r2.is_critical() and r2.is_critical("flag")
    assert r2.model_extra == {"extra_score": 0.5}
    assert single.metadata["source"] == str(dataset)
    assert "extra_columns" not in multi.metadata  # null extra values are omitted


def test_tasks_write_read_round_trip(tmp_path: Path) -> None:
    out = tmp_path / "out" / "tasks.parquet"
    assert write_parquet(expected_tasks(), out) == 2
    table = pq.read_table(out)
    assert table.schema.names[:len(SCHEMA)] == SCHEMA.names
    assert table.schema.field("images").type == pa.list_(IMAGE)
    assert table.schema.field("images_by_turn").type == pa.list_(pa.list_(IMAGE))
    assert table.column("difficulty").to_pylist() == ["hard", None]
    assert table.column("turncase").to_pylist() == ["single-turn", "multi-turn"]
    assert table.column("num_images").to_pylist() == [1, 2]
    assert [dump(t) for t in load_all(out)] == [dump(t) for t in expected_tasks()]
    assert not list(out.parent.glob(".*tmp"))  # temp files cleaned up


def test_dataset_import_export_round_trip_is_exact(dataset: Path, tmp_path: Path) -> None:
    report = import_tasks(iter_parquet(dataset), tmp_path / "dirs")
    assert report.written == 2 and report.errors == []
    loaded = [load_task_dir(folder) for folder in task_dirs(tmp_path / "dirs")]
    assert sorted(p.name for p in (tmp_path / "dirs" / "vtb-002").iterdir()) == [
        "image_0.png", "image_1.jpg", "task.json"]
    out = tmp_path / "export.parquet"
    assert export_tasks(loaded, out) == 2
    again = load_all(out)
    assert [dump(t) for t in again] == [dump(t) for t in expected_tasks()]
    assert again[1].images[1].read_bytes() == JPG_B
    # the exported file holds the same rows as the dataset file (JSON compared parsed)
    assert canonical_rows(out) == canonical_rows(dataset)


def test_task_metadata_survives_round_trip(tmp_path: Path) -> None:
    task = expected_tasks()[1].model_copy(update={"metadata": {"notes": "synthetic", "tags": ["a"]}})
    out = tmp_path / "meta.parquet"
    write_parquet([task], out)
    (back,) = load_all(out)
    assert dump(back) == dump(task)


def test_sharded_directory(tmp_path: Path) -> None:
    rows = dataset_rows()
    write_rows([rows[1]], tmp_path / "shards" / "b" / "part-1.parquet")
    write_rows([rows[0]], tmp_path / "shards" / "a" / "part-0.parquet")
    (tmp_path / "shards" / "README.md").write_text("not parquet")
    tasks = load_all(tmp_path / "shards")
    assert [dump(t) for t in tasks] == [dump(t) for t in expected_tasks()]
    assert tasks[0].metadata["source"].endswith("part-0.parquet")
    with pytest.raises(FileNotFoundError):
        list(iter_parquet(tmp_path / "missing"))


def test_images_by_turn_missing_and_unlisted_image(tmp_path: Path) -> None:
    rows = dataset_rows()
    no_by_turn = {**rows[1], "id": "a", "images_by_turn": None}
    unlisted = {**rows[1], "id": "b",
                "images_by_turn": [[struct(PNG_A, "x.png")], [struct(PNG_C, "new.png")], []]}
    a, b = load_all(write_rows([no_by_turn, unlisted], tmp_path / "t.parquet"))
    assert [t.images for t in a.turns] == [[0, 1], [], []]
    assert [t.images for t in b.turns] == [[0], [2], []]
    assert b.images[2].read_bytes() == PNG_C and b.images[2].source_name == "new.png"


def test_image_extension_sniffing() -> None:
    assert image_extension(PNG_A) == ".png" and image_extension(JPG_B) == ".jpg"
    assert image_extension(b"GIF89a...") == ".gif" and image_extension(b"BM....") == ".bmp"
    assert image_extension(b"RIFF\0\0\0\0WEBPVP8 ") == ".webp" and image_extension(b"???") == ".png"


# ----------------------------------------------------------------------------- older schema


OLD_SCHEMA = pa.schema([
    ("id", pa.string()), ("prompt_category", pa.string()), ("eval_focus", pa.string()),
    ("prompt", pa.string()), ("golden_answer", pa.string()), ("image", IMAGE),
    ("tool_trajectory", pa.string()), ("rubrics", pa.string()),
])


def test_old_schema_splits_turn_markers(tmp_path: Path) -> None:
    rubrics = json.dumps({"a": RUBRIC_1, "b": RUBRIC_3})
    rows = [
        {"id": "old-1", "prompt_category": "sports", "eval_focus": "Progressive Visual Reasoning",
         "prompt": "[Turn 1] Who is leading?\n[Turn 2] By how many points?\n[Turn 3] Who scored last?",
         "golden_answer": "[Turn 1] Team A [Turn 2] 3 [Turn 3] Player 9",
         "image": struct(PNG_A, "game.png"), "tool_trajectory": json.dumps(STEPS), "rubrics": rubrics},
        {"id": "old-2", "prompt_category": "medical", "eval_focus": "Follow-up Test",
         "prompt": "Context first.\n[Turn 1] What is this?\n[Turn 2] And the dose?",
         "golden_answer": "An X-ray; 5 mg.", "image": struct(JPG_B, "xray.jpg"),
         "tool_trajectory": "", "rubrics": rubrics},
        {"id": "old-3", "prompt_category": "physics", "eval_focus": "Hybrid Tool Reasoning",
         "prompt": "What is the speed? See [Turn 7] notes.", "golden_answer": "3 m/s",
         "image": None, "tool_trajectory": None, "rubrics": rubrics},
    ]
    one, two, three = load_all(write_rows(rows, tmp_path / "old.parquet", OLD_SCHEMA))
    assert [t.prompt for t in one.turns] == ["Who is leading?", "By how many points?", "Who scored last?"]
    assert [t.golden_answer for t in one.turns] == ["Team A", "3", "Player 9"]
    assert [len(t.rubrics) for t in one.turns] == [0, 0, 2]
    assert one.turns[2].trajectory[1].tool == "calculator" and one.turns[0].trajectory == []
    assert [t.images for t in one.turns] == [[0], [], []] and one.category == "progressive"
    assert [t.prompt for t in two.turns] == ["Context first.\n\nWhat is this?", "And the dose?"]
    assert [t.golden_answer for t in two.turns] == ["", "An X-ray; 5 mg."]
    assert two.images[0].file == "image_0.jpg" and two.turncase == "multi-turn"
    assert len(three.turns) == 1 and three.turns[0].prompt == rows[2]["prompt"] and three.images == []
    # old rows export to the current schema
    out = tmp_path / "new.parquet"
    write_parquet([one, two, three], out)
    assert [dump(t) for t in load_all(out)] == [dump(t) for t in (one, two, three)]


def test_old_schema_image_list(tmp_path: Path) -> None:
    schema = OLD_SCHEMA.set(OLD_SCHEMA.get_field_index("image"), pa.field("image", pa.list_(IMAGE)))
    row = {"id": "old-4", "prompt": "Compare.", "golden_answer": "Same.", "rubrics": json.dumps({"a": RUBRIC_3}),
           "image": [struct(PNG_A, "1.png"), struct(JPG_B, "2.jpg")]}
    (task,) = load_all(write_rows([row], tmp_path / "old.parquet", schema))
    assert task.turns[0].images == [0, 1] and [i.file for i in task.images] == ["image_0.png", "image_1.jpg"]


def test_split_turn_markers() -> None:
    assert split_turn_markers("[Turn 1] a [turn 2] b") == ([1, 2], ["a", "b"])
    assert split_turn_markers("no markers") == ([], ["no markers"])
    assert split_turn_markers("[Turn 2] out of order [Turn 1] x") == ([], ["[Turn 2] out of order [Turn 1] x"])


# ----------------------------------------------------------------------------- errors


def test_bad_rows_are_reported_and_others_load(tmp_path: Path) -> None:
    good, multi = dataset_rows()
    bad = [
        {**multi, "id": "len", "turn_golden_answers": ["x", "y"]},
        {**multi, "id": "num", "num_turns": 2},
        {**multi, "id": "rub", "rubrics_by_turn": [multi["rubrics_by_turn"][0], "{not json", "{}"]},
        {**multi, "id": "img", "images": [struct(None, "lost.png"), struct(JPG_B, "b.jpg")]},
        {**multi, "id": "bt", "images_by_turn": [[], [struct(None, "gone.png")], []]},
        {**multi, "id": None},
        {**multi, "id": "prm", "turn_prompts": [None, "b", "c"]},
        {**multi, "id": "wgt", "rubrics_by_turn": ["{}", json.dumps({"z": {**RUBRIC_1, "weight": "heavy"}}), "{}"]},
    ]
    path = write_rows([good, *bad, multi], tmp_path / "mixed.parquet")
    items = list(iter_parquet(path))
    assert [i.id for i in items if isinstance(i, Task)] == ["vtb-001", "vtb-002"]
    problems = {i.problem.task_id: i.problem for i in items if isinstance(i, TaskLoadError)}
    assert all(p.source == str(path) for p in problems.values())
    assert problems["len"].field == "turn_golden_answers"
    assert problems["len"].message == "has 2 entries but turn_prompts has 3"
    assert problems["num"].field == "num_turns" and "3" in problems["num"].message
    assert (problems["rub"].field, problems["rub"].turn) == ("rubrics_by_turn", 2)
    assert "unparseable rubric JSON" in problems["rub"].message
    assert (problems["img"].field, problems["img"].turn) == ("images", None)
    assert "lost.png" in problems["img"].message and "no bytes" in problems["img"].message
    assert (problems["bt"].field, problems["bt"].turn) == ("images_by_turn", 2)
    assert problems["row 7"].field == "id"
    assert (problems["prm"].field, problems["prm"].turn) == ("prompt", 1)
    assert (problems["wgt"].field, problems["wgt"].turn) == ("rubrics_by_turn", 2)
    assert "weight" in problems["wgt"].message
    assert "task 'len', field 'turn_golden_answers'" in str(items[1])


def test_unreadable_shard_is_reported(tmp_path: Path) -> None:
    write_rows(dataset_rows(), tmp_path / "d" / "a.parquet")
    (tmp_path / "d" / "b.parquet").write_bytes(b"this is not parquet")
    items = list(iter_parquet(tmp_path / "d"))
    assert [type(i) for i in items] == [Task, Task, TaskLoadError]
    assert items[2].problem.source.endswith("b.parquet")


def test_import_reports_errors_and_folder_collisions(tmp_path: Path) -> None:
    first, second = expected_tasks()
    failure = TaskLoadError("x", "num_turns", "bad")
    dup = first.model_copy()
    slash, space = (second.model_copy(update={"id": i}) for i in ("vtb/002", "vtb 002"))  # both vtb_002
    report = import_tasks([first, failure, dup, slash, space], tmp_path / "dirs")
    assert report.written == 2 and not report.ok
    assert [p.name for p in task_dirs(tmp_path / "dirs")] == ["vtb-001", "vtb_002"]
    assert report.errors[0] is failure
    assert [(e.problem.task_id, e.problem.field) for e in report.errors[1:]] == [("vtb-001", "id"), ("vtb 002", "id")]
    assert "'vtb/002'" in report.errors[2].problem.message


# ----------------------------------------------------------------------------- datasets


def test_hf_save_to_disk_round_trip(dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    from vtb_agents.tasks.hf import iter_hf

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    cache = tmp_path / "hf-cache"
    ds = datasets.Dataset.from_parquet(str(dataset), cache_dir=str(cache))
    ds.save_to_disk(str(tmp_path / "saved"))
    items = list(iter_hf(str(tmp_path / "saved")))
    assert [dump(t) for t in items] == [dump(t) for t in expected_tasks()]

    # images as a datasets Image feature, in a DatasetDict whose default split is "test"
    with_images = ds.cast_column("images", datasets.Sequence(datasets.Image()))
    with_images = with_images.cast_column("images_by_turn", datasets.Sequence(datasets.Sequence(datasets.Image())))
    other = ds.select([0])
    datasets.DatasetDict({"train": other, "test": with_images}).save_to_disk(str(tmp_path / "dict"))
    items = list(iter_hf(str(tmp_path / "dict")))
    assert [dump(t) for t in items] == [dump(t) for t in expected_tasks()]
    assert [t.id for t in iter_hf(str(tmp_path / "dict"), split="train")] == ["vtb-001"]
    with pytest.raises(ValueError, match="no split 'validation'"):
        iter_hf(str(tmp_path / "dict"), split="validation")
    # a plain local directory of parquet files also works, through the local cache only
    assert [t.id for t in iter_hf(str(dataset.parent), cache_dir=cache)] == ["vtb-001", "vtb-002"]


def test_hf_name_not_cached_fails_offline(tmp_path: Path) -> None:
    from vtb_agents.tasks.hf import iter_hf

    with pytest.raises(FileNotFoundError, match="local Hugging Face cache"):
        iter_hf("no-such-org/no-such-dataset", cache_dir=tmp_path / "empty-cache")


def test_hf_missing_package_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from vtb_agents.tasks import hf

    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(ImportError, match=r"pip install 'vtb-agents\[hf\]'"):
        hf.iter_hf("anything")


# ----------------------------------------------------------------------------- sample suite


def without_names(task: Task) -> dict[str, Any]:
    """:func:`dump` minus image file names, plus each image's display name (source or file name).

    Parquet stores one name per image (``source_name or file``) and files are renamed
    ``image_{i}{ext}`` on import, so a task folder with other file names keeps only that name.
    """
    data = dump(task)
    data["images"] = [image.source_name or image.file for image in task.images]
    return data


def test_canonical_image_names_round_trip_without_source_name(tmp_path: Path) -> None:
    task = expected_tasks()[1]
    for image in task.images:
        image.source_name = None
    write_parquet([task], tmp_path / "t.parquet")
    (back,) = load_all(tmp_path / "t.parquet")
    assert dump(back) == dump(task)


def test_sample_suite_parquet_round_trip(tmp_path: Path) -> None:
    tasks = [load_task_dir(folder) for folder in task_dirs(SAMPLE_DIR)]
    out = tmp_path / "sample.parquet"
    assert write_parquet(tasks, out) == len(tasks)
    assert [without_names(t) for t in load_all(out)] == [without_names(t) for t in tasks]
