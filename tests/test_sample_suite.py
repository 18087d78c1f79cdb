"""The bundled sample suite: structure, rubric checks, runnable reference trajectories, the network
tools' authored cassette, determinism."""

from __future__ import annotations

import ast
import json
import math
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from support.cli import checkout_env
from support.together import together
import simpleeval
from PIL import Image

from vtb_agents.tasks.local import TASK_FILE, load_task_dir, task_dirs
from vtb_agents.tasks.model import Check, Rubric, Task, ToolStep, Turn
from vtb_agents.tasks.normalize import CATEGORIES, DOMAINS, SINGLE_TURN_CATEGORIES
from vtb_agents.tasks.sources import SAMPLE_CASSETTE, SAMPLE_DIR
from vtb_agents.tools.network import NetworkSettings, cache_key, compact_cassette, make_network_tools
from vtb_agents.tools.network.cache import HEADER, ToolCache, read_entries

GENERATOR = Path(__file__).resolve().parents[1] / "scripts" / "sample_suite.py"
sys.path.insert(0, str(GENERATOR.parent))  # the generator is a development script outside the package
from sample_scenes.kit import SampleTask  # noqa: E402
from sample_suite import (  # noqa: E402
    CASSETTE_FILE, DEFAULT_OUT, MANAGED_FILES, NETWORK_TOOLS, build_suite, generate, network_steps,
)

try:  # the project's rule judge and calculator, when present: the suite must behave the same there
    from vtb_agents.judges.checks import run_check
except ImportError:  # pragma: no cover
    run_check = None
try:
    from vtb_agents.tools.calculator import evaluate as project_calculator
except ImportError:  # pragma: no cover
    project_calculator = None

RAW_DOMAINS = {"chemistry", "maths", "biology", "engineering", "physics", "medical", "finance", "sports", "generalist"}
RUBRIC_CATEGORIES = {"visual understanding", "truthfulness", "instruction following", "reasoning",
                     "writing style / presentation"}
VTB_RUBRIC_KEYS = {"description", "weight", "objective/subjective", "explicit/implicit", "category", "critical",
                   "final_answer"}
TOOLS = {"python_image_processing", "python_interpreter", "calculator", "web_search", "browser_get_page_text",
         "historical_weather"}
NETWORK_ARGS = {"web_search": {"query", "num_results"}, "browser_get_page_text": {"url"},
                "historical_weather": {"location", "date"}}
MAX_STEPS_PER_TURN = 4  # the paper: reference solutions use fewer than 5 calls
MAX_SUITE_BYTES = 4 * 1024 * 1024
OUTPUT_NAME = re.compile(r"transformed_image_(\d+)\.png")
PIL_CROP = re.compile(r"\.crop\(\((\d+), (\d+), (\d+), (\d+)\)\)")
CV_CROP = re.compile(r"\[(\d+):(\d+), (\d+):(\d+)\]")


# --- the check semantics documented on model.Check ---------------------------------------------

NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


def numbers_in(text: str) -> list[tuple[float, int]]:
    """Every number in ``text`` (ints/decimals, optional sign, thousands separators) and its decimals."""
    found = []
    for match in NUMBER.finditer(text):
        token = match.group().replace(",", "")
        decimals = len(token.split(".")[1]) if "." in token else 0
        found.append((float(token), decimals))
    return found


def check_passes(check: Check, answer: str, *, regex_ignore_case: bool = False) -> bool:
    if check.type in {"contains_any", "contains_all", "not_contains"}:
        hay = answer if check.case_sensitive else answer.lower()
        hits = [(v if check.case_sensitive else v.lower()) in hay for v in check.values]
        return {"contains_any": any, "contains_all": all}.get(check.type, lambda h: not any(h))(hits)
    if check.type == "number":
        return any(abs(n - check.value) <= check.tolerance + 1e-9 for n, _ in numbers_in(answer))
    flags = re.IGNORECASE if regex_ignore_case and not check.case_sensitive else 0
    return re.search(check.pattern, answer, flags) is not None


def golden_meets(check: Check, answer: str) -> bool:
    """Met under the strictest reading (case-sensitive regex) and by the project's rule judge."""
    return check_passes(check, answer) and (run_check is None or run_check(check, answer)[0])


def wrong_fails(check: Check, answer: str) -> bool:
    """Not met under the loosest reading (case-insensitive regex) nor by the project's rule judge."""
    loose = check_passes(check, answer) or check_passes(check, answer, regex_ignore_case=True)
    return not loose and (run_check is None or not run_check(check, answer)[0])


def test_check_evaluator_semantics() -> None:
    assert numbers_in("Total $1,286.82, tax -3.5 and 12") == [(1286.82, 2), (-3.5, 1), (12.0, 0)]
    assert check_passes(Check(type="number", value=1286.82, tolerance=0.005), "due: 1,286.82")
    assert not check_passes(Check(type="not_contains", values=["7.49"]), "It is $7.49?")
    assert check_passes(Check(type="contains_any", values=["HCl"]), "hcl 0.25 M")
    assert not check_passes(Check(type="contains_any", values=["HCl"], case_sensitive=True), "hcl 0.25 M")


# --- calculator as the tool documents it (^ is power) -------------------------------------------

def calculator(expression: str) -> float:
    operators = dict(simpleeval.DEFAULT_OPERATORS)
    operators[ast.BitXor] = simpleeval.safe_power
    functions = {"sqrt": math.sqrt, "sin": math.sin, "cos": math.cos, "tan": math.tan, "log": math.log,
                 "exp": math.exp}
    return float(simpleeval.SimpleEval(operators=operators, functions=functions).eval(expression))


# --- fixtures -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    return [load_task_dir(folder) for folder in task_dirs(SAMPLE_DIR)]


@pytest.fixture(scope="module")
def built() -> dict[str, SampleTask]:
    return {sample.task.id: sample for sample in build_suite()}


def _all_rubrics(tasks: list[Task]) -> list[tuple[Task, int, Rubric]]:
    return [(task, t, rubric) for task in tasks for t, rubric in task.rubrics]


def _sample_ids() -> list[str]:
    return [folder.name for folder in task_dirs(SAMPLE_DIR)]


# --- structure ----------------------------------------------------------------------------------

@pytest.mark.slow
def test_suite_is_shipped_and_matches_the_builders(tasks: list[Task], built: dict[str, SampleTask]) -> None:
    assert SAMPLE_DIR.resolve() == DEFAULT_OUT  # the generator rewrites the copy the `sample` source loads
    assert len(tasks) >= 16
    assert [t.id for t in tasks] == sorted(built)
    assert all(folder.name == load_task_dir(folder).id for folder in task_dirs(SAMPLE_DIR))


def test_categories_and_domains(tasks: list[Task]) -> None:
    per_category = Counter(t.category for t in tasks)
    assert set(per_category) == set(CATEGORIES)
    assert min(per_category.values()) >= 3, per_category
    assert {t.domain_raw for t in tasks} <= RAW_DOMAINS
    assert {t.domain for t in tasks} == set(DOMAINS)
    assert all(t.category_raw and t.category_raw != t.category for t in tasks)


def test_turn_counts(tasks: list[Task]) -> None:
    for task in tasks:
        if task.category in SINGLE_TURN_CATEGORIES:
            assert len(task.turns) == 1, task.id
        else:
            assert 2 <= len(task.turns) <= 5, task.id
    for category in set(CATEGORIES) - SINGLE_TURN_CATEGORIES:
        counts = {len(t.turns) for t in tasks if t.category == category}
        assert {2, 3} <= counts and max(counts) >= 4, (category, counts)


def test_images_per_turn(tasks: list[Task]) -> None:
    for task in tasks:
        assert [im.file for im in task.images] == [f"image_{i}.png" for i in range(len(task.images))]
        assert all(im.path is not None and im.path.is_file() for im in task.images), task.id
        if task.category == "temporal":
            assert [turn.images for turn in task.turns] == [[i] for i in range(len(task.turns))], task.id
            assert len(task.images) == len(task.turns)
        else:
            assert len(task.images) == 1, task.id
            assert [turn.images for turn in task.turns] == [[0]] + [[] for _ in task.turns[1:]], task.id


def test_image_sizes_and_suite_size(tasks: list[Task]) -> None:
    for task in tasks:
        for image in task.images:
            with Image.open(image.path) as im:
                assert 1200 <= im.width <= 2000 and 900 <= im.height <= 1500, (task.id, image.file, im.size)
                assert im.format == "PNG" and im.mode == "RGB"
    total = sum(f.stat().st_size for f in SAMPLE_DIR.rglob("*") if f.is_file())
    assert total < MAX_SUITE_BYTES, total


def test_rubrics_in_vtb_format(tasks: list[Task]) -> None:
    for task in tasks:
        raw = json.loads((SAMPLE_DIR / task.id / TASK_FILE).read_text(encoding="utf-8"))
        ids = [rid for turn in raw["turns"] for rid in turn["rubrics"]]
        assert len(ids) == len(set(ids)), task.id
        assert ids == [f"r{i}" for i in range(1, len(ids) + 1)], task.id
        for turn in raw["turns"]:
            assert 2 <= len(turn["rubrics"]) <= 5, task.id
            for rid, body in turn["rubrics"].items():
                assert set(body) >= VTB_RUBRIC_KEYS, (task.id, rid)
                assert isinstance(body["weight"], int) and 1 <= body["weight"] <= 5
                assert body["objective/subjective"] in {"objective", "subjective"}
                assert body["explicit/implicit"] in {"explicit", "implicit"}
                assert body["category"] and set(body["category"]) <= RUBRIC_CATEGORIES, (task.id, rid)
                assert body["critical"] in {"yes", "no"} and body["final_answer"] in {"yes", "no"}
                assert body["description"].strip()
        for turn in task.turns:
            assert turn.prompt.strip() and turn.golden_answer.strip()


def test_critical_rubrics(tasks: list[Task]) -> None:
    for task in tasks:
        assert any(r.weight >= 4 and r.critical for _, r in task.rubrics), task.id
    disagreements = [(task.id, r) for task, _, r in _all_rubrics(tasks) if r.is_critical("weight") != r.critical]
    assert len(disagreements) == 1, disagreements
    _, rubric = disagreements[0]
    assert rubric.weight == 2 and rubric.critical and rubric.check is not None


def test_checks_everywhere_but_a_few_style_rubrics(tasks: list[Task]) -> None:
    unchecked = [(task.id, r) for task, _, r in _all_rubrics(tasks) if r.check is None]
    assert len(unchecked) in (1, 2, 3), unchecked
    for task_id, rubric in unchecked:
        assert not rubric.is_critical("either"), task_id
        assert rubric.objectivity == "subjective" and rubric.categories == ["writing style / presentation"]


@pytest.mark.parametrize("task_id", _sample_ids())
def test_goldens_pass_their_checks(tasks: list[Task], task_id: str) -> None:
    task = next(t for t in tasks if t.id == task_id)
    for number, turn in enumerate(task.turns, 1):
        for rubric in turn.rubrics:
            if rubric.check is not None:
                assert golden_meets(rubric.check, turn.golden_answer), (task_id, number, rubric.id, rubric.check)


@pytest.mark.parametrize("task_id", _sample_ids())
@pytest.mark.slow
def test_wrong_answers_fail_critical_checks(tasks: list[Task], built: dict[str, SampleTask], task_id: str) -> None:
    task = next(t for t in tasks if t.id == task_id)
    wrong = built[task_id].wrong_answers
    for t_index, rubric in task.rubrics:
        if rubric.check is None or not rubric.is_critical("either"):
            continue
        answer = wrong.get((t_index, rubric.id))
        assert answer, f"{task_id} turn {t_index + 1} {rubric.id}: no wrong answer for a critical check"
        assert wrong_fails(rubric.check, answer), (task_id, rubric.id, answer)


def test_follow_up_turn_one_asks(tasks: list[Task]) -> None:
    for task in (t for t in tasks if t.category == "follow_up"):
        first, later = task.turns[0], task.turns[1:]
        checks = [r.check for r in first.rubrics if r.check is not None]
        assert "?" in first.golden_answer
        assert any(c.type == "regex" and c.pattern == r"\?" for c in checks), task.id
        assert any(c.type == "contains_any" for c in checks), task.id
        guarded = [v for c in checks if c.type == "not_contains" for v in c.values]
        assert any(v in turn.golden_answer for v in guarded for turn in later), task.id
        assert all("?" not in turn.prompt for turn in later[:1]), task.id  # turn 2 is the clarification


# --- reference trajectories ---------------------------------------------------------------------

def test_trajectory_shape(tasks: list[Task]) -> None:
    powers = 0
    used: Counter[str] = Counter()
    for task in tasks:
        outputs: list[int] = []
        for number, turn in enumerate(task.turns, 1):
            steps = turn.trajectory
            assert {s.tool for s in steps} <= TOOLS, task.id
            assert len(steps) <= MAX_STEPS_PER_TURN, (task.id, number)
            if not (task.category == "follow_up" and number == 1):
                assert steps, (task.id, number)
            for step in steps:
                used[step.tool] += 1
                if step.tool in ("python_image_processing", "python_interpreter"):
                    assert set(step.args) == {"code"} and len(step.args["code"]) <= 5000
                    if step.tool == "python_image_processing":
                        outputs += [int(k) for k in dict.fromkeys(OUTPUT_NAME.findall(step.args["code"]))]
                    else:
                        assert not OUTPUT_NAME.search(step.args["code"]), (task.id, "the interpreter saves no images")
                elif step.tool in NETWORK_ARGS:
                    assert set(step.args) == NETWORK_ARGS[step.tool], (task.id, step)
                else:
                    assert set(step.args) == {"expression"}
                    powers += "^" in step.args["expression"]
        assert outputs == list(range(len(outputs))), (task.id, outputs)
        tools = [s.tool for turn in task.turns for s in turn.trajectory]
        if task.category in SINGLE_TURN_CATEGORIES:
            assert "python_image_processing" in tools, task.id
            assert tools[0] == "python_image_processing", (task.id, "look at the image before anything else")
        if task.category == "hybrid_tool":
            assert {"calculator", "python_interpreter"} & set(tools), task.id
    assert powers >= 1
    assert set(used) == TOOLS, f"every tool appears in some reference trajectory: {sorted(used)}"


def _steps_in_workdir(task: Task, tool: str, workdir: Path) -> Iterator[tuple[int, Turn, ToolStep]]:
    """(1-based turn, turn, step) for each ``tool`` step, with the turn's images copied into
    ``workdir`` when its turn starts (as the sandbox receives them)."""
    for number, turn in enumerate(task.turns, 1):
        for index in turn.images:
            shutil.copyfile(task.images[index].path, workdir / f"image_{index}.png")
        for step in turn.trajectory:
            if step.tool == tool:
                yield number, turn, step


@pytest.mark.parametrize("task_id", _sample_ids())
def test_interpreter_steps_run(tasks: list[Task], task_id: str, tmp_path: Path) -> None:
    """Each python_interpreter step runs on its own and prints numbers that the golden answer states."""
    task = next(t for t in tasks if t.id == task_id)
    for number, turn, step in _steps_in_workdir(task, "python_interpreter", tmp_path):
        done = subprocess.run([sys.executable, "-c", step.args["code"]], cwd=tmp_path, timeout=60,
                              capture_output=True, text=True)
        assert done.returncode == 0, f"{task_id} turn {number}:\n{done.stderr}"
        printed = [n for n, _ in numbers_in(done.stdout)]
        stated = [n for n, _ in numbers_in(turn.golden_answer)]
        assert printed and any(math.isclose(p, g) for p in printed for g in stated if abs(g) >= 10), \
            (task_id, number, done.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("task_id", _sample_ids())
def test_vision_steps_run(tasks: list[Task], task_id: str, tmp_path: Path) -> None:
    task = next(t for t in tasks if t.id == task_id)
    for number, _turn, step in _steps_in_workdir(task, "python_image_processing", tmp_path):
        code = step.args["code"]
        expected = list(dict.fromkeys(OUTPUT_NAME.findall(code)))
        assert expected, (task_id, number, "a vision step must save a transformed image")
        assert not any((tmp_path / f"transformed_image_{k}.png").exists() for k in expected)
        _assert_focused_crops(task, code)
        done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, timeout=60, capture_output=True,
                              text=True)
        assert done.returncode == 0, f"{task_id} turn {number}:\n{done.stderr}"
        assert done.stdout.strip(), (task_id, number, "a vision step should print something useful")
        for k in expected:
            with Image.open(tmp_path / f"transformed_image_{k}.png") as out:
                assert out.width > 0 and out.height > 0


def _assert_focused_crops(task: Task, code: str) -> None:
    """Crops lie inside the image and zoom on a detail (a small part of the scene)."""
    with Image.open(task.images[0].path) as im:
        width, height = im.size
    boxes = [tuple(map(int, m)) for m in PIL_CROP.findall(code)]
    boxes += [(int(x0), int(y0), int(x1), int(y1)) for y0, y1, x0, x1 in CV_CROP.findall(code)]
    for x0, y0, x1, y1 in boxes:
        assert 0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height, (task.id, (x0, y0, x1, y1))
        assert (x1 - x0) * (y1 - y0) <= 0.2 * width * height, (task.id, (x0, y0, x1, y1))


@pytest.mark.parametrize("task_id", _sample_ids())
def test_calculator_steps(tasks: list[Task], task_id: str) -> None:
    task = next(t for t in tasks if t.id == task_id)
    for number, turn in enumerate(task.turns, 1):
        for step in turn.trajectory:
            if step.tool != "calculator":
                continue
            expression = step.args["expression"]
            value = calculator(expression)
            # every ^ is parenthesised: Python's ^ precedence and a textual ^ -> ** agree
            assert math.isclose(value, calculator(expression.replace("^", "**")), rel_tol=1e-12)
            if project_calculator is not None:
                assert math.isclose(value, project_calculator(expression), rel_tol=1e-12)
            shown = any(abs(n - value) <= 0.5 * 10**-decimals + 1e-9 for n, decimals in numbers_in(turn.golden_answer))
            checked = any(r.check is not None and r.check.type == "number"
                          and abs(r.check.value - value) <= r.check.tolerance + 1e-9 for r in turn.rubrics)
            assert shown or checked, (task_id, number, expression, value)


# --- generator ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def regenerated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("regen")
    first, second = root / "first", root / "second"
    done, _ = together(  # the script in a subprocess and generate() here, side by side, into two folders
        lambda: subprocess.run([sys.executable, str(GENERATOR), "--out", str(first)],
                               capture_output=True, text=True, timeout=300, env=checkout_env()),
        lambda: generate(second))
    assert done.returncode == 0, done.stderr
    return first, second


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@pytest.mark.slow
def test_generation_is_deterministic(regenerated: tuple[Path, Path]) -> None:
    first, second = regenerated
    assert _files(first) == _files(second)
    for name in _files(first):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


@pytest.mark.slow
def test_shipped_suite_is_up_to_date(regenerated: tuple[Path, Path]) -> None:
    fresh, _ = regenerated
    hint = "the shipped suite is stale: run make sample"
    assert _files(fresh) == _files(SAMPLE_DIR), hint
    for name in _files(fresh):
        if not name.endswith(".png"):
            assert (fresh / name).read_text() == (SAMPLE_DIR / name).read_text(), f"{name}: {hint}"
        else:
            with Image.open(fresh / name) as a, Image.open(SAMPLE_DIR / name) as b:
                assert np.array_equal(np.asarray(a), np.asarray(b)), f"{name}: {hint}"


def test_generate_refuses_to_wipe_a_foreign_directory(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("keep me")
    with pytest.raises(SystemExit):
        generate(tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "keep me"


@pytest.mark.slow
def test_generator_manages_its_cassette_and_readme(regenerated: tuple[Path, Path]) -> None:
    """The generated folder holds the cassette and README; regenerating over it keeps them (same bytes)."""
    _, second = regenerated
    before = {name: (second / name).read_bytes() for name in MANAGED_FILES}
    assert all(before.values())
    generate(second)  # over its own output: the managed files are not strangers
    assert {name: (second / name).read_bytes() for name in MANAGED_FILES} == before
    readme = (second / "README.md").read_text(encoding="utf-8")
    assert CASSETTE_FILE in readme and "AUTHORED" in readme and "not recorded from live services" in readme


# --- network tools: the authored cassette --------------------------------------------------------

LOCAL_ADDRESS = re.compile(r"127\.0\.0\.1|localhost|\[::1\]|0\.0\.0\.0", re.IGNORECASE)
URL = re.compile(r"https?://[^\s\"'<>)]+")
DOCUMENTATION_HOST = re.compile(r"^https://([a-z0-9-]+\.)*example\.(org|com|net)(/|$)")


def _network_task_steps(tasks: list[Task]) -> list[tuple[Task, int, int, ToolStep]]:
    return [(task, t, s, step) for task in tasks for t, turn in enumerate(task.turns)
            for s, step in enumerate(turn.trajectory) if step.tool in NETWORK_TOOLS]


@pytest.fixture(scope="module")
def replay_tools() -> dict[str, object]:
    settings = NetworkSettings(cache_path=SAMPLE_CASSETTE, mode="replay", search_backend="ddgs")
    return {tool.name: tool for tool in make_network_tools(settings)}


@pytest.fixture(scope="module")
def replayed_with_keys(tasks: list[Task], replay_tools: dict[str, object]) -> tuple[dict[tuple[str, int, int], dict],
                                                                                    set[str]]:
    """Every network step of the suite answered by the real tools replaying the shipped cassette (through
    ToolCache), and the cassette keys those calls looked up."""
    answers, keys = {}, set()
    original = ToolCache._run

    def spy(self: ToolCache, tool: str, args: dict, live: object) -> str:
        keys.add(cache_key(tool, args))
        return original(self, tool, args, live)

    with mock.patch.object(ToolCache, "_run", spy):
        for task, t, s, step in _network_task_steps(tasks):
            message = replay_tools[step.tool].invoke(
                {"name": step.tool, "args": dict(step.args), "id": f"call_{t}_{s}", "type": "tool_call"})
            assert message.status != "error", (task.id, step, message.content)
            answers[(task.id, t, s)] = json.loads(message.content)
    return answers, keys


@pytest.fixture(scope="module")
def replayed(replayed_with_keys: tuple[dict, set[str]]) -> dict[tuple[str, int, int], dict]:
    return replayed_with_keys[0]


def test_sample_cassette_constant() -> None:
    assert SAMPLE_CASSETTE == SAMPLE_DIR / CASSETTE_FILE and SAMPLE_CASSETTE.is_file()


def test_cassette_is_compact_and_has_no_local_addresses(tmp_path: Path) -> None:
    text = SAMPLE_CASSETTE.read_text(encoding="utf-8")
    assert json.loads(text.splitlines()[0]) == HEADER
    copy = tmp_path / CASSETTE_FILE
    copy.write_text(text, encoding="utf-8")
    compact_cassette(copy)
    assert copy.read_text(encoding="utf-8") == text, "the shipped cassette is sorted, one entry per key"
    assert not LOCAL_ADDRESS.search(text)
    for url in URL.findall(text):
        assert DOCUMENTATION_HOST.match(url), f"{url}: cassette URLs must be example.org/.com/.net"
    for entry in read_entries(SAMPLE_CASSETTE).values():
        assert "result" in entry, entry  # the demo cassette answers every call


@pytest.mark.slow
def test_cassette_holds_exactly_the_network_steps(tasks: list[Task], built: dict[str, SampleTask],
                                                  replayed_with_keys: tuple[dict, set[str]]) -> None:
    steps = [step for _, _, _, step in _network_task_steps(tasks)]
    assert {s.tool for s in steps} == set(NETWORK_TOOLS)
    assert steps == network_steps([built[k] for k in sorted(built)])
    _, looked_up = replayed_with_keys
    assert set(read_entries(SAMPLE_CASSETTE)) == looked_up, "the cassette has stale entries"


@pytest.mark.slow
def test_network_steps_replay_from_the_cassette(tasks: list[Task], replayed: dict) -> None:
    assert len(replayed) == len(_network_task_steps(tasks))
    for (task_id, t, s), result in replayed.items():
        task = next(x for x in tasks if x.id == task_id)
        step = task.turns[t].trajectory[s]
        if step.tool == "web_search":
            assert result["query"] == step.args["query"] and 1 <= len(result["results"]) <= step.args["num_results"]
            assert all(set(hit) == {"title", "url", "snippet"} for hit in result["results"])
        elif step.tool == "browser_get_page_text":
            assert result["url"] == step.args["url"] and result["text"].strip()
            found = [hit["url"] for (k, u, i), r in replayed.items() if (k, u) == (task_id, t) and i < s
                     and "results" in r for hit in r["results"]]
            assert step.args["url"] in found, (task_id, "open a page that an earlier search returned")
        else:
            assert result["date"] == step.args["date"]
            assert result["location"]["name"].lower() in step.args["location"].lower()


def test_network_tasks_are_marked_authored(tasks: list[Task]) -> None:
    networked = {task.id for task, _, _, _ in _network_task_steps(tasks)}
    assert len(networked) >= 3 and all(task_id.startswith("ht-") for task_id in networked)
    for task in tasks:
        assert (task.metadata.get("cassette") == "authored") == (task.id in networked), task.id


@pytest.mark.slow
def test_network_goldens_agree_with_the_cassette(tasks: list[Task], replayed: dict) -> None:
    """The facts the goldens take from the network tools are what the replayed tools return."""
    by_id = {task.id: task for task in tasks}
    results: dict[str, dict[str, list[dict]]] = {}
    for (task_id, t, s), result in replayed.items():
        tool = by_id[task_id].turns[t].trajectory[s].tool
        results.setdefault(task_id, {}).setdefault(tool, []).append(result)

    def golden(task_id: str) -> str:
        return by_id[task_id].turns[0].golden_answer

    (day,) = results["ht-sports-race-weather"]["historical_weather"]
    fahrenheit = day["temperature_2m_max"] * 9 / 5 + 32
    for value in (day["temperature_2m_max"], day["precipitation_sum"], round(fahrenheit, 1)):
        assert any(math.isclose(n, value) for n, _ in numbers_in(golden("ht-sports-race-weather"))), value
    assert day["weather"] in golden("ht-sports-race-weather") and day["precipitation_sum"] > 0

    (page,) = results["ht-generalist-power-station"]["browser_get_page_text"]
    assert "512 Wh" in page["text"] and "85%" in page["text"]
    assert "512 Wh" in golden("ht-generalist-power-station") and "85%" in golden("ht-generalist-power-station")
    (search,) = results["ht-generalist-power-station"]["web_search"]
    assert "420 Wh" in " ".join(hit["snippet"] for hit in search["results"])  # the older model: a distractor

    (search,) = results["ht-biology-growth-curve"]["web_search"]
    assert "every 90 minutes" in search["results"][0]["snippet"]
    assert re.search(r"\b90 min", golden("ht-biology-growth-curve"))

