"""Tasks as a LangSmith experiment (``langsmith.evaluate``) through the real client and a local LangSmith
stand-in: the episodes run as targets, the rubric evaluator posts ``vtb_rubric_score`` / ``vtb_pass``."""

from __future__ import annotations

import json
import os

import pytest
from conftest import write_task
from support.langsmith_server import API_KEY, LangSmithStandIn, block_git, long_base64_runs, noise_png

import vtb_agents.tracing
from vtb_agents.cli.langsmith import run_langsmith_experiment
from vtb_agents.judges.evaluator import PASS_KEY, SCORE_KEY
from vtb_agents.langsmith_eval import evaluate_with_langsmith, summarize_experiment
from vtb_agents.runner.run import RunConfig, run_suite
from vtb_agents.tasks import load_tasks
from vtb_agents.tracing import make_langsmith_client


@pytest.fixture(autouse=True)
def _no_git(monkeypatch):
    block_git(monkeypatch)


@pytest.fixture
def tasks_and_grades(tmp_path):
    """``t-pass`` (an 800x600 noise image; its golden answer meets the critical rubric) and ``t-fail``
    (golden answer 41: the critical rubric fails), with the grades `vtb run` gives their replay."""
    root = tmp_path / "tasks"
    (write_task(root, "t-pass") / "image_0.png").write_bytes(noise_png())
    folder = write_task(root, "t-fail")
    data = json.loads((folder / "task.json").read_text())
    data["turns"][0]["golden_answer"] = "It is 41."
    data["turns"][0]["rubrics"]["r2"]["check"] = {"type": "contains_any", "values": ["it is"]}
    (folder / "task.json").write_text(json.dumps(data))
    tasks = load_tasks(str(root))
    config = RunConfig(model="replay", tasks=str(root))
    run_suite(tasks, config, tmp_path / "vtb-run")
    results = [json.loads(line) for line in (tmp_path / "vtb-run" / "results.jsonl").read_text().splitlines()]
    grades = {r["task_id"]: (r["grade"]["score"], r["grade"]["passed"]) for r in results}
    assert grades == {"t-pass": (1.0, True), "t-fail": (pytest.approx(1 / 6), False)}
    return tasks, config, grades


def feedback_by_task(server: LangSmithStandIn, experiment: dict) -> dict[str, dict[str, object]]:
    """{task id: {feedback key: score}} of the experiment's target runs, checking how they link up."""
    examples = {e["id"]: e for e in server.examples.values()}
    targets = {r["id"]: r for r in server.root_runs() if r["session_name"] == experiment["name"]}
    out: dict[str, dict[str, object]] = {}
    for feedback in server.feedback:
        run = targets.get(feedback["run_id"])
        if run is None:
            continue
        assert feedback["session_id"] == experiment["id"] and feedback["trace_id"] == run["id"]
        task_id = examples[run["reference_example_id"]]["inputs"]["task_id"]
        out.setdefault(task_id, {})[feedback["key"]] = feedback["score"]
    return out


def check_experiment(server: LangSmithStandIn, experiment: dict, tasks: list, grades: dict) -> None:
    """Feedback as `vtb run` graded; each target run answered and holds the task's ``vtb:<id>`` episode run."""
    dataset = next(iter(server.datasets.values()))
    assert experiment["reference_dataset_id"] == dataset["id"]
    expected = {t: {SCORE_KEY: pytest.approx(s, abs=1e-4), PASS_KEY: p} for t, (s, p) in grades.items()}
    assert feedback_by_task(server, experiment) == expected
    targets = [r for r in server.root_runs() if r["session_name"] == experiment["name"]]
    assert len(targets) == 2 and all(not r.get("error") for r in targets)
    golden = {t.id: [turn.golden_answer for turn in t.turns] for t in tasks}
    for target in targets:
        task_id = server.examples[target["reference_example_id"]]["inputs"]["task_id"]
        assert target["outputs"]["answers"] == golden[task_id]
        in_trace = [r for r in server.runs.values() if r["trace_id"] == target["id"]]
        (episode,) = [r for r in in_trace if r.get("name") == f"vtb:{task_id}"]
        assert episode["parent_run_id"] == target["id"] and episode["session_name"] == experiment["name"]
        assert episode["extra"]["metadata"]["task_id"] == task_id and "replay" in episode["tags"]
        assert len([r for r in in_trace if r["run_type"] == "llm"]) == 2  # tool call, answer


@pytest.mark.slow
def test_evaluate_with_langsmith_posts_rubric_feedback_as_vtb_run_grades(tasks_and_grades, tmp_path):
    tasks, config, grades = tasks_and_grades
    with LangSmithStandIn() as server:
        client = make_langsmith_client(api_url=server.url, api_key=API_KEY)
        results = evaluate_with_langsmith(tasks, config, "vtb-replay", client=client, dataset_name="vtb-two",
                                          work_dir=tmp_path / "work")
        # the same experiment again, from the dataset alone (tasks rebuilt from examples and attachments)
        again = evaluate_with_langsmith("vtb-two", config, "vtb-replay-from-dataset", client=client)
        client.cleanup()
    assert server.errors == []
    assert [d["name"] for d in server.datasets.values()] == ["vtb-two"] and len(server.examples) == 2
    summary = summarize_experiment(results)
    assert summary["tasks"] == summary["graded"] == 2 and summary["errors"] == 0 and summary["apr"] == 0.5
    assert summary["ars"] == pytest.approx((1 + 1 / 6) / 2)
    for result in (results, again):
        experiment = server.session_named(result.experiment_name)
        assert experiment["extra"]["metadata"]["vtb_config"] == config.to_dict()
        check_experiment(server, experiment, tasks, grades)
    assert all(long_base64_runs(body, 40_000) == [] for body in server.ingested)  # the 800x600 image, as thumbnails


def test_run_langsmith_experiment_prints_the_scores(tasks_and_grades, tmp_path, monkeypatch, capsys):
    tasks, config, grades = tasks_and_grades
    with LangSmithStandIn(zstd=False) as server:
        client = make_langsmith_client(api_url=server.url, api_key=API_KEY)
        monkeypatch.setattr(vtb_agents.tracing, "_default_client", client)
        run_langsmith_experiment(tasks, config, "cli-exp", out_dir=tmp_path / "out", dataset="cli-tasks", concurrency=2)
        client.cleanup()
    assert server.errors == []
    printed = capsys.readouterr().out
    assert "experiment cli-exp-" in printed and "2 task(s), 2 graded, 0 error(s); APR 50.0%, ARS 58.3%" in printed
    (experiment,) = [s for s in server.sessions.values() if s["name"].startswith("cli-exp-")]
    check_experiment(server, experiment, tasks, grades)
    assert (tmp_path / "out" / "artifacts").is_dir()


def test_an_experiment_holds_its_work_folder_like_a_run(tasks_and_grades, tmp_path):
    from vtb_agents.rundir.lock import RunDirBusy, run_dir_lock

    tasks, config, _ = tasks_and_grades
    work = tmp_path / "work"
    work.mkdir()
    with LangSmithStandIn() as server:
        client = make_langsmith_client(api_url=server.url, api_key=API_KEY)
        with run_dir_lock(work, "vtb run"), pytest.raises(RunDirBusy, match=str(os.getpid())):
            evaluate_with_langsmith(tasks, config, "busy", client=client, dataset_name="vtb-busy", work_dir=work)
        client.cleanup()
    assert not (work / "artifacts").exists()  # refused before anything was written
