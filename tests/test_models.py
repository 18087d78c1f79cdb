"""Model specs: replay per task, one shared provider model, temperature rule, rate limiting."""

from __future__ import annotations

import pytest
from langchain_core.rate_limiters import InMemoryRateLimiter

from support.openai_server import OpenAIServer
from vtb_agents.models import ReplayChatModel, model_factory
from vtb_agents.models.paced import PacedTransport
from vtb_agents.models.spec import model_choice, temperature_for
from vtb_agents.runner.plan import plan_run
from vtb_agents.runner.run import RunConfig, run_suite
from vtb_agents.tasks import load_tasks


@pytest.mark.parametrize("name, temperature", [("gpt-4o", 0.0), ("o4-mini", 1.0), ("o3", 1.0),
                                               ("gpt-5-thinking", 1.0), ("claude-sonnet-4", 0.0)])
def test_temperature_is_zero_except_for_reasoning_models(name, temperature):
    assert temperature_for(name) == temperature


def test_replay_gets_a_model_per_task_and_providers_one_shared_model(task_root, monkeypatch):
    task = load_tasks(task_root)[0]
    assert isinstance(model_factory(model_choice("replay"))(task), ReplayChatModel)
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    plan = plan_run(RunConfig(model="openai:gpt-4o", requests_per_second=2.5))
    assert plan.models is not None
    model = plan.models(task)
    assert model is plan.models(task) and model.temperature == 0.0 and model.model_name == "gpt-4o"
    paced = model.http_client._transport  # the plan's account budgets pace an OpenAI model, --rps their cap
    assert isinstance(paced, PacedTransport) and paced.budgets is plan.limiters.budgets
    assert plan.limiters.own is not None and plan.limiters.own.caps.requests_per_second == 2.5
    assert model.rate_limiter is None  # paced by the budgets alone
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    other = plan_run(RunConfig(model="anthropic:claude-sonnet-4-0", requests_per_second=2.5))
    assert other.models is not None
    claude = other.models(task)  # not our transport: the plan's langchain-core limiter, at --rps
    assert isinstance(claude.rate_limiter, InMemoryRateLimiter) and claude.rate_limiter.requests_per_second == 2.5
    assert claude.rate_limiter is other.limiters.model
    with pytest.raises(ValueError, match="'agent:module:function'"):
        model_choice("not-a-preset")


def test_a_rate_limited_run_completes_and_resumes_with_another_rate(task_root, tmp_path, monkeypatch):
    tasks = load_tasks(task_root)
    with OpenAIServer(lambda body: "The number is 42.") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "k")
        summary = run_suite(tasks, RunConfig(model="openai:m", requests_per_second=20.0), tmp_path / "run")
        again = run_suite(tasks, RunConfig(model="openai:m", requests_per_second=5.0), tmp_path / "run",
                          resume=True)
    assert summary.apr == 1.0 and again == summary and len(server.requests) == 1


def test_concurrent_tasks_keep_their_connections_alive(monkeypatch):
    """The run's one shared model keeps a connection per concurrent task open between calls (over
    httpx's default of 20 kept alive), so a second wave of 30 concurrent calls opens no new ones:
    against a real API each new connection costs a TLS handshake."""
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    def slow(body):
        time.sleep(0.3)  # all 30 calls of a wave are in flight at once
        return "ok"

    with OpenAIServer(slow) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        model = model_factory(model_choice("openai:gpt-4o-mini"))(None)
        start = threading.Barrier(30)

        def call(_: int) -> str:
            start.wait()
            return str(model.invoke("hi").content)

        with ThreadPoolExecutor(30) as pool:
            assert list(pool.map(call, range(30))) == ["ok"] * 30
            first_wave = server.connections
            assert list(pool.map(call, range(30))) == ["ok"] * 30
    assert first_wave == 30 and server.connections == 30
