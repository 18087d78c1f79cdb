"""What a provider's answer says about its rate limits: OpenAI's ``x-ratelimit-*`` headers, Anthropic's
``anthropic-ratelimit-*`` headers and the ``retry-after`` / ``retry-after-ms`` of a 429.

OpenAI (platform.openai.com/docs/guides/rate-limits) sends, per budget ``requests`` and ``tokens``,
``x-ratelimit-limit-requests: 60`` (the most allowed per minute), ``x-ratelimit-remaining-requests: 59``
and ``x-ratelimit-reset-requests: 1s`` (the time until the budget is full again, as a duration such as
``6m0s``, ``1s`` or ``20ms``). Anthropic (docs.anthropic.com/en/api/rate-limits) sends, per budget
``requests``, ``tokens``, ``input-tokens`` and ``output-tokens``,
``anthropic-ratelimit-requests-limit``, ``-remaining`` and ``-reset`` (an RFC 3339 time, when the budget
is full again). Both answer a request over the limit with ``429`` and ``retry-after`` (seconds);
OpenAI-compatible servers also send ``retry-after-ms``. Pure functions, no I/O: the limiter
(:mod:`vtb_agents.models.limiter`) acts on what they return.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, UTC
from email.utils import parsedate_to_datetime

BUDGETS = ("requests", "tokens", "input-tokens", "output-tokens")
"""The budgets a limiter keeps: requests, and tokens in all, in and out (Anthropic's split)."""

RATE_HEADERS = ("retry-after", "retry-after-ms", *(f"x-ratelimit-{part}-{budget}" for budget in BUDGETS[:2]
                                                   for part in ("limit", "remaining", "reset")),
                *(f"anthropic-ratelimit-{budget}-{part}" for budget in BUDGETS
                  for part in ("limit", "remaining", "reset")))
"""Every header this module reads (lower case): what a remote limiter needs sent of an answer."""

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


@dataclass(frozen=True)
class Reading:
    """One budget as an answer reported it: the ``limit``, what is ``remaining`` and the seconds until
    it is full again (``reset_s``; None if not said)."""

    limit: float
    remaining: float
    reset_s: float | None


@dataclass(frozen=True)
class RateReport:
    """What one answer said: a :class:`Reading` per budget it reported, and how long to wait before
    the next request (``retry_after_s``, from a 429's ``retry-after-ms`` or ``retry-after``)."""

    readings: dict[str, Reading] = field(default_factory=dict)
    retry_after_s: float | None = None


def parse_duration(text: str) -> float:
    """Seconds of an OpenAI reset duration (``6m0s``, ``1s``, ``20ms``, ``1h2m3.5s``); ValueError if it is none."""
    text = text.strip()
    parts = _DURATION.findall(text)
    if not parts or "".join(f"{n}{u}" for n, u in parts) != text:
        try:
            return max(0.0, float(text))  # some compatible servers send plain seconds
        except ValueError:
            raise ValueError(f"rate-limit reset {text!r} is not a duration such as '6m0s', '1s' or '20ms'") from None
    return sum(float(number) * _UNITS[unit] for number, unit in parts)


def seconds_until(text: str, now: float | None = None) -> float:
    """Seconds from ``now`` (Unix time; default: the clock) until an RFC 3339 time such as
    ``2024-09-24T19:40:12Z`` (Anthropic's resets); never below zero. ValueError if it is no such time."""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"rate-limit reset {text!r} is not an RFC 3339 time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return max(0.0, moment.timestamp() - (time.time() if now is None else now))


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds a 429 asks to wait: ``retry-after-ms``, else ``retry-after`` (seconds or an HTTP date);
    None if neither is there or readable."""
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, moment.timestamp() - (time.time() if now is None else now))


def _reading(limit: str | None, remaining: str | None, reset: str | None,
             parse_reset: Callable[[str], float]) -> Reading | None:
    if limit is None or remaining is None:
        return None
    try:
        reset_s = parse_reset(reset) if reset is not None else None
        return Reading(float(limit), float(remaining), reset_s)
    except ValueError:
        return None  # a header we cannot read is ignored: the limiter goes on with what it knows


def parse_rate_headers(headers: Mapping[str, str], now: float | None = None) -> RateReport:
    """The :class:`RateReport` of an answer's ``headers`` (keys in lower case, as httpx gives them);
    ``now``: Unix time for Anthropic's reset times (default: the clock). Unreadable values are left out."""
    readings: dict[str, Reading] = {}
    for budget in BUDGETS[:2]:
        found = _reading(headers.get(f"x-ratelimit-limit-{budget}"), headers.get(f"x-ratelimit-remaining-{budget}"),
                         headers.get(f"x-ratelimit-reset-{budget}"), parse_duration)
        if found is not None:
            readings[budget] = found
    for budget in BUDGETS:
        prefix = f"anthropic-ratelimit-{budget}-"
        found = _reading(headers.get(prefix + "limit"), headers.get(prefix + "remaining"),
                         headers.get(prefix + "reset"), lambda text: seconds_until(text, now))
        if found is not None:
            readings[budget] = found
    return RateReport(readings, retry_after(headers, now))
