"""`vtb compare` names the tasks that moved (docs/tutorials/compare-runs.md): the flips each way (the first 20,
then a count) and, with epochs, the tasks whose share of passing epochs changed, in the terminal and in
compare.html with links to both runs' task pages; real runs through the `vtb` CLI (a subprocess)."""

from __future__ import annotations

from functools import partial
import json
import threading
from collections import Counter
from pathlib import Path

import pytest
from support.openai_server import OpenAIServer
from support.cli import openai_env
from support import cli
from support.together import together

from vtb_agents.report.paired import id_list
from vtb_agents.tasks import load_tasks

IDS = ["ht-medical-dosage", "rs-chemistry-bench", "rs-finance-invoice"]
SAMPLE = {t.id: t for t in load_tasks("sample")}
SLIPS = "rs-chemistry-bench"  # wrong in its 2nd epoch only: 3/3 -> 2/3, no flip of the majority
FAILS = "rs-finance-invoice"  # wrong in every epoch: 3/3 -> 0/3, a flip to fail


class Answers:
    """Answers each task's prompt with its golden answer, except as planned above (by call number)."""

    def __init__(self) -> None:
        self.calls, self.lock = Counter[str](), threading.Lock()

    def __call__(self, body: dict) -> object:
        user = next(m for m in body["messages"] if m["role"] == "user")
        text = user["content"] if isinstance(user["content"], str) else user["content"][0]["text"]
        task = next(SAMPLE[i] for i in IDS if SAMPLE[i].turns[0].prompt in text)
        with self.lock:
            self.calls[task.id] += 1
            number = self.calls[task.id]
        wrong = task.id == FAILS or (task.id == SLIPS and number == 2)
        return "I cannot tell." if wrong else task.turns[0].golden_answer


vtb = partial(cli.vtb, columns=80, timeout=600)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("moved")
    selection = [a for task_id in IDS for a in ("--task-id", task_id)]
    common = ["--judge", "rule", "--epochs", "3", *selection]
    with OpenAIServer(Answers()) as server:  # the two runs side by side, each in a folder of its own
        replay, model = together(
            lambda: vtb("run", "--model", "replay", *common, "--out", str(root / "replay")),
            lambda: vtb("run", "--model", "openai:m", *common, "--out", str(root / "model"),
                        env=openai_env(server.base_url)))
    assert replay.returncode == 0, replay.stderr
    assert model.returncode == 0, model.stderr
    return root / "replay", root / "model"


@pytest.mark.slow
def test_the_terminal_lists_flips_and_changed_pass_counts(runs):
    done, as_json = together(lambda: vtb("compare", *map(str, runs)), lambda: vtb("compare", *map(str, runs), "--json"))
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())  # lines wrap at 80 columns
    assert "model vs replay: tasks that moved" in text
    assert "flips to pass (0): none" in text
    assert f"flips to fail (1): {FAILS}" in text
    assert f"passing epochs changed (2): {SLIPS} 3/3→2/3, {FAILS} 3/3→0/3" in text
    data = json.loads(as_json.stdout)
    changed = {c["task_id"]: (c["passes_a"], c["passes_b"]) for c in data["paired"][0]["pass_counts_changed"]}
    assert changed == {SLIPS: (3, 2), FAILS: (3, 0)}


@pytest.mark.slow
def test_compare_html_links_the_changed_tasks_to_both_runs(runs, tmp_path):
    out = tmp_path / "compare.html"
    assert vtb("compare", *map(str, runs), "--out", str(out)).returncode == 0
    page = out.read_text()
    section = page.split("Passing epochs changed (2)", 1)[1].split("</ul>", 1)[0]
    for task_id, note in ((SLIPS, "3/3 → 2/3"), (FAILS, "3/3 → 0/3")):
        item = section.split(f'data-task="{task_id}"', 1)[1].split("</li>", 1)[0]
        assert note in item and 'class="page-a"' in item and 'class="page-b"' in item
        assert item.count("epoch") == 6  # each run's three epoch pages linked


def test_long_lists_show_the_first_twenty_then_a_count():
    ids = [f"t{i:02d}" for i in range(25)]
    assert id_list(ids) == ", ".join(ids[:20]) + " and 5 more"
    assert id_list([]) == "none"
