"""Pacing from the provider's own answers (issue #33, item 1): header parsing with the values the
providers document, the limiter's rules, and whole `vtb run`s of the held-out-style workload (five
tasks x 12 epochs, ``bench/rate_limit_plan.py``) against a local server that enforces a request or a
token limit (``bench/rate_limited_server.py``) with no ``--rps``: every episode graded, the limit
used to at least 0.85 over the model span, 429s at most a quarter of the accepted requests, with
the thread executor and with two worker processes or Ray actors sharing one budget."""

from __future__ import annotations

import base64
import io
import itertools
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import PROJECT, checkout_env
from support.openai_server import OpenAIServer
from support.together import together
from langchain_core.messages import HumanMessage
from PIL import Image

sys.path.insert(0, str(PROJECT / "bench"))

from rate_limit_plan import EPOCHS, HELD_OUT, build_plan, requests_per_epoch  # noqa: E402  (bench/: the held-out-style workload)
from rate_limited_server import Measure, RateLimitedServer  # noqa: E402  (bench/: the rate-limited chat-completions server)

from vtb_agents.models.limiter import Caps, KeyLimiter, Limiters, RateLimitWait, limit_key  # noqa: E402
from vtb_agents.models.ratelimit_headers import parse_duration, parse_rate_headers, retry_after  # noqa: E402
from vtb_agents.models.spec import chat_model  # noqa: E402
from vtb_agents.models.token_estimate import (TokenEstimate, anthropic_image_tokens, estimate_tokens,  # noqa: E402
                                              openai_image_tokens)

# ---------------------------------------------------------------- headers, as the providers document them

OPENAI_DOCS = {  # platform.openai.com/docs/guides/rate-limits, "Rate limits in headers"
    "x-ratelimit-limit-requests": "60", "x-ratelimit-limit-tokens": "150000",
    "x-ratelimit-remaining-requests": "59", "x-ratelimit-remaining-tokens": "149984",
    "x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "6m0s",
}
ANTHROPIC_DOCS = {  # docs.anthropic.com/en/api/rate-limits, "Response headers" (RFC 3339 resets)
    "anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "49",
    "anthropic-ratelimit-requests-reset": "2024-09-24T19:40:12Z",
    "anthropic-ratelimit-input-tokens-limit": "20000", "anthropic-ratelimit-input-tokens-remaining": "19000",
    "anthropic-ratelimit-input-tokens-reset": "2024-09-24T19:40:03Z",
    "anthropic-ratelimit-output-tokens-limit": "4000", "anthropic-ratelimit-output-tokens-remaining": "3900",
    "anthropic-ratelimit-output-tokens-reset": "2024-09-24T19:40:01.500Z",
    "anthropic-ratelimit-tokens-limit": "24000", "anthropic-ratelimit-tokens-remaining": "22900",
    "anthropic-ratelimit-tokens-reset": "2024-09-24T19:40:03Z",
    "retry-after": "30",
}
AT = 1727206800.0  # 2024-09-24T19:40:00Z


def test_openai_headers_from_the_docs() -> None:
    report = parse_rate_headers(OPENAI_DOCS)
    assert (report.readings["requests"].limit, report.readings["requests"].remaining) == (60, 59)
    assert report.readings["requests"].reset_s == 1.0 and report.readings["tokens"].reset_s == 360.0
    assert report.readings["tokens"].remaining == 149984 and report.retry_after_s is None
    assert [parse_duration(text) for text in ("20ms", "1s", "6m0s", "1h2m3.5s", "0.5s", "17.24s")] == \
        [0.02, 1.0, 360.0, 3723.5, 0.5, 17.24]
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("soon")


def test_anthropic_headers_from_the_docs() -> None:
    report = parse_rate_headers(ANTHROPIC_DOCS, now=AT)
    assert set(report.readings) == {"requests", "tokens", "input-tokens", "output-tokens"}
    assert report.readings["requests"].reset_s == 12.0 and report.readings["output-tokens"].reset_s == 1.5
    assert (report.readings["input-tokens"].limit, report.readings["input-tokens"].remaining) == (20000, 19000)
    assert report.retry_after_s == 30.0


def test_retry_after_forms_and_unreadable_values() -> None:
    assert retry_after({"retry-after-ms": "250", "retry-after": "1"}) == 0.25  # the finer one wins
    assert retry_after({"retry-after": "20"}) == 20.0
    assert retry_after({"retry-after": "Tue, 24 Sep 2024 19:41:30 GMT"}, now=AT) == 90.0
    assert retry_after({}) is None and retry_after({"retry-after": "later"}) is None
    report = parse_rate_headers({"x-ratelimit-limit-requests": "60", "x-ratelimit-remaining-requests": "x",
                                 "x-ratelimit-reset-requests": "1s"})
    assert report.readings == {}  # an unreadable budget is left out, not a crash
    limiter = KeyLimiter(limit_key("openai", "http://a/v1", "m", "k"))
    limiter.release(limiter.acquire(TokenEstimate(1), None), 200, parse_rate_headers({
        "x-ratelimit-limit-requests": "0", "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "0s"}))
    limiter.acquire(TokenEstimate(1), 0.0)  # a limit of 0 is no limit to keep


# ---------------------------------------------------------------- the limiter's rules

def test_the_key_is_hashed_and_keys_differ_by_account_and_model() -> None:
    key = limit_key("openai", "https://api.openai.com/v1/", "gpt-4o", "sk-secret")
    assert "sk-secret" not in repr(key) and key.base_url == "https://api.openai.com/v1"
    assert key == limit_key("openai", "https://api.openai.com/v1", "gpt-4o", "sk-secret")
    assert key != limit_key("openai", "https://api.openai.com/v1", "gpt-4o", "sk-other")
    assert key != limit_key("openai", "https://api.openai.com/v1", "o4-mini", "sk-secret")


def test_a_long_retry_after_holds_its_key_only() -> None:
    limiters = Limiters()
    slow, other = (limit_key("openai", "http://a/v1", model, "k") for model in ("m1", "m2"))
    grant = limiters.acquire(slow, TokenEstimate(10), None)
    limiters.release(grant, 429, {"retry-after": "90"})
    with pytest.raises(RateLimitWait, match="90"):
        limiters.acquire(slow, TokenEstimate(10), 5.0)  # the wait is known: refused at once, not after 5 s
    started = time.monotonic()
    limiters.release(limiters.acquire(other, TokenEstimate(10), 5.0), 200, {})
    assert time.monotonic() - started < 2  # the other key went at once
    assert limiters.summary()["rejected_429"] == 1


def test_the_rate_is_learned_from_the_answers_and_the_bucket_follows_what_remains() -> None:
    limiter = KeyLimiter(limit_key("openai", "http://a/v1", "m", "k"))
    grant = limiter.acquire(TokenEstimate(1), None)
    limiter.release(grant, 200, parse_rate_headers({"x-ratelimit-limit-requests": "600",
                                                    "x-ratelimit-remaining-requests": "0",
                                                    "x-ratelimit-reset-requests": "1m0s"}))
    assert limiter.buckets["requests"].rate == pytest.approx(10.0)  # 600 spent, refilled in a minute
    with pytest.raises(RateLimitWait):  # nothing remains: the next request waits ~0.1 s, more than 0.01 s
        limiter.acquire(TokenEstimate(1), 0.01)
    limiter.acquire(TokenEstimate(1), 5.0)


def test_the_first_answer_leaves_what_remains_to_spend_at_once_less_what_is_in_flight() -> None:
    """A run's first requests go before any answer shows a limit; the first answer's ``remaining`` (less the
    requests still in flight, which the server may not have counted) may then go at once, not one a
    rate-interval apart: the run starts at the account's pace (BENCHMARKS.md "Rate limits")."""
    limiter = KeyLimiter(limit_key("openai", "http://a/v1", "m", "k"))
    grants = [limiter.acquire(TokenEstimate(1), 0.0) for _ in range(3)]  # no answer yet: no bucket
    limiter.release(grants.pop(), 200, parse_rate_headers({"x-ratelimit-limit-requests": "12",
                                                           "x-ratelimit-remaining-requests": "11",
                                                           "x-ratelimit-reset-requests": "84ms"}))
    for _ in range(9):  # 11 remain, 2 of them in flight
        limiter.acquire(TokenEstimate(1), 0.0)
    with pytest.raises(RateLimitWait):
        limiter.acquire(TokenEstimate(1), 0.0)


def test_token_limits_hold_requests_by_their_estimated_tokens() -> None:
    limiter = KeyLimiter(limit_key("openai", "http://a/v1", "m", "k"))
    limiter.release(limiter.acquire(TokenEstimate(1), None), 200,
                    parse_rate_headers({"x-ratelimit-limit-tokens": "6000", "x-ratelimit-remaining-tokens": "0",
                                        "x-ratelimit-reset-tokens": "1m0s"}))  # 100 tokens a second
    with pytest.raises(RateLimitWait):
        limiter.acquire(TokenEstimate(50), 0.2)  # half a second of tokens
    limiter.acquire(TokenEstimate(10), 1.0)


def test_caps_bound_the_rate_and_the_requests_in_flight() -> None:
    limiter = KeyLimiter(limit_key("openai", "http://a/v1", "m", "k"), Caps(requests_per_second=2, max_connections=1))
    limiter.acquire(TokenEstimate(1), None)
    with pytest.raises(RateLimitWait):  # one in flight, the cap's one
        limiter.acquire(TokenEstimate(1), 0.3)


def test_a_429_halves_the_requests_in_flight_from_what_was_in_flight() -> None:
    limiter = KeyLimiter(limit_key("openai", "http://a/v1", "m", "k"))
    grants = [limiter.acquire(TokenEstimate(1), 0.0) for _ in range(10)]  # open: no 429 yet
    limiter.release(grants.pop(), 429, parse_rate_headers({"retry-after-ms": "1"}))
    assert limiter.window == 5.0  # half of the 10 in flight
    time.sleep(0.01)
    for grant in grants[4:]:
        limiter.release(grant, 200, parse_rate_headers({}))
    limiter.acquire(TokenEstimate(1), 1.0)  # 5 in flight now, as many as the window allows
    with pytest.raises(RateLimitWait, match="in flight"):
        limiter.acquire(TokenEstimate(1), 0.2)


def test_a_spent_quota_or_a_retry_after_past_the_deadline_is_handed_on_not_absorbed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from openai import RateLimitError

    from vtb_agents.models.http import requests_until

    monkeypatch.setenv("OPENAI_API_KEY", "k")
    quota = json.dumps({"error": {"message": "You exceeded your current quota", "type": "insufficient_quota",
                                  "param": None, "code": "insufficient_quota"}})
    replies = iter([("raw", quota, 429, {}), ("raw", "{}", 429, {"retry-after": "3"}),
                    ("raw", "{}", 429, {"retry-after-ms": "20"}), "fine"])
    with OpenAIServer(lambda body: next(replies)) as server:
        model = chat_model("openai:m", extra={"base_url": server.base_url})
        with pytest.raises(RateLimitError, match="quota"):
            model.invoke("hi")
        with requests_until(time.monotonic() + 1), pytest.raises(RateLimitError):
            model.invoke("hi")  # 3 s is past the task's time limit: the 429 goes to the retries
        started = time.monotonic()
        assert model.invoke("hi").content == "fine"  # the key waits out its 3 s; 20 ms is absorbed likewise
        assert time.monotonic() - started >= 1.5
    assert len(server.requests) == 4


def _png(width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(buffer, "PNG")
    return buffer.getvalue()


def test_token_estimates_count_text_and_images_by_their_size() -> None:
    assert openai_image_tokens(1024, 1024) == 765 and openai_image_tokens(2048, 4096) == 1105  # OpenAI's examples
    assert anthropic_image_tokens(1000, 1000) == 1334  # Anthropic's table, and its largest unresized square:
    assert anthropic_image_tokens(1092, 1092) == 1590 == anthropic_image_tokens(3136, 3136)
    image = base64.b64encode(_png(1024, 1024)).decode()
    text = "x" * 400
    body = json.dumps({"model": "m", "max_tokens": 300, "messages": [{"role": "user", "content": [
        {"type": "text", "text": text},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image}"}}]}]}).encode()
    estimate = estimate_tokens(body, "openai")
    assert estimate.output == 300
    assert 765 + 100 <= estimate.input <= 765 + 100 + 60  # the image, the text, and the JSON around them
    assert estimate_tokens(body, "anthropic").input >= 1398 + 100


# ---------------------------------------------------------------- through the transport, and the real CLI

class Scripted:
    """The agent answers at once (a different answer each time, so that no verdict comes from the cache);
    the judge (asked for structured output) says met."""

    def __init__(self) -> None:
        self.replies = itertools.count()
        self.judge_calls = 0

    def __call__(self, body: dict[str, Any]) -> str:
        if "response_format" in body:
            self.judge_calls += 1
            return json.dumps({"verdict": "met", "justification": "It says so."})
        return f"Final answer: 42 (reply {next(self.replies)})."


def test_anthropic_style_limits_are_kept_by_threads_of_one_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    image = base64.b64encode(_png(512, 512)).decode()
    with RateLimitedServer(Scripted(), requests_per_s=10, tokens_per_s=4000, style="anthropic") as server:
        model = chat_model("openai:scripted", extra={"base_url": server.base_url})

        question = HumanMessage([{"type": "text", "text": "what is it?"},
                                 {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{image}"}}])

        def ask() -> None:
            for _ in range(5):
                model.invoke([question])

        threads = [threading.Thread(target=ask) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        measure = server.measure()
    assert measure.accepted == 40  # every call answered: the 429s were absorbed inside the transport
    assert measure.rejected <= measure.accepted / 4, measure


def vtb_run(server: RateLimitedServer, out: Path, *extra: str) -> dict[str, Any]:
    """``vtb run`` of the held-out-style workload (``bench/rate_limit_plan.py``: five tasks of the bundled
    suite, three of them judged by the LLM judge, x 12 epochs = 60 episodes, 132 agent calls and 36 judge
    calls), agent and judge one model of the server's account, 32 at once."""
    env = checkout_env(OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="k")
    ids = [part for task_id in HELD_OUT for part in ("--task-id", task_id)]
    done = subprocess.run([sys.executable, "-m", "vtb_agents", "run", "--tasks", "sample", *ids,
                           "--model", "openai:scripted", "--judge", "openai:scripted", "--concurrency", "32",
                           "--epochs", str(EPOCHS), "--out", str(out), *extra],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return summary


def check_run(summary: dict[str, Any], scripted: Scripted, measure: Measure) -> None:
    """Every episode graded, none lost to the provider; the judge spent the same budget, and every request,
    the agent's and the judge's from every worker, went through one limiter of the run."""
    assert summary["graded"] == summary["tasks"] == len(HELD_OUT) and summary["complete"]
    assert summary["infrastructure_errors"]["count"] == 0
    assert summary["outcomes"] == {"answered": len(HELD_OUT) * EPOCHS}
    assert scripted.judge_calls >= 3 * EPOCHS  # the judge spent the same budget (36, and any resent after a 429)
    assert measure.accepted == requests_per_epoch(build_plan()) * EPOCHS  # the plan the bench's rivals follow
    assert measure.rejected <= measure.accepted / 4, measure
    paced = summary["rate_limits"]
    assert len(paced["keys"]) == 1  # agent and judge: one account, one model, one budget
    assert next(iter(paced["keys"].values()))["requests"] == measure.accepted + measure.rejected  # all went through it
    assert paced["rejected_429"] == paced["absorbed_429"] == measure.rejected
    assert paced["wait_s"] > 0


REQUEST_LIMITS = {"threads": (12, ()), "processes": (12, ("--executor", "processes", "--workers", "2")),
                  "ray": (5, ("--executor", "ray", "--workers", "2"))}
"""The issue's 12 requests/s in threads and in two processes (the run asks about 58/s of this machine with no
limit, BENCHMARKS.md "Rate limits"; it used 0.99 of 12/s with a busy loop on each core); 5/s for Ray, whose
actors cost more CPU per request on 2 cores: the server's limit, not the harness, must be what holds the run
back for the share to measure the pacing."""
TOKEN_LIMIT = (20, 12000)
"""Requests/s and tokens/s of the token-limited run: the tokens bind first (see its test)."""

Limited = tuple[dict[str, Any], Scripted, Measure]


def limited_run(out: Path, requests_per_s: float, tokens_per_s: float | None, *extra: str) -> Limited:
    """One whole ``vtb run`` (:func:`vtb_run`) against a server of its own with these limits: its summary, its
    scripted model and what the server measured."""
    scripted = Scripted()
    with RateLimitedServer(scripted, requests_per_s=requests_per_s, tokens_per_s=tokens_per_s) as server:
        summary = vtb_run(server, out, *extra)
        measure = server.measure()
    print(f"{out.name}: limit {requests_per_s}/s and {tokens_per_s} tokens/s {extra}: {measure}")
    return summary, scripted, measure


@pytest.fixture(scope="module")
def limited_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Limited]:
    """The request-limited runs in threads and in two processes and the token-limited run, side by side
    (about 30 s instead of 60: each run's time is its server's pacing, which overlaps). They share nothing:
    each has its own server (its own limit and log), run directory and ``vtb`` process; together they ask
    about 30 requests/s of the 58/s this machine serves. The Ray run is not among them: its actors, paced
    through a limiter actor, need the CPU the others would take (it used 0.91 of its limit beside them on a
    loaded machine, 0.98 alone)."""
    root = tmp_path_factory.mktemp("limited")
    steps = {name: (lambda name=name, limit=limit, extra=extra: limited_run(root / name, limit, None, *extra))
             for name, (limit, extra) in REQUEST_LIMITS.items() if name != "ray"}
    steps["tokens"] = lambda: limited_run(root / "tokens", *TOKEN_LIMIT)
    return dict(zip(steps, together(*steps.values()), strict=True))


def check_request_run(run: Limited) -> None:
    """:func:`check_run`, and the request limit used to at least 0.85 over the span."""
    summary, scripted, measure = run
    check_run(summary, scripted, measure)
    assert measure.share >= 0.85, measure


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["threads", "processes"])
def test_a_run_keeps_to_a_shared_request_limit_with_no_rps(limited_runs: dict[str, Limited], executor: str) -> None:
    """N = 32 against the issue's shared 12 requests/s with no ``--rps`` (:data:`REQUEST_LIMITS`), in threads
    and in two worker processes."""
    check_request_run(limited_runs[executor])


@pytest.mark.slow
def test_ray_actors_keep_to_a_shared_request_limit_with_no_rps(tmp_path: Path) -> None:
    """The same in two Ray actors, at 5 requests/s (:data:`REQUEST_LIMITS`), alone."""
    limit, extra = REQUEST_LIMITS["ray"]
    check_request_run(limited_run(tmp_path / "ray", limit, None, *extra))


@pytest.mark.slow
def test_a_run_keeps_to_a_token_limit_with_no_rps(limited_runs: dict[str, Limited]) -> None:
    """A token limit that binds before the request limit (the agent's requests carry the task's images and
    the tools' definitions, about 2,000 tokens each as the server counts them: 12,000 tokens/s allow about
    6 requests/s of the 20 allowed): the limiter learns it from the ``x-ratelimit-*-tokens`` headers and
    holds each request by its estimate (images included), so that the tokens, not the requests, are what
    the run uses up, with few 429s. The bench used 0.95 of it (BENCHMARKS.md "Rate limits"); 0.8 leaves
    room for a loaded machine."""
    summary, scripted, measure = limited_runs["tokens"]
    check_run(summary, scripted, measure)
    assert measure.token_share is not None and measure.token_share >= 0.8, measure
    assert measure.share < 0.6, measure  # the request limit did not bind


def test_the_benchs_hand_written_loop_loses_episodes_to_a_429_storm(tmp_path: Path) -> None:
    """The bench's rival loop (``bench/rate_limit_loop.py``: a thread pool over ``openai.OpenAI()`` and its
    own two retries) against the same server: 10 episodes at once at 1 request/s retry together after each
    ``retry-after-ms`` and most run out of retries; the loop reports them lost, as the server saw them."""
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(build_plan(epochs=2)))
    with RateLimitedServer(Scripted(), requests_per_s=1) as server:
        done = subprocess.run([sys.executable, str(PROJECT / "bench" / "rate_limit_loop.py"), str(plan),
                               server.base_url, "10"], capture_output=True, text=True, timeout=300)
        measure = server.measure()
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["episodes"] == 2 * len(HELD_OUT) and 0 < result["lost"] == result["errors"]["RateLimitError"]
    assert measure.rejected > measure.accepted, measure  # a 429 storm: the SDK's retries all go at once
