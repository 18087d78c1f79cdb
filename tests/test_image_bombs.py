"""Images saved by model code stay within a host memory bound: oversized ones are refused as a
failed tool call that tells the model the limit, and never decoded on the host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vtb_agents.artifacts import ArtifactStore
from vtb_agents.sandbox import open_sandbox
from vtb_agents.tools.python_tools import bind_code_tools

PROJECT = Path(__file__).resolve().parents[1]
BOMBS = """
from PIL import Image
for i in range(3):
    Image.new("L", (13000, 13000), 255).save(f"transformed_image_{i}.png")
Image.new("RGB", (300, 200), "red").save("transformed_image_3.png")
print("saved")
"""
HOST = """
import json, sys
from pathlib import Path
Path("/proc/self/clear_refs").write_text("5")  # the peak RSS counts from here: not what a fork copied from pytest
from vtb_agents.artifacts import ArtifactStore
from vtb_agents.tools.python_tools import bind_code_tools
from vtb_agents.sandbox import open_sandbox

artifacts = ArtifactStore(Path(sys.argv[1]))
with open_sandbox("local") as sandbox:
    vision = bind_code_tools(sandbox, artifacts)[0]
    message = vision.invoke({"type": "tool_call", "id": "c1", "name": vision.name, "args": {"code": sys.argv[2]}})
    for image in message.artifact["images"]:  # what the model node sends: small images, encoded
        artifacts.encoded(image["ref"], 2048)
print(json.dumps({"status": message.status, "content": json.loads(message.content),
                  "images": message.artifact["images"],
                  "peak_rss_mb": next(int(line.split()[1]) for line in
                                      Path("/proc/self/status").read_text().splitlines()
                                      if line.startswith("VmHWM:")) / 1024}))
"""


@pytest.mark.slow
def test_three_13000_pixel_pngs_are_refused_and_host_memory_stays_bounded(tmp_path):
    """The host process (tool, artifact store) runs in its own process so its peak RSS is its own."""
    done = subprocess.run([sys.executable, "-c", HOST, str(tmp_path / "artifacts"), BOMBS], capture_output=True,
                          text=True, timeout=280, env={**os.environ, "PYTHONPATH": str(PROJECT)})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["status"] == "error" and report["content"]["ok"] is False
    error = report["content"]["error"]
    assert error.count("over the limit of 50,000,000 pixels") == 3
    assert "transformed_image_0.png is 13000x13000 = 169,000,000 pixels" in error and "crop or a downscaled" in error
    assert [(i["name"], i["size"]) for i in report["images"]] == [("transformed_image_3.png", [300, 200])]
    assert sorted(report["content"]["new_files"]) == [f"transformed_image_{i}.png" for i in range(3)]
    assert report["peak_rss_mb"] < 500, report["peak_rss_mb"]


def test_an_image_within_the_limit_is_still_shown(tmp_path):
    with open_sandbox("local") as sandbox:
        vision = bind_code_tools(sandbox, ArtifactStore(tmp_path))[0]
        message = vision.invoke({"type": "tool_call", "id": "c1", "name": vision.name, "args": {
            "code": "from PIL import Image\nImage.new('L', (7000, 7000)).save('transformed_image_0.png')"}})
    assert message.status == "success"
    assert message.artifact["images"][0]["size"] == [7000, 7000]
