"""Tasks as a LangSmith dataset, through the real ``langsmith`` client and a local LangSmith stand-in."""

from __future__ import annotations

import io
import json

import pytest
import typer
from conftest import write_task
from support.langsmith_server import API_KEY, LangSmithStandIn, block_git
from PIL import Image
from typer.testing import CliRunner

import vtb_agents.tracing
from vtb_agents.cli.langsmith import langsmith_app
from vtb_agents.langsmith_dataset import dataset_examples, push_dataset, task_from_example
from vtb_agents.tasks import load_tasks
from vtb_agents.tracing import make_langsmith_client


@pytest.fixture(autouse=True)
def _no_git(monkeypatch):
    block_git(monkeypatch)


@pytest.fixture
def task_dir(tmp_path):
    """Two tasks: ``t-one`` (one PNG) and ``t-two`` (two turns; a PNG, then a JPEG in turn 2)."""
    root = tmp_path / "tasks"
    write_task(root, "t-one")
    folder = write_task(root, "t-two", domain="science")
    jpeg = io.BytesIO()
    Image.new("RGB", (64, 48), "teal").save(jpeg, format="JPEG")
    (folder / "photo.jpg").write_bytes(jpeg.getvalue())
    data = json.loads((folder / "task.json").read_text())
    data["images"].append({"file": "photo.jpg"})
    data["turns"].append({"prompt": "And the color here?", "images": [1], "golden_answer": "Teal.",
                          "rubrics": {"r1": {"description": "Says teal", "weight": 5,
                                             "check": {"type": "contains_any", "values": ["teal"]}}}})
    (folder / "task.json").write_text(json.dumps(data))
    return root


@pytest.fixture
def server():
    with LangSmithStandIn() as stand_in:
        yield stand_in
    assert stand_in.errors == []


def test_push_dataset_makes_one_example_per_task_with_image_attachments(task_dir, server):
    tasks = load_tasks(str(task_dir))
    client = make_langsmith_client(api_url=server.url, api_key=API_KEY)
    result = push_dataset(tasks, "vtb-two-tasks", client=client)
    assert result.created and sorted(result.added) == ["t-one", "t-two"]
    (dataset,) = server.datasets.values()
    assert dataset["name"] == "vtb-two-tasks" and dataset["data_type"] == "kv"
    assert str(result.dataset_id) == dataset["id"]
    examples = {e["inputs"]["task_id"]: e for e in server.examples.values()}
    assert sorted(examples) == ["t-one", "t-two"] and all(e["dataset_id"] == dataset["id"] for e in examples.values())
    for task in tasks:
        example = examples[task.id]
        assert example["inputs"]["prompts"] == [t.prompt for t in task.turns]
        assert example["outputs"] == json.loads(json.dumps(task.model_dump(mode="json")))  # the evaluator's reference
        assert example["metadata"]["category"] == task.category
        stored = {name: data for (ex, name), data in server.attachments.items() if ex == example["id"]}
        assert sorted(stored) == [f"image_{i}" for i in range(len(task.images))]
        for index, image in enumerate(task.images):
            assert stored[f"image_{index}"][1] == image.read_bytes()
    assert examples["t-two"]["inputs"]["images"] == [["image_0"], ["image_1"]]
    assert [mime for (ex, name), (mime, _) in sorted(server.attachments.items())
            if ex == examples["t-two"]["id"]] == ["image/png", "image/jpeg"]
    assert "base64" not in json.dumps([e["inputs"] for e in examples.values()])

    again = push_dataset(tasks, "vtb-two-tasks", client=client)  # idempotent
    assert not again.created and again.added == [] and sorted(again.present) == ["t-one", "t-two"]
    assert len(server.examples) == 2

    changed = [t.model_copy(update={"metadata": {"note": "edited"}}) if t.id == "t-one" else t for t in tasks]
    with pytest.raises(ValueError, match="other versions of task.*t-one"):
        push_dataset(changed, "vtb-two-tasks", client=client)

    examples = dataset_examples("vtb-two-tasks", client=client, include_attachments=True)
    pulled = {t.id: t for t in map(task_from_example, examples)}  # what `vtb langsmith eval` reads back
    for task in tasks:
        assert pulled[task.id].model_dump(mode="json") == task.model_dump(mode="json")
        assert [i.read_bytes() for i in pulled[task.id].images] == [i.read_bytes() for i in task.images]
    client.cleanup()


def test_push_dataset_command(task_dir, server, monkeypatch):
    client = make_langsmith_client(api_url=server.url, api_key=API_KEY)
    monkeypatch.setattr(vtb_agents.tracing, "_default_client", client)
    app = typer.Typer()
    app.add_typer(langsmith_app, name="langsmith")  # as `vtb langsmith`
    result = CliRunner().invoke(app, ["langsmith", "push-dataset", "--tasks", str(task_dir), "--name", "from-cli"])
    assert result.exit_code == 0, result.output
    assert "created dataset 'from-cli'" in result.output and "2 example(s) added" in result.output
    assert [d["name"] for d in server.datasets.values()] == ["from-cli"] and len(server.examples) == 2
    missing = CliRunner().invoke(app, ["langsmith", "push-dataset", "--tasks", str(task_dir / "nope"), "--name", "x"])
    assert missing.exit_code == 2 and "error" in missing.output
    client.cleanup()
