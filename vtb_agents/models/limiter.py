"""Pacing from the provider's own answers: one limiter per account budget, shared by every call that spends it.

A run makes one :class:`Limiters` registry and hands it to every client it builds (agent, judge,
simulated user; the process and Ray executors serve it to their workers,
:mod:`vtb_agents.runner.shared_limiters`). A budget is a :class:`LimitKey`: provider, base URL, model
and a hash of the API key (the key itself is never kept). Its :class:`KeyLimiter` keeps, per budget
the answers report (requests, tokens, input and output tokens; :mod:`~vtb_agents.models.ratelimit_headers`):

* a token bucket at the reported rate: ``(limit - remaining) / reset`` of each answer (the time the
  account needs to refill what was spent), averaged, kept between the limit per minute and per second;
  ``limit`` per minute until an answer shows the rate. The bucket never holds more than
  :data:`BURST_S` of the rate (providers enforce per-minute limits over shorter slices), and is
  lowered to what the answer says remains, so that other clients of the same account are accounted for.
  The first answer of a budget fills its bucket with what remains (up to the burst at the rate it shows)
  less what the requests already in flight spend, so that a run starts at the account's pace;
* a window of requests in flight, adaptive (AIMD): open until the first 429 (a server that never
  refuses is never held back), then half of what was in flight; it grows by ``1/window`` per answer
  while it is what holds requests back, halves
  on a 429 (at most once per :data:`DECREASE_EVERY_S`), and never falls below what the request rate
  needs at the measured latency;
* on a 429, the ``retry-after`` (or ``retry-after-ms``): no request of that key goes before it ends,
  while every other key goes on.

``--rps`` and ``--max-connections`` (:class:`Caps`) cap the rate and the window of every key. A
request's tokens are estimated before it is sent (:mod:`vtb_agents.models.token_estimate`). Waiting
threads sleep on a condition; nothing here does I/O. docs/how-to/cost-and-rate-limits.md.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from vtb_agents.models.ratelimit_headers import BUDGETS, RateReport, Reading, parse_rate_headers
from vtb_agents.models.token_estimate import TokenEstimate

BURST_S = 1.0
"""A bucket holds at most this many seconds of its rate: no burst of a whole minute's limit at once."""
DECREASE_EVERY_S = 1.0
"""The window halves at most once per this many seconds: one burst of 429s is one decrease."""
DEFAULT_WINDOW_S = 60.0
"""The period of a limit before an answer shows its rate: OpenAI's and Anthropic's are per minute."""
MIN_WINDOW_S = 1.0
"""The shortest period a limit is taken to have: a measured rate is never above the limit per second."""
FALLBACK_RETRY_S = 1.0
"""How long a key pauses after a 429 that says neither when to retry nor a rate."""
_SLICE_S = 0.5  # a thread waiting for a free slot in the window checks its time limit this often


class RateLimitWait(TimeoutError):
    """A request could not be sent before its time limit: its key's budget (or a 429's retry-after) held it."""


@dataclass(frozen=True)
class LimitKey:
    """One account budget: ``provider``, ``base_url``, ``model`` and ``key_hash`` (of the API key)."""

    provider: str
    base_url: str
    model: str
    key_hash: str

    def label(self) -> str:
        """How the summary and logs name the budget (never the key itself)."""
        return f"{self.provider}:{self.model} at {self.base_url} (key {self.key_hash})"


def limit_key(provider: str, base_url: str, model: str, api_key: str | None) -> LimitKey:
    """The :class:`LimitKey` of a client: ``api_key`` is hashed (SHA-256, 12 hex digits), never kept."""
    digest = hashlib.sha256(api_key.encode()).hexdigest()[:12] if api_key else "none"
    return LimitKey(provider, base_url.rstrip("/"), model, digest)


@dataclass(frozen=True)
class Caps:
    """Caps over what the answers allow, for every key: ``requests_per_second`` (``--rps``) and
    ``max_connections`` (``--max-connections``, requests in flight)."""

    requests_per_second: float | None = None
    max_connections: int | None = None


@dataclass(frozen=True)
class Grant:
    """Leave to send one request: its key, its cost per budget, when it went and how long it waited."""

    key: LimitKey
    costs: dict[str, float]
    sent_at: float
    waited_s: float


def costs_of(estimate: TokenEstimate) -> dict[str, float]:
    """What a request spends of each budget."""
    return {"requests": 1.0, "tokens": float(estimate.total), "input-tokens": float(estimate.input),
            "output-tokens": float(estimate.output)}


@dataclass
class Bucket:
    """One budget of a key, mirrored here: ``limit`` as reported, ``rate`` per second (measured or
    capped), ``level`` (what may be spent now; negative after a request larger than the bucket)."""

    limit: float
    rate: float
    level: float
    stamp: float
    measured: bool = False

    @property
    def capacity(self) -> float:
        """The most the bucket holds: ``limit``, but no more than :data:`BURST_S` of the rate (at least 1)."""
        return max(1.0, min(self.limit, self.rate * BURST_S))

    def refill(self, now: float) -> None:
        """Add what the rate gave since the last refill."""
        self.level = min(self.capacity, self.level + self.rate * max(0.0, now - self.stamp))
        self.stamp = now

    def wait_for(self, cost: float) -> float:
        """Seconds until ``cost`` may be spent (0: now). A cost above the capacity waits for a full bucket."""
        need = min(cost, self.capacity)
        return 0.0 if self.level >= need else (need - self.level) / self.rate

    def observe(self, reading: Reading, now: float, cap: float | None) -> None:
        """Take an answer's ``reading``: its limit, the rate it shows, and what remains (the bucket is never
        fuller than the account's: other clients of the account spend it too). Requests still in flight are
        not taken off: most were counted by the server already, and taking them off again starved the
        bucket for seconds after a burst of answers."""
        self.refill(now)
        self.limit = reading.limit
        spent = reading.limit - reading.remaining
        if reading.reset_s and spent >= (1 if not self.measured else 2):
            # A limit refills within its period: no slower than the limit per minute, no faster than per second.
            sample = min(max(spent / reading.reset_s, reading.limit / DEFAULT_WINDOW_S), reading.limit / MIN_WINDOW_S)
            self.rate = sample if not self.measured else 0.8 * self.rate + 0.2 * sample
            self.measured = True
        elif not self.measured:
            self.rate = reading.limit / DEFAULT_WINDOW_S
        if cap is not None:
            self.rate = min(self.rate, cap)
        self.level = min(self.level, reading.remaining)


@dataclass
class KeyStats:
    """What a key's limiter did: requests sent, 429s seen and absorbed, seconds requests waited."""

    requests: int = 0
    rejected_429: int = 0
    absorbed_429: int = 0
    wait_s: float = 0.0
    limits: dict[str, float] = field(default_factory=dict)


class KeyLimiter:
    """The pacing of one :class:`LimitKey` (see the module's docstring); thread-safe."""

    def __init__(self, key: LimitKey, caps: Caps = Caps()) -> None:
        self.key, self.caps = key, caps
        self.buckets: dict[str, Bucket] = {}
        self.window: float | None = None  # open until the first 429
        self.inflight = 0
        self.inflight_costs: dict[str, float] = {}  # what the requests in flight spend of each budget
        self.blocked_until = 0.0
        self.latency_s: float | None = None
        self.stats = KeyStats()
        self._last_decrease = -math.inf
        self._changed = threading.Condition()
        if caps.requests_per_second:
            now = time.monotonic()
            rate = caps.requests_per_second
            self.buckets["cap"] = Bucket(limit=max(1.0, rate), rate=rate, level=max(1.0, rate * BURST_S), stamp=now,
                                         measured=True)

    def _wait(self, costs: Mapping[str, float], now: float) -> float:
        """Seconds until a request of ``costs`` may go (0: now; inf: when one in flight ends)."""
        wait = max(0.0, self.blocked_until - now)
        for name, bucket in self.buckets.items():
            bucket.refill(now)
            wait = max(wait, bucket.wait_for(costs.get(name, 1.0)))
        if self.inflight >= self._allowed_inflight():
            return math.inf
        return wait

    def _allowed_inflight(self) -> int:
        """The window, at least what the measured request rate needs at the measured latency, within the cap."""
        floor = 1.0
        requests = self.buckets.get("requests")
        if requests is not None and requests.measured and self.latency_s is not None:
            floor = max(floor, requests.rate * self.latency_s)
        allowed = math.inf if self.window is None else max(self.window, floor)
        if self.caps.max_connections:
            allowed = min(allowed, self.caps.max_connections)
        return max(1, int(allowed)) if allowed != math.inf else sys.maxsize

    def acquire(self, estimate: TokenEstimate, timeout_s: float | None = None) -> Grant:
        """Wait until a request of ``estimate`` may go and count it sent; :class:`RateLimitWait` if that is
        later than ``timeout_s`` from now (None: no limit)."""
        costs = costs_of(estimate)
        start = time.monotonic()
        expires = math.inf if timeout_s is None else start + timeout_s
        waited = False  # a request that goes at once waited 0 s, exactly
        with self._changed:
            while True:
                now = time.monotonic()
                wait = self._wait(costs, now)
                if wait <= 0:
                    break
                if wait != math.inf and now + wait > expires or now >= expires:
                    self.stats.wait_s += now - start
                    held = (f"{self.inflight} requests in flight, all the window allows" if wait == math.inf
                            else f"the rate limit holds requests for {wait:.1f} s more")
                    raise RateLimitWait(f"{self.key.label()}: {held}, past the time left "
                                        f"({max(0.0, expires - now):.1f} s)")
                self._changed.wait(min(wait, _SLICE_S, max(0.0, expires - now)))
                waited = True
            for name, bucket in self.buckets.items():
                bucket.level -= costs.get(name, 1.0)
            for name, cost in costs.items():
                self.inflight_costs[name] = self.inflight_costs.get(name, 0.0) + cost
            waited_s = now - start if waited else 0.0
            self.inflight += 1
            self.stats.requests += 1
            self.stats.wait_s += waited_s
            return Grant(self.key, costs, now, waited_s)

    def release(self, grant: Grant, status: int | None, report: RateReport) -> None:
        """A request of ``grant`` ended with HTTP ``status`` (None: no answer) and ``report``: learn from it,
        and let waiting requests go."""
        with self._changed:
            now = time.monotonic()
            self.inflight -= 1
            for name, cost in grant.costs.items():
                self.inflight_costs[name] = self.inflight_costs.get(name, 0.0) - cost
            for name, reading in report.readings.items():
                self._observe(name, reading, now)
            if status == 429:
                self._rejected(report, now)
            elif status is not None and status < 400:
                self._accepted(now - grant.sent_at)
            self._changed.notify_all()

    def _observe(self, name: str, reading: Reading, now: float) -> None:
        if reading.limit <= 0:  # no limit to keep (a server's placeholder), and no rate to divide by
            return
        bucket = self.buckets.get(name)
        new = bucket is None
        if bucket is None:
            rate = reading.limit / DEFAULT_WINDOW_S
            bucket = self.buckets[name] = Bucket(limit=reading.limit, rate=rate, level=reading.remaining, stamp=now)
        bucket.observe(reading, now, self.caps.requests_per_second if name == "requests" else None)
        if new:
            # What remains, up to a burst at the rate this answer shows (not at the per-minute guess the bucket
            # started from, which held the start of a run to one request), less the requests sent before the
            # bucket existed that are still in flight (the server may not have counted them yet).
            bucket.level = min(bucket.capacity, reading.remaining) - self.inflight_costs.get(name, 0.0)
        self.stats.limits[name] = reading.limit

    def _accepted(self, latency_s: float) -> None:
        self.latency_s = latency_s if self.latency_s is None else 0.9 * self.latency_s + 0.1 * latency_s
        if self.window is not None and self.inflight + 1 >= int(self.window):  # the window held requests back
            self.window += 1.0 / self.window

    def _rejected(self, report: RateReport, now: float) -> None:
        self.stats.rejected_429 += 1
        requests = self.buckets.get("requests")
        pause = report.retry_after_s
        if pause is None:
            pause = max(0.0, 1.0 - requests.level) / requests.rate if requests is not None else FALLBACK_RETRY_S
        self.blocked_until = max(self.blocked_until, now + pause)
        if requests is not None:
            requests.level = min(requests.level, 0.0)
        if now - self._last_decrease >= DECREASE_EVERY_S:
            self.window = max(1.0, (self.inflight + 1 if self.window is None else self.window) / 2)
            self._last_decrease = now

    def absorbed(self) -> None:
        """Count a 429 that was waited out and sent again (never an outcome)."""
        with self._changed:
            self.stats.absorbed_429 += 1


class Budgets(Protocol):
    """What a paced transport asks of a run's limiters, here or in another process (plain values only)."""

    def acquire(self, key: LimitKey, estimate: TokenEstimate, timeout_s: float | None) -> Grant:
        """Wait for leave to send one request of ``key``."""
        ...

    def release(self, grant: Grant, status: int | None, headers: dict[str, str]) -> None:
        """The request of ``grant`` ended: its status and rate-limit headers (``RATE_HEADERS``)."""
        ...

    def absorbed(self, key: LimitKey) -> None:
        """A 429 of ``key`` was waited out and the request sent again."""
        ...


_numbers = itertools.count()
_COUNTS = ("requests", "rejected_429", "absorbed_429", "wait_s")


class Limiters:
    """A run's limiters, one per :class:`LimitKey`, made as keys are first seen (a :class:`Budgets`)."""

    def __init__(self, caps: Caps = Caps()) -> None:
        self.caps = caps
        self.id = f"{time.time_ns():x}-{next(_numbers)}"
        self._keys: dict[LimitKey, KeyLimiter] = {}
        self._adopted: list[Mapping[str, Any]] = []
        self._lock = threading.Lock()

    def limiter(self, key: LimitKey) -> KeyLimiter:
        """The limiter of ``key`` (made on first use)."""
        with self._lock:
            if key not in self._keys:
                self._keys[key] = KeyLimiter(key, self.caps)
            return self._keys[key]

    def acquire(self, key: LimitKey, estimate: TokenEstimate, timeout_s: float | None) -> Grant:
        """Wait for leave to send one request of ``key`` (:meth:`KeyLimiter.acquire`)."""
        return self.limiter(key).acquire(estimate, timeout_s)

    def release(self, grant: Grant, status: int | None, headers: dict[str, str]) -> None:
        """The request of ``grant`` ended with ``status`` and ``headers`` (:meth:`KeyLimiter.release`)."""
        self.limiter(grant.key).release(grant, status, parse_rate_headers(headers))

    def absorbed(self, key: LimitKey) -> None:
        """A 429 of ``key`` was waited out and the request sent again."""
        self.limiter(key).absorbed()

    def adopt(self, summary: Mapping[str, Any]) -> None:
        """Count in :meth:`summary` the :meth:`summary` of limiters that paced this run elsewhere (a Ray actor)."""
        with self._lock:
            self._adopted.append(summary)

    def summary(self, earlier: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """What ``summary.json`` records under ``rate_limits``: 429s seen (``rejected_429``) and absorbed
        (``absorbed_429``) and seconds requests spent waiting (``wait_s``), in all, and per key that held a
        request back or answered 429 (``keys``: those and its ``requests`` and the limits last reported).
        A run that nothing held back records zeros and no key, the same however often it was resumed.
        ``earlier``: the ``rate_limits`` of the summary a resumed run continues, whose counts are added."""
        with self._lock:
            parts = [earlier or {}, *self._adopted, {"keys": {key.label(): {
                **{name: getattr(limiter.stats, name) for name in _COUNTS}, "limits": dict(limiter.stats.limits)}
                for key, limiter in self._keys.items()}}]
        keys: dict[str, dict[str, Any]] = {}
        for part in parts:
            for label, counts in part.get("keys", {}).items():
                entry = keys.setdefault(label, {})
                for name in _COUNTS:
                    entry[name] = entry.get(name, 0) + counts.get(name, 0)
                entry["limits"] = {**entry.get("limits", {}), **counts.get("limits", {})}
        for entry in keys.values():
            entry["wait_s"] = round(entry.get("wait_s", 0.0), 3)
        held = {label: entry for label, entry in keys.items() if entry["wait_s"] or entry.get("rejected_429")}
        return {"rejected_429": sum(entry.get("rejected_429", 0) for entry in held.values()),
                "absorbed_429": sum(entry.get("absorbed_429", 0) for entry in held.values()),
                "wait_s": round(sum(entry["wait_s"] for entry in held.values()), 3), "keys": held}


__all__ = ["BUDGETS", "Budgets", "Caps", "Grant", "KeyLimiter", "LimitKey", "Limiters", "RateLimitWait",
           "limit_key"]
