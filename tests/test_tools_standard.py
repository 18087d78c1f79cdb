"""LangChain's standard tool tests (langchain-tests) for the six tools, offline; the code tools with plain arguments.

Each tool runs as a user gets it: the code tools bound to a real local sandbox holding an image, the
calculator as exported, and the network tools against real HTTP servers on 127.0.0.1 speaking the
Open-Meteo and Tavily wire formats (``tests/support/servers.py``), once live and once replaying a cassette recorded
from those servers after they stopped. The standard tests only check the shape of a result, and the network
tools turn failures into error ToolMessages, so every integration class also checks that its example call
is answered (``test_example_call_is_answered``).
"""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests
from PIL import Image, ImageDraw
from support.servers import LocalServer, add_open_meteo, add_tavily, add_web_site

from vtb_agents.api import load_tasks, task_tools
from vtb_agents.artifacts import ArtifactStore
from vtb_agents.models.scripted import ScriptedChatModel
from vtb_agents.sandbox import open_sandbox
from vtb_agents.tools import TOOL_NAMES, bind_code_tools, calculator, python_image_processing, python_interpreter
from vtb_agents.tools.network import NetworkSettings, make_network_tools
from vtb_agents.tool_names import INTERPRETER_TOOL_NAME, VISION_TOOL_NAME
from vtb_agents.tools.python_tools import UnboundToolError

ZOOM_CODE = ("from PIL import Image\nim = Image.open('image_0.png')\n"
             "im.crop((0, 0, 40, 30)).resize((160, 120)).save('transformed_image_0.png')\nprint(im.size)")
"""The vision tool's example: crop a corner of the task image, zoom it 4x and save it."""


def task_image() -> bytes:
    """A 200x150 PNG with a red mark in the corner ZOOM_CODE crops."""
    image = Image.new("RGB", (200, 150), "white")
    ImageDraw.Draw(image).rectangle((5, 5, 30, 20), fill="red")
    data = io.BytesIO()
    image.save(data, format="PNG")
    return data.getvalue()


@dataclasses.dataclass
class Bench:
    """Live tools by name, valid example arguments for each, and a piece of text each example's answer holds."""

    tools: dict[str, BaseTool]
    examples: dict[str, dict[str, Any]]
    expected: dict[str, str]


# ---------------------------------------------------------------- the benches the standard tests run on

@pytest.fixture(scope="module")
def code_bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    """The two code tools bound to one real local sandbox whose working directory holds image_0.png."""
    with open_sandbox("local") as sandbox:
        sandbox.put_file("image_0.png", task_image())
        tools = bind_code_tools(sandbox, ArtifactStore(tmp_path_factory.mktemp("artifacts")))
        yield Bench(tools={t.name: t for t in tools},
                    examples={VISION_TOOL_NAME: {"code": ZOOM_CODE},
                              INTERPRETER_TOOL_NAME: {"code": "import numpy as np\nprint(np.arange(5).sum() * 7)"}},
                    expected={VISION_TOOL_NAME: '"new_images": ["transformed_image_0.png"]',
                              INTERPRETER_TOOL_NAME: '"stdout": "70\\n"'})


@pytest.fixture(scope="module")
def calculator_bench() -> Bench:
    return Bench(tools={"calculator": calculator}, examples={"calculator": {"expression": "2^10 + sqrt(16) * 3"}},
                 expected={"calculator": '"result": 1036.0'})


TAVILY_KEY = "tvly-standard-tests"
PARIS = {"id": 2988507, "name": "Paris", "latitude": 48.85341, "longitude": 2.3488, "country_code": "FR",
         "timezone": "Europe/Paris", "country": "France", "admin1": "Île-de-France"}
PARIS_DAY = {"temperature_2m_max": 24.1, "temperature_2m_min": 13.5, "temperature_2m_mean": 18.9,
             "precipitation_sum": 0.0, "wind_speed_10m_max": 11.2, "weather_code": 1}
HITS = [{"title": "Eiffel Tower - Wikipedia", "url": "https://en.wikipedia.org/wiki/Eiffel_Tower",
         "content": "The tower is 330 metres tall."},
        {"title": "Official site", "url": "https://www.toureiffel.paris/en", "content": "Visit the tower."}]


@contextmanager
def local_services() -> Iterator[tuple[NetworkSettings, dict[str, dict[str, Any]], dict[str, str]]]:
    """Open-Meteo, Tavily and a web site on 127.0.0.1; yields live settings for them, an example call of
    each network tool and a piece of each answer. On exit the servers stop and must have logged no error."""
    meteo, tavily, web = LocalServer(), LocalServer(), LocalServer()
    add_open_meteo(meteo, {"paris": [PARIS]}, {(48.85341, 2.3488, "2024-07-26"): PARIS_DAY})
    add_tavily(tavily, TAVILY_KEY, HITS)
    add_web_site(web)
    with meteo, tavily, web:
        settings = NetworkSettings(
            search_backend="tavily", tavily_url=tavily.url(""), tavily_api_key=TAVILY_KEY,
            geocoding_url=meteo.url("/v1/search"), archive_url=meteo.url("/v1/archive"),
            allow_private_urls=True, timeout_s=5.0, retries=0)
        yield settings, {"web_search": {"query": "eiffel tower height", "num_results": 2},
                         "browser_get_page_text": {"url": web.url("/article")},
                         "historical_weather": {"location": "Paris", "date": "2024-07-26"}}, {
            "web_search": "330 metres tall", "browser_get_page_text": "330 metres tall",
            "historical_weather": '"temperature_2m_max":24.1'}
    assert meteo.errors + tavily.errors + web.errors == []


@pytest.fixture(scope="module", params=["live", "replay"])
def network_bench(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    """The three network tools: ``live`` calls the local servers; ``replay`` records each example into a
    cassette, stops the servers and answers from the cassette."""
    with local_services() as (settings, examples, expected):
        if request.param == "live":
            yield Bench({t.name: t for t in make_network_tools(settings)}, examples, expected)
            return
        cassette = tmp_path_factory.mktemp("cassette") / "tools.jsonl"
        for tool in make_network_tools(dataclasses.replace(settings, mode="record", cache_path=cassette)):
            assert tool.invoke(call_of(tool, examples[tool.name])).status == "success"
    replay = dataclasses.replace(settings, mode="replay", cache_path=cassette)
    yield Bench({t.name: t for t in make_network_tools(replay)}, examples, expected)


def call_of(tool: BaseTool, args: dict[str, Any]) -> ToolCall:
    """A model's tool call of ``tool`` with ``args``, as a tool node passes it."""
    return ToolCall(name=tool.name, args=args, id="call-standard", type="tool_call")


# ---------------------------------------------------------------- the standard test classes

class StandardCase:
    """Hands langchain-tests the live tool ``tool_name`` of the class's ``bench`` fixture and its example."""

    tool_name: ClassVar[str]

    @pytest.fixture(autouse=True)
    def _take_tool(self, bench: Bench) -> None:
        self._bench = bench

    @property
    def tool_constructor(self) -> BaseTool:
        return self._bench.tools[self.tool_name]

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return self._bench.examples[self.tool_name]


class AnsweredCase(StandardCase):
    """The integration classes' own check: the example is answered, not turned into an error message."""

    def test_example_call_is_answered(self, tool: BaseTool) -> None:
        message = tool.invoke(call_of(tool, self.tool_invoke_params_example))
        assert isinstance(message, ToolMessage) and message.status == "success", message.content
        assert self._bench.expected[self.tool_name] in message.content
        if tool.response_format == "content_and_artifact":
            assert message.artifact["ok"] is True


class CodeCase:
    """The code tools' bench: one module-wide local sandbox."""

    @pytest.fixture
    def bench(self, code_bench: Bench) -> Bench:
        return code_bench


class CalculatorCase:
    """The calculator's bench: the exported tool."""

    @pytest.fixture
    def bench(self, calculator_bench: Bench) -> Bench:
        return calculator_bench


class NetworkCase:
    """The network tools' bench: local servers, live and replayed."""

    @pytest.fixture
    def bench(self, network_bench: Bench) -> Bench:
        return network_bench


def standard_classes(bench: type, tool_name: str) -> tuple[type, type]:
    """The ToolsUnitTests and ToolsIntegrationTests classes of ``tool_name`` on a bench."""
    attrs = {"tool_name": tool_name, "__module__": __name__}
    return (type(f"{tool_name}_unit", (bench, StandardCase, ToolsUnitTests), attrs),
            type(f"{tool_name}_integration", (bench, AnsweredCase, ToolsIntegrationTests), attrs))


TestVisionToolUnit, TestVisionToolIntegration = standard_classes(CodeCase, VISION_TOOL_NAME)
TestInterpreterUnit, TestInterpreterIntegration = standard_classes(CodeCase, INTERPRETER_TOOL_NAME)
TestCalculatorUnit, TestCalculatorIntegration = standard_classes(CalculatorCase, "calculator")
TestWebSearchUnit, TestWebSearchIntegration = standard_classes(NetworkCase, "web_search")
TestPageTextUnit, TestPageTextIntegration = standard_classes(NetworkCase, "browser_get_page_text")
TestWeatherUnit, TestWeatherIntegration = standard_classes(NetworkCase, "historical_weather")


# ---------------------------------------------------------------- plain arguments, unbound tools, a user's agent

def test_bound_code_tools_take_plain_arguments(tmp_path: Path) -> None:
    artifacts = ArtifactStore(tmp_path / "artifacts")
    with open_sandbox("local") as sandbox:
        sandbox.put_file("image_0.png", task_image())
        vision, interpreter = bind_code_tools(sandbox, artifacts)
        text = vision.invoke({"code": ZOOM_CODE})
        zoomed = sandbox.get_file("transformed_image_0.png")
        read_back = interpreter.invoke({"code": "print(Image.open('transformed_image_0.png').size, im.size)"})
    assert isinstance(text, str)
    assert json.loads(text) == {"ok": True, "stdout": "(200, 150)\n", "new_images": ["transformed_image_0.png"],
                                "note_images": "the new images are shown to you after this round's tool results"}
    stored = [path.read_bytes() for path in artifacts.root.rglob("*") if path.is_file()]
    assert stored == [zoomed] and Image.open(io.BytesIO(zoomed)).size == (160, 120)
    assert json.loads(read_back) == {"ok": True, "stdout": "(160, 120) (200, 150)\n"}  # shared files and variables


@pytest.mark.parametrize("tool", [python_image_processing, python_interpreter], ids=lambda t: t.name)
def test_unbound_code_tools_say_what_is_missing(tool: BaseTool) -> None:
    for given in ({"code": "print(1)"}, call_of(tool, {"code": "print(1)"})):
        with pytest.raises(UnboundToolError,
                           match=rf"^{tool.name} has no sandbox to run in: use the tools of "
                                 r"`with vtb_agents.task_tools\(task\) as tools:` or `bind_code_tools"):
            tool.invoke(given)


def test_create_agent_runs_on_a_tasks_tools_in_five_lines(task_root: Path) -> None:
    """The issue's first try: a task's tools in a ``with`` block, straight into ``create_agent``."""
    zoom = ("from PIL import Image\nim = Image.open('image_0.png')\n"
            "im.crop((340, 260, 400, 300)).resize((240, 160)).save('transformed_image_0.png')\nprint('zoomed')")
    model = ScriptedChatModel(replies=[
        AIMessage("", tool_calls=[{"name": VISION_TOOL_NAME, "args": {"code": zoom}, "id": "call-1"}]),
        AIMessage("The number is 42.")])
    (task,) = load_tasks(task_root)
    with task_tools(task) as tools:
        agent = create_agent(model, tools)
        result = agent.invoke({"messages": [("user", task.turns[0].prompt)]})
    assert [t.name for t in model.bound_tools] == list(TOOL_NAMES)
    tool_message = result["messages"][2]
    assert isinstance(tool_message, ToolMessage) and tool_message.status == "success"
    assert json.loads(tool_message.content)["new_images"] == ["transformed_image_0.png"]
    (image,) = tool_message.artifact["images"]
    assert image["name"] == "transformed_image_0.png" and image["size"] == [240, 160]
    assert result["messages"][-1].content == "The number is 42." and len(model.calls) == 2
