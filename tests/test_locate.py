"""Crops made without Pillow are found from their pixels (docs/concepts/region-iou.md): the same box
cut with Pillow, NumPy slicing and OpenCV gets the same IoU in a real run (scripted model, real graph, real
sandbox), and an image that is no crop of the task's says "not located" instead of 0.0."""

from __future__ import annotations

import io

import cv2
import numpy as np
import pytest
from langchain_core.messages import AIMessage, BaseMessage
from PIL import Image

from vtb_agents.analysis.regions import box_iou
from vtb_agents.api import evaluate
from vtb_agents.models.replay import current_turn
from vtb_agents.models.scripted import ScriptedChatModel
from vtb_agents.sandbox.locate import TaskImageLocator
from vtb_agents.tasks import load_tasks

TASK = {t.id: t for t in load_tasks("sample")}["rs-sports-scoreboard"]
REFERENCE = (40, 30, 340, 166)  # the reference's scoreboard crop of image_0.png (1800 x 1350)
BOX = (190, 98, 490, 234)  # the model's: the scoreboard box moved by (150, 68), IoU 1/7
X0, Y0, X1, Y1 = BOX
CODE = {
    "pillow": f"from PIL import Image\nImage.open('image_0.png').crop({BOX}).save('transformed_image_0.png')",
    "numpy": ("import numpy as np\nfrom PIL import Image\na = np.asarray(Image.open('image_0.png'))\n"
              f"Image.fromarray(a[{Y0}:{Y1}, {X0}:{X1}]).save('transformed_image_0.png')"),
    "opencv": ("import cv2\nimg = cv2.imread('image_0.png')\n"
               f"zoom = cv2.resize(img[{Y0}:{Y1}, {X0}:{X1}], None, fx=3, fy=3, interpolation=cv2.INTER_CUBIC)\n"
               "cv2.imwrite('transformed_image_0.png', zoom)"),
    "noise": ("import numpy as np, cv2\nrng = np.random.default_rng(0)\n"
              "cv2.imwrite('transformed_image_0.png', rng.integers(0, 255, (120, 160, 3), dtype=np.uint8))"),
}


def script_for(code: str):
    def script(messages: list[BaseMessage]) -> AIMessage:
        _, calls = current_turn(messages)
        if calls == 0:
            return AIMessage("", tool_calls=[{"name": "python_image_processing", "args": {"code": code},
                                              "id": "call_0", "type": "tool_call"}])
        return AIMessage(TASK.turns[0].golden_answer)
    return script


@pytest.fixture(scope="module")
def turns(tmp_path_factory):
    """The first turn of a real run of the scoreboard task per way of cropping."""
    root = tmp_path_factory.mktemp("locate")
    found = {}
    for way, code in CODE.items():
        evaluation = evaluate(tasks=[TASK], model=ScriptedChatModel(script=script_for(code)), out=root / way)
        found[way] = (evaluation, evaluation.results[0].episode.turns[0])
    return found


@pytest.mark.slow
def test_the_same_box_cut_with_pillow_numpy_and_opencv_gets_the_same_iou(turns):
    expected = box_iou(BOX, REFERENCE)
    assert expected == pytest.approx(1 / 7)
    for way in ("pillow", "numpy", "opencv"):
        _, turn = turns[way]
        assert [r.box for r in turn.regions] == [BOX], way
        assert turn.best_crop_iou == pytest.approx(expected), way
        assert turn.not_located == []
    assert [r.located for r in turns["pillow"][1].regions] == [False]  # tracked in the sandbox
    assert [r.located for r in turns["numpy"][1].regions] == [True]  # found from its pixels
    assert turns["numpy"][1].tool_calls[0].images[0].region is not None


def test_an_image_that_is_no_crop_of_the_task_says_not_located(turns):
    evaluation, turn = turns["noise"]
    assert turn.regions == [] and turn.not_located == ["transformed_image_0.png"]
    assert turn.best_crop_iou is None and turn.unlocated  # not 0.0
    assert evaluation.region_iou.turns == 0 and evaluation.region_iou.not_located == 1


@pytest.mark.slow
@pytest.mark.parametrize("scale", [1, 2, 0.5])
def test_a_crop_is_located_at_its_pixels_at_any_zoom(scale):
    data = TASK.images[0].read_bytes()
    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    crop = image[Y0:Y1, X0:X1]
    if scale != 1:
        crop = cv2.resize(crop, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    hit = TaskImageLocator([("image_0.png", data)]).locate(cv2.imencode(".png", crop)[1].tobytes())
    assert hit is not None and hit.region.image == "image_0.png"
    assert box_iou(hit.region.box, BOX) >= (1.0 if scale >= 1 else 0.95)


def test_a_flat_image_is_not_located():
    flat = io.BytesIO()
    Image.new("RGB", (200, 100), "white").save(flat, "PNG")
    assert TaskImageLocator([("image_0.png", TASK.images[0].read_bytes())]).locate(flat.getvalue()) is None
