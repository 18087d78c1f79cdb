"""Model presets on the wire: `vtb models`, and `vtb run --model PRESET` against local servers speaking
the OpenAI chat-completions and the Anthropic messages formats (what arrives in the request body)."""

from __future__ import annotations

from functools import partial
import json
from pathlib import Path

import pytest

from support.openai_server import OpenAIServer
from support.servers import LocalServer, Reply, Request
from support.cli import openai_env
from support import cli
from vtb_agents.models.presets import PresetError, parse_presets, presets, prices_for
from vtb_agents.models.spec import resolve_model

ROOT = Path(__file__).resolve().parents[1]


vtb = partial(cli.vtb, cwd=ROOT, timeout=240)
"""The real `vtb` command (python -m vtb_agents), from the project root."""


def test_vtb_models_lists_the_papers_models_with_their_settings():
    done = vtb("models", "--json")
    assert done.returncode == 0, done.stderr
    rows = {row["name"]: row for row in map(json.loads, done.stdout.splitlines())}
    for name in ("gpt-5", "gpt-5-think", "o3", "o4-mini", "gpt-4.1", "gpt-4o", "claude-opus-4.1",
                 "claude-sonnet-4", "gemini-2.5-pro"):
        assert name in rows and rows[name]["vision"] is True
    assert rows["gpt-5-think"]["settings"] == {"temperature": 1, "reasoning_effort": "high"}
    assert rows["gpt-5"]["settings"]["reasoning_effort"] == "medium" and rows["o3"]["settings"]["temperature"] == 1
    assert rows["gpt-4o"]["settings"] == {"temperature": 0}
    assert rows["claude-sonnet-4"]["settings"] == {"thinking": {"type": "enabled", "budget_tokens": 5000},
                                                   "max_tokens": 16000}
    assert rows["llama-4-maverick"]["prices_per_mtok"] == {}  # unknown, not zero
    table = vtb("models")
    assert "gpt-5-think" in table.stdout and "reasoning_effort" in table.stdout


def test_presets_resolve_merge_extra_settings_and_reject_bad_entries():
    choice = resolve_model("o4-mini", {"reasoning_effort": "low"})
    assert choice.spec == "openai:o4-mini" and choice.settings == {"temperature": 1, "reasoning_effort": "low"}
    assert resolve_model("openai:gpt-4o-mini").record() == {"spec": "openai:gpt-4o-mini", "preset": None,
                                                           "settings": {"temperature": 0.0}, "prices": None}
    assert prices_for("openai:gpt-5") == presets()["gpt-5"].prices and prices_for("openai:unknown") is None
    with pytest.raises(PresetError, match="preset 'x': 'spec' must be 'provider:model'"):
        parse_presets('[x]\nspec = "nocolon"\n')
    with pytest.raises(PresetError, match="price 'input' must be a number"):
        parse_presets('[x]\nspec = "a:b"\nprices = { input = "cheap" }\n')
    with pytest.raises(PresetError, match="preset 'x': 'batch' is a share of the list prices \\(0 to 1\\), got 2"):
        parse_presets('[x]\nspec = "a:b"\nprices = { input = 1.0, batch = 2 }\n')
    assert parse_presets('[x]\nspec = "a:b"\nprices = { input = 1.0, batch = 0.5 }\n')["x"].prices.batch == 0.5


@pytest.mark.parametrize("preset, expected, absent", [
    ("gpt-5-think", {"model": "gpt-5", "reasoning_effort": "high", "temperature": 1}, ()),
    ("gpt-4o", {"model": "gpt-4o", "temperature": 0}, ("reasoning_effort",)),
])
@pytest.mark.slow
def test_a_preset_run_sends_its_settings_and_records_them(preset, expected, absent, task_root, tmp_path):
    with OpenAIServer(lambda body: "The number is 42.") as server:
        done = vtb("run", "--tasks", str(task_root), "--model", preset, "--model-kwargs", '{"max_tokens": 321}',
                   "--out", str(tmp_path / "run"),
                   env=openai_env(server.base_url))
    assert done.returncode == 0, done.stderr
    assert server.requests
    for body in server.requests:
        assert {k: body.get(k) for k in expected} == expected
        assert body.get("max_completion_tokens", body.get("max_tokens")) == 321
        assert not set(absent) & set(body)
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["config"]["model"] == preset and run["config"]["model_kwargs"] == {"max_tokens": 321}
    settings = {k: v for k, v in expected.items() if k != "model"}
    assert run["model"] == {"spec": f"openai:{expected['model']}", "preset": preset,
                            "settings": {**settings, "max_tokens": 321}, "prices": presets()[preset].prices.known()}
    report = (tmp_path / "run" / "report.html").read_text()
    assert "max_tokens" in report and f"openai:{expected['model']}" in report


def anthropic_server(answer: str) -> LocalServer:
    """A stand-in of Anthropic's messages API: checks the headers, answers with a thinking block and text."""
    server = LocalServer()

    def messages(request: Request) -> Reply:
        key = request.headers.get("x-api-key") or request.headers.get("authorization", "").removeprefix("Bearer ")
        if key != "k" or "anthropic-version" not in request.headers:
            return Reply(401, {"type": "error", "error": {"type": "authentication_error", "message": "bad key"}})
        body = request.json()
        return Reply(200, {"id": "msg_test", "type": "message", "role": "assistant", "model": body["model"],
                           "content": [{"type": "thinking", "thinking": "Reading the corner.", "signature": "sig"},
                                       {"type": "text", "text": answer}],
                           "stop_reason": "end_turn", "stop_sequence": None,
                           "usage": {"input_tokens": 120, "output_tokens": 30}})

    server.route("/v1/messages", messages, method="POST")
    return server


@pytest.mark.slow
def test_a_claude_preset_sends_its_thinking_budget_on_the_anthropic_wire(task_root, tmp_path):
    pytest.importorskip("langchain_anthropic")
    with anthropic_server("The number is 42.") as server:
        done = vtb("run", "--tasks", str(task_root), "--model", "claude-sonnet-4", "--out", str(tmp_path / "run"),
                   "--model-kwargs", json.dumps({"base_url": server.url("/").rstrip("/")}),
                   env={"ANTHROPIC_API_KEY": "k"})
        bodies = [r.json() for r in server.requests_to("/v1/messages")]
    assert done.returncode == 0, done.stderr
    assert bodies and not server.errors
    for body in bodies:
        assert body["model"] == "claude-sonnet-4-0"
        assert body["thinking"] == {"type": "enabled", "budget_tokens": 5000}
        assert "temperature" not in body, body.get("temperature")
        assert body["max_tokens"] == 16000
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["model"]["settings"]["thinking"] == {"type": "enabled", "budget_tokens": 5000}
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["apr"] == 1.0
    assert summary["usage"]["model"]["input_tokens"] == 120 * len(bodies)


def test_bad_model_kwargs_are_a_clear_error(tmp_path):
    done = vtb("run", "--model", "gpt-4o", "--model-kwargs", "{not json", "--out", str(tmp_path / "r"))
    assert done.returncode == 2 and "--model-kwargs is not valid JSON" in done.stderr
    done = vtb("run", "--model", "replay", "--model-kwargs", "{}", "--out", str(tmp_path / "r"))
    assert done.returncode == 2 and "--model-kwargs needs a chat model" in done.stderr
    assert not (tmp_path / "r").exists()
