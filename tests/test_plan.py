"""The run plan (``runner/plan.py``): a run resolved once; process and Ray workers rebuild its objects from
its records, build what the driver built, and give the summary a thread run gives; no module below the
plan decodes a spec."""

from __future__ import annotations

import ast
import json
import logging
import os
import re
from pathlib import Path

import pytest
from support.together import together

from vtb_agents.config import RunConfig
from vtb_agents.rundir.errors import RunError
from vtb_agents.rundir.read import read_record
from vtb_agents.runner.dispatch import check_built
from vtb_agents.runner.executors import LocalExecutor
from vtb_agents.runner.plan import plan_records, plan_run
from vtb_agents.runner.process_executor import ProcessExecutor
from vtb_agents.runner.run import run_suite
from vtb_agents.runner.worker import TaskWorker
from vtb_agents.tasks import load_tasks

PACKAGE = Path(__file__).resolve().parents[1] / "vtb_agents"
BUILT = re.compile(r"plan (?P<fingerprint>[0-9a-f]{16}): strategy .*")


def built_lines(caplog: pytest.LogCaptureFixture, logger: str) -> list[tuple[int, str]]:
    """(worker pid, what it built) from the driver's log of each worker that started."""
    found = []
    for record in caplog.records:
        if record.name == logger and BUILT.search(record.getMessage()):
            pid = int(re.search(r"pid (\d+)", record.getMessage()).group(1))  # type: ignore[union-attr]
            found.append((pid, BUILT.search(record.getMessage()).group(0)))  # type: ignore[union-attr]
    return found


@pytest.mark.slow
def test_process_and_ray_workers_rebuild_the_plan_from_its_records_and_give_the_thread_runs_summary(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ray = pytest.importorskip("ray")
    from vtb_agents.runner.ray_executor import RayExecutor

    sample = load_tasks("sample")
    config = RunConfig(model="replay", judge="rule")
    caplog.set_level(logging.INFO, logger="vtb_agents.runner")
    assert not ray.is_initialized()  # the executor starts its own local instance, and ends it
    threads, processes, on_ray = together(  # side by side: three run directories, nothing shared
        lambda: run_suite(sample, config, tmp_path / "threads", executor=LocalExecutor(2)),
        lambda: run_suite(sample, config, tmp_path / "processes", executor=ProcessExecutor(2, workers=2)),
        lambda: run_suite(sample, config, tmp_path / "ray",
                          executor=RayExecutor(concurrency=2, workers=2, init_kwargs={"num_cpus": 2})))

    # what each worker built, as the driver logged it: the thread run's plan, rebuilt from its records
    record = read_record(tmp_path / "threads")
    records = plan_records(record.config)
    assert (records.model_record(), records.judge_record()) == (record.model, record.judge)  # run.json's
    expected = plan_run(record.config).built
    assert expected.startswith(f"plan {records.fingerprint()}: strategy react, judge rule, tools ")
    for logger in ("vtb_agents.runner.process_executor", "vtb_agents.runner.ray_executor"):
        workers = built_lines(caplog, logger)
        assert len(workers) == 2 and {built for _, built in workers} == {expected}
        assert os.getpid() not in {pid for pid, _ in workers} and len({pid for pid, _ in workers}) == 2

    # the same summary, field for field (summary.json holds no timing field: durations are per result)
    written = {name: json.loads((tmp_path / name / "summary.json").read_text())
               for name in ("threads", "processes", "ray")}
    assert written["processes"] == written["threads"] and written["ray"] == written["threads"]
    assert written["threads"]["complete"] is True and written["threads"]["tasks"] == len(sample)
    typed = [s.model_dump(exclude={"run_dir"}) for s in (threads, processes, on_ray)]
    assert typed == [typed[0]] * 3  # what run_suite returns: summary.json, typed
    assert (processes.run_dir, on_ray.run_dir) == (tmp_path / "processes", tmp_path / "ray")
    for name in ("processes", "ray"):  # each run.json records the same resolved model and judge
        other = read_record(tmp_path / name)
        assert (other.config, other.model, other.judge) == (record.config, record.model, record.judge)


def test_a_worker_builds_its_plan_from_the_records_and_a_different_plan_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    run_suite(load_tasks("sample")[:1], RunConfig(model="replay"), out)  # a run directory a worker can open
    config = read_record(out).config
    worker = TaskWorker(plan_records(config), str(out), str(tmp_path / "cache.sqlite"), 0)
    try:
        pid, error, built = worker.ready()
        assert (pid, error) == (os.getpid(), None) and built == plan_run(config).built
        check_built("worker 0", built, plan_run(config).built)
        other = plan_run(config.model_copy(update={"no_tools": True})).built  # a node that builds another tool set
        with pytest.raises(RunError, match=r"worker 0 built another plan from the run's records than this process "
                                           r"did: plan [0-9a-f]{16}: strategy react, judge rule, tools python_image"):
            check_built("worker 0", built, other)
    finally:
        worker.close()


def test_the_judge_spec_is_classified_once_into_what_run_json_records(tmp_path: Path) -> None:
    records = plan_records(RunConfig(model="replay", judge="o4-mini"))  # a preset: expanded once
    assert records.judge.kind == "model" and records.judge.calls_model
    assert records.judge_record().spec == "openai:o4-mini" and records.judge_record().preset == "o4-mini"
    assert not plan_records(RunConfig(judge="rule")).judge.calls_model
    assert plan_records(RunConfig(model="agent:m:f")).model_is_agent
    with pytest.raises(ValueError, match="judge spec 'o4mini' is not 'rule', 'provider:model'"):
        plan_records(RunConfig(judge="o4mini"))


DECODERS = {"model_choice", "resolve_model", "chat_model", "build_chat_model", "model_factory", "judge_choice",
            "build_judge", "load_strategy", "load_agent", "backend", "extension_tools", "load_resumer",
            "load_extension", "is_extension", "open_sandbox", "load_judge", "judge_record", "model_record",
            "batch_provider", "prices_for", "decide_model", "decide_judge", "names_extension"}
"""The functions that decode a spec string (a model, judge, strategy, tool, sandbox or resumer spec), or
tell a fact of one (its prices, its judge's batch API): the plan records the facts, the rest reads them."""
DECODER_MODULES = {"vtb_agents.models.spec", "vtb_agents.extensions"}
DECODER_HOMES = {
    "runner/plan.py": "the plan: the one module a run's specs are decoded in",
    "models/spec.py": "the model decoder itself", "models/__init__.py": "re-exports the model decoder",
    "judges/__init__.py": "the judge decoder itself", "strategies/registry.py": "the strategy decoder itself",
    "strategies/agent.py": "the agent decoder itself (through load_strategy)",
    "strategies/__init__.py": "re-exports the strategy decoder", "sandbox/__init__.py": "the sandbox decoder itself",
    "tools/toolset.py": "the tool decoder itself", "tools/__init__.py": "re-exports the tool decoder",
    "graphs/resumers.py": "the resumer decoder itself", "extensions.py": "the extension loader itself",
    "cli/extensions.py": "`vtb strategies` / `tools` / `judges` / `sandboxes`: lists the names a spec can use "
                         "(installed entry points), decodes no spec",
    "cli/sandbox.py": "`vtb sandbox`: a top-level command that decides its one sandbox's kind itself, outside any "
                      "run, and must not load the plan (LangChain: test_cli_startup.py's "
                      "test_sandbox_exec_runs_code_without_langchain)",
}
"""Modules that may import a decoder, each with its reason; every other module reads the plan's built
objects or its typed records."""


def decoder_imports(path: Path) -> set[str]:
    """The decoder modules and decoder functions ``path`` imports (at any depth of the module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module in DECODER_MODULES:
                found.add(node.module)
            found |= {alias.name for alias in node.names if alias.name in DECODERS}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in DECODER_MODULES}
    return found


def test_no_module_below_the_plan_decodes_a_spec() -> None:
    importers = {str(path.relative_to(PACKAGE)): decoder_imports(path) for path in sorted(PACKAGE.rglob("*.py"))}
    strays = {module: sorted(names) for module, names in importers.items() if names and module not in DECODER_HOMES}
    assert strays == {}
    readers = ["analysis/cost.py", "analysis/metrics.py", "analysis/paired.py", "analysis/failures.py",
               "report/html.py", "report/compare.py", "cli/transcript.py", "cli/run.py", "cli/analyze.py", "config.py"]
    assert {module: importers[module] for module in readers if importers[module]} == {}  # they read the records
    executors = ["runner/run.py", "runner/executors.py", "runner/process_executor.py", "runner/ray_executor.py",
                 "runner/worker.py", "runner/dispatch.py", "runner/resources.py", "runner/regrade.py",
                 "runner/ablate.py", "runner/preflight.py", "episodes/driver.py", "api.py", "langsmith_eval.py",
                 *(str(p.relative_to(PACKAGE)) for p in sorted((PACKAGE / "studio").glob("*.py"))),
                 *(str(p.relative_to(PACKAGE)) for p in sorted((PACKAGE / "rundir").glob("*.py")))]
    assert {module: importers[module] for module in executors if importers[module]} == {}


def test_the_plan_records_the_prices_and_the_judges_batch_api_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from vtb_agents.models.presets import find_preset
    from vtb_agents.runner.plan import plan_judge

    gpt, o4 = find_preset("gpt-4o"), find_preset("o4-mini")
    assert gpt is not None and o4 is not None and gpt.prices.input and o4.prices.input
    records = plan_records(RunConfig(model="gpt-4o", judge="o4-mini", judge_batch=True))
    assert (records.model.prices, records.judge.prices) == (gpt.prices, o4.prices)
    assert records.judge.batch_provider == "openai" and records.defers_verdicts
    assert records.model_record().model_dump() == {"spec": gpt.spec, "preset": "gpt-4o", "settings": gpt.settings,
                                                   "prices": gpt.prices.known()}  # run.json: the prices, once
    assert records.judge_record().prices == o4.prices.known()
    assert plan_records(RunConfig(judge="anthropic:claude-x")).judge.batch_provider == "anthropic"
    for judge in ("rule", "google_genai:gemini-x", "my_pkg.judges:strict"):  # no batch API: graded live
        other = plan_records(RunConfig(model="replay", judge=judge, judge_batch=True))
        assert other.judge.batch_provider is None and not other.defers_verdicts
        assert other.model.prices is None and other.judge.prices is None
    assert not plan_records(RunConfig(judge="o4-mini")).defers_verdicts  # no --judge-batch
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")  # the judge is built (no call is made)
    grading = plan_judge("o4-mini")  # vtb grade --batch reads the same facts
    assert (grading.choice.batch_provider, grading.choice.prices) == ("openai", o4.prices)
    assert grading.record().prices == o4.prices.known()  # what a regrade records as the run's judge


def test_a_recorded_sandbox_kind_is_read_anywhere_and_decoded_by_the_plan(tmp_path: Path) -> None:
    from vtb_agents.rundir.records import RunRecord

    config = RunConfig(model="replay", judge="rule", sandbox="their_sandbox")  # a package installed elsewhere
    records = plan_records(config)  # the model and judge resolved; the sandbox kind is decoded when built
    record = RunRecord(config=config, model=records.model_record(), judge=records.judge_record())
    (tmp_path / "run.json").write_text(record.model_dump_json())
    assert read_record(tmp_path).config.sandbox == "their_sandbox"  # a reader needs no plugin of the run's
    with pytest.raises(ValueError, match=r"unknown sandbox kind 'their_sandbox': allowed kinds are local, e2b, "
                                         r"'module:Class' or an installed sandbox \(`vtb sandboxes`\)"):
        plan_run(config)
