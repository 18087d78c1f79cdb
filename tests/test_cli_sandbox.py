"""vtb sandbox exec: code runs as the model's tool call would, with its images, in a real sandbox."""

from __future__ import annotations

import json

from PIL import Image
from typer.testing import CliRunner

from vtb_agents.cli import app

CROP = """from PIL import Image
import os
im = Image.open('image_1.png')
im.crop((0, 0, 40, 30)).resize((80, 60)).save('transformed_image_0.png')
print(sorted(f for f in os.listdir('.') if f.startswith('image_')), os.environ.get('VTB_SECRET'))
"""


def run(*args: str):
    return CliRunner().invoke(app, ["sandbox", "exec", *args])


def test_exec_places_images_and_reports_json(tmp_path, monkeypatch):
    monkeypatch.setenv("VTB_SECRET", "do-not-leak")
    (tmp_path / "code.py").write_text(CROP)
    Image.new("RGB", (100, 80), "red").save(tmp_path / "a.png")
    Image.new("RGB", (120, 90), "blue").save(tmp_path / "b.jpg")
    result = run("--code-file", str(tmp_path / "code.py"), "--image", str(tmp_path / "a.png"),
                 "--image", str(tmp_path / "b.jpg"), "--json", "--workdir", str(tmp_path / "wd"))
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["ok"] and payload["stdout"] == "['image_0.png', 'image_1.png'] None\n"
    assert payload["new_files"] == ["transformed_image_0.png"]
    assert payload["images"] == [{"name": "transformed_image_0.png", "size": [80, 60]}]
    assert Image.open(tmp_path / "wd" / "image_1.png").format == "PNG"  # converted like a task image
    assert payload["isolation"] in ("bwrap", "fallback", "process")
    assert payload["memory_cap"].startswith(("cgroup v", "per-process rlimits only ("))
    assert payload["syscall_filter"].startswith(("seccomp: ", "none (no system-call table"))


def test_exec_failing_code_exits_1_with_the_error(tmp_path):
    (tmp_path / "bad.py").write_text("1/0\n")
    result = run("--code-file", str(tmp_path / "bad.py"))
    assert result.exit_code == 1 and "ZeroDivisionError: division by zero" in result.output


def test_exec_timeout(tmp_path):
    (tmp_path / "loop.py").write_text("while True:\n    pass\n")
    result = run("--code-file", str(tmp_path / "loop.py"), "--timeout", "1", "--json")
    assert result.exit_code == 1
    payload = json.loads(result.output)
    assert payload["error"].startswith("timeout after 1 s") and payload["state_lost"] is True


def test_exec_bad_input(tmp_path):
    missing = run("--code-file", str(tmp_path / "nope.py"))
    assert missing.exit_code == 2 and "cannot read --code-file" in missing.output
    (tmp_path / "long.py").write_text("x = 1\n" * 2000)
    too_long = run("--code-file", str(tmp_path / "long.py"))
    assert too_long.exit_code == 2 and "at most 5,000" in too_long.output


def test_exec_on_e2b_without_a_key_says_so(tmp_path, monkeypatch):
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    (tmp_path / "code.py").write_text("print(1)\n")
    result = run("--code-file", str(tmp_path / "code.py"), "--sandbox", "e2b")
    assert result.exit_code == 2 and "E2B_API_KEY is not set" in result.output
