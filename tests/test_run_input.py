"""What `vtb run` accepts as input, through the real `vtb` command against a local OpenAI-compatible
server that records every request: invalid tasks (an image bomb, a U+202E id, an untouched scaffold)
refuse the run before any request or are skipped with --skip-invalid, --status picks reviewed tasks,
zoomed views keep one name per image across turns, and `tasks filter` / `compare` judge their inputs
right."""

from __future__ import annotations

import json
import re
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from PIL import Image

from conftest import write_task
from support.openai_server import OpenAIServer
from support.cli import openai_env
from support.together import together
from test_presets import vtb

ANSWER = "The number is 42."
EVIL_ID = "invoice\u202eexe.txt"


def answer(body: dict[str, Any]) -> str:
    """A model that answers every task of :func:`write_task` correctly."""
    return ANSWER




def bad_suite(root: Path) -> Path:
    """Two valid tasks, one whose image is a decompression bomb (81 Mpx, 28 kB of PNG) and one whose id
    holds a right-to-left override."""
    write_task(root, "t-ok")
    write_task(root, "t-ok-2")
    bomb = write_task(root, "t-bomb")
    Image.new("1", (9000, 9000), 1).save(bomb / "image_0.png")
    write_task(root, "t-evil", id=EVIL_ID)
    return root


def task_ids(run_dir: Path) -> list[str]:
    return [json.loads(line)["task_id"] for line in (run_dir / "results.jsonl").read_text().splitlines()]


def test_run_refuses_an_image_bomb_and_a_bidi_id_before_any_request(tmp_path):
    source = bad_suite(tmp_path / "tasks")
    with OpenAIServer(answer) as server:
        done = vtb("run", "--tasks", str(source), "--model", "openai:m", "--out", str(tmp_path / "run"),
                   env=openai_env(server.base_url))
    assert done.returncode == 2, done.stderr
    assert server.requests == [] and not (tmp_path / "run").exists()
    stderr = " ".join(done.stderr.split())
    assert ("task 't-bomb', field 'images[0] (image_0.png)': image is 9000x9000 = 81,000,000 pixels, over the "
            "limit of 50,000,000 (possible decompression bomb)") in stderr
    assert ("task 'invoice\\u202eexe.txt', field 'id': task id holds control, bidirectional or invisible "
            "character(s): U+202E RIGHT-TO-LEFT OVERRIDE") in stderr
    assert "2 task(s) fail validation, nothing was run" in stderr and "--skip-invalid" in stderr
    assert "\u202e" not in done.stderr  # the override is shown escaped, never acted on by the terminal
    assert "t-ok" not in stderr


@pytest.mark.slow
def test_skip_invalid_runs_the_rest_lists_the_skipped_and_resume_continues(tmp_path):
    source, out = bad_suite(tmp_path / "tasks"), tmp_path / "run"
    with OpenAIServer(answer) as server:
        done = vtb("run", "--tasks", str(source), "--model", "openai:m", "--out", str(out), "--skip-invalid",
                   "--limit", "3", env=openai_env(server.base_url))
        assert done.returncode == 0, done.stderr
        assert "skipped 2 invalid task(s): 't-bomb', 'invoice\\u202eexe.txt'" in " ".join(done.stderr.split())
        assert task_ids(out) == ["t-ok"] and len(server.requests) == 1  # --limit 3: t-bomb, t-evil, t-ok
        again = vtb("run", "--tasks", str(source), "--model", "openai:m", "--out", str(out), "--skip-invalid",
                    "--resume", env=openai_env(server.base_url))
    assert again.returncode == 0, again.stderr
    assert "skipped 2 invalid task(s)" in again.stderr and "t-ok-2" not in again.stderr
    assert sorted(task_ids(out)) == ["t-ok", "t-ok-2"] and len(server.requests) == 2  # t-ok was not run again
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tasks"] == 2 and summary["apr"] == 1.0


def test_a_control_character_in_an_image_file_name_is_refused(tmp_path):
    folder = write_task(tmp_path / "tasks", "t-tab", images=[{"file": "image\u200b_0.png"}])
    (folder / "image\u200b_0.png").write_bytes((folder / "image_0.png").read_bytes())
    done = vtb("tasks", "validate", str(tmp_path / "tasks"))
    assert done.returncode == 1
    assert ("field 'images[0].file': image file name holds control, bidirectional or invisible character(s): "
            "U+200B ZERO WIDTH SPACE") in " ".join(done.stderr.split())


def test_invisible_characters_names_each_offender_once():
    from vtb_agents.tasks.validate import invisible_characters

    assert invisible_characters("plain id-1 with spaces") == []
    assert invisible_characters("a\tb\u202ec\u202ed\u00a0e\u2028") == [
        "U+0009 Cc", "U+202E RIGHT-TO-LEFT OVERRIDE", "U+00A0 NO-BREAK SPACE", "U+2028 LINE SEPARATOR"]
    assert invisible_characters("café-日本") == []


def scaffold(root: Path, task_id: str, image: Path) -> Path:
    done = vtb("tasks", "new", task_id, "--category", "region_switch", "--domain", "finance", "--image", str(image),
               "--root", str(root))
    assert done.returncode == 0, done.stderr
    return root / task_id


def finish(folder: Path, status: str) -> None:
    """Fill in a scaffold as an author would, and set its review status."""
    data = json.loads((folder / "task.json").read_text())
    turn = data["turns"][0]
    turn.update(prompt="What number is printed in the bottom-right corner?", golden_answer=ANSWER)
    for rubric in turn["rubrics"].values():
        rubric["description"] = "Says 42"
    turn["rubrics"]["t1-answer"]["check"] = {"type": "number", "value": 42}
    data["review"]["status"] = status
    (folder / "task.json").write_text(json.dumps(data))


@pytest.mark.slow
def test_untouched_scaffold_refuses_the_run_and_status_picks_reviewed_tasks(tmp_path):
    image = tmp_path / "corner.png"
    Image.new("RGB", (64, 48), "white").save(image)
    root = tmp_path / "suite"
    statuses = {"done": "accepted", "checked": "reviewed", "wip": "draft"}
    together(*(partial(scaffold, root, task_id, image) for task_id in ["draft-untouched", *statuses]))
    for task_id, status in statuses.items():
        finish(root / task_id, status)
    write_task(root, "legacy")  # no review block: no status
    with OpenAIServer(answer) as server:
        refused, bad, none = together(  # three refused runs side by side (the last two have no server)
            lambda: vtb("run", "--tasks", str(root), "--model", "openai:m", "--out", str(tmp_path / "all"),
                        env=openai_env(server.base_url)),
            lambda: vtb("run", "--tasks", str(root), "--status", "final", "--out", str(tmp_path / "bad")),
            lambda: vtb("run", "--tasks", "sample", "--status", "accepted", "--out", str(tmp_path / "none")))
        assert refused.returncode == 2 and server.requests == []
        stderr = " ".join(refused.stderr.split())
        assert "task 'draft-untouched', turn 1, field 'prompt': still TODO" in stderr
        assert "field 'rubrics.t1-answer.description': still TODO" in stderr
        assert "1 task(s) fail validation" in stderr
        accepted = vtb("run", "--tasks", str(root), "--model", "openai:m", "--out", str(tmp_path / "accepted"),
                       "--status", "accepted", env=openai_env(server.base_url))
        assert accepted.returncode == 0, accepted.stderr
        assert task_ids(tmp_path / "accepted") == ["done"] and len(server.requests) == 1
        reviewed = vtb("run", "--tasks", str(root), "--model", "openai:m", "--out", str(tmp_path / "reviewed"),
                       "--status", "reviewed", "--status", "accepted", env=openai_env(server.base_url))
        assert reviewed.returncode == 0, reviewed.stderr
        assert sorted(task_ids(tmp_path / "reviewed")) == ["checked", "done"]
        assert bad.returncode == 2 and "--status must be one of draft, reviewed, accepted" in bad.stderr
        assert none.returncode == 2 and "tasks without a review block have none" in " ".join(none.stderr.split())


def two_turn_task(root: Path) -> Path:
    """A follow-up task: turn 1 shows image_0, turn 2 image_1 (different pictures)."""
    turn = json.loads((write_task(root, "t-two").joinpath("task.json")).read_text())["turns"][0]
    folder = write_task(root, "t-two", category="Follow-up Test", images=[{"file": "image_0.png"},
                                                                          {"file": "image_1.png"}],
                        turns=[{**turn, "images": [0]}, {**turn, "images": [1], "prompt": "And in this one?"}])
    Image.new("RGB", (400, 300), "darkgreen").save(folder / "image_1.png")
    return folder


def zoom_model(body: dict[str, Any]) -> str:
    """Proposes one region of the turn's image (a different box per image), is then confident, answers.
    Reads the request's last message only: zoom keeps its earlier requests in the conversation."""
    text = json.dumps(body["messages"][-1])
    if "Propose up to 4 regions" in text:
        source = re.search(r"Sources are the images: (image_\d\.png)", text)
        assert source is not None
        box = [0, 0, 0.5, 0.5] if source.group(1) == "image_0.png" else [0.5, 0.5, 1, 1]
        return json.dumps({"regions": [{"source": source.group(1), "box": box, "confidence": 0.9}]})
    if "For the zoomed views just shown" in text:
        return '{"regions": []}'
    return ANSWER


def shown_images(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(caption name, image data URL) of every image a request shows under a caption."""
    pairs = []
    for message in body["messages"]:
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        for caption, image in zip(blocks, blocks[1:]):
            if caption.get("type") == "text" and image.get("type") == "image_url":
                pairs.append((caption["text"].split(" ")[0], image["image_url"]["url"]))
    return pairs


@pytest.mark.slow
def test_zoom_views_keep_one_name_per_image_across_turns(tmp_path):
    two_turn_task(tmp_path / "tasks")
    with OpenAIServer(zoom_model) as server:
        done = vtb("run", "--tasks", str(tmp_path / "tasks"), "--model", "openai:m", "--strategy", "zoom",
                   "--out", str(tmp_path / "run"), env=openai_env(server.base_url))
    assert done.returncode == 0, done.stderr
    last = shown_images(server.requests[-1])  # turn 2's answer: the whole conversation
    views = [name for name, _ in last if name.startswith("zoom")]
    assert len(views) == 2 and len(set(views)) == 2, views  # turn 1's view and turn 2's, each its own name
    by_name: dict[str, set[str]] = {}
    for body in server.requests:
        for name, url in shown_images(body):
            by_name.setdefault(name, set()).add(url)
    assert all(len(urls) == 1 for urls in by_name.values()), {n: len(u) for n, u in by_name.items()}




@pytest.mark.slow
def test_tasks_filter_takes_one_source_however_it_is_spelled(tmp_path):
    for task_id in ("t-a", "t-b"):
        write_task(tmp_path / "ho_tasks", task_id)
    (tmp_path / "other").mkdir()
    write_task(tmp_path / "other", "t-a")
    with OpenAIServer(lambda body: "I cannot tell from the image.") as server:  # three runs side by side
        *runs, different = together(
            *(partial(vtb, "run", "--tasks", spec, "--model", "openai:m", "--out", name, cwd=tmp_path,
                      env=openai_env(server.base_url))
              for name, spec in (("run-1", "ho_tasks"), ("run-2", "./ho_tasks"))),
            lambda: vtb("run", "--tasks", "other", "--out", "run-3", cwd=tmp_path))
    for done in runs:
        assert done.returncode == 0, done.stderr
    assert different.returncode == 0, different.stderr
    assert [json.loads((tmp_path / n / "run.json").read_text())["config"]["tasks"] for n in ("run-1", "run-2")] == \
        ["ho_tasks", "./ho_tasks"]
    done, mixed = together(
        lambda: vtb("tasks", "filter", "--runs", "run-1", "run-2", "--min-fail", "2", "--out", "hard", cwd=tmp_path),
        lambda: vtb("tasks", "filter", "--runs", "run-1", "run-3", "--out", "hard-2", cwd=tmp_path))
    assert done.returncode == 0, done.stderr
    assert "kept 2 of 2 task(s)" in " ".join(done.stdout.split())
    assert sorted(p.name for p in (tmp_path / "hard").iterdir()) == ["t-a", "t-b"]
    assert mixed.returncode == 2 and "different task sources (./ho_tasks, other)" not in mixed.stderr
    assert "the runs used different task sources (ho_tasks, other): give --tasks" in " ".join(mixed.stderr.split())


@pytest.mark.slow
def test_compare_warns_when_runs_cover_different_task_sets(tmp_path):
    for task_id in ("t-a", "t-b", "t-c"):
        write_task(tmp_path / "tasks", task_id)
    chosen = {"left": ("t-a", "t-b"), "right": ("t-b", "t-c"), "same": ("t-a", "t-b")}
    for done in together(*(partial(vtb, "run", "--tasks", str(tmp_path / "tasks"),  # side by side
                                   *[arg for task_id in ids for arg in ("--task-id", task_id)],
                                   "--out", str(tmp_path / name)) for name, ids in chosen.items())):
        assert done.returncode == 0, done.stderr
    done, same = together(
        lambda: vtb("compare", str(tmp_path / "left"), str(tmp_path / "right"), "--out", str(tmp_path / "cmp.html")),
        lambda: vtb("compare", str(tmp_path / "left"), str(tmp_path / "same")))
    assert done.returncode == 0, done.stderr
    warning = ("the runs cover different task sets: each run's scores are over its own tasks, not over the same "
               "ones; 1 task(s) are in every run. Tasks not in every run: left has 1: t-a; right has 1: t-c")
    assert warning in " ".join(done.stderr.split())
    assert warning.replace("'", "&#x27;") in (tmp_path / "cmp.html").read_text()
    assert same.returncode == 0 and "warning" not in same.stderr
