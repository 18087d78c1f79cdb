"""Deterministic rubric checks: decide a rubric from the answer text alone, without an LLM."""

from __future__ import annotations

import math
import re

from vtb_agents.tasks.model import Check

_NUMBER = re.compile(r"(?<![\w.])[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|(?<![\w.])[-+−]?\.\d+")


def numbers_in(text: str) -> list[float]:
    """Every number written in ``text`` (signs, decimals and thousands separators understood).

    >>> numbers_in("Total: 1,234.5 USD, change -3 and .25")
    [1234.5, -3.0, 0.25]
    """
    values = []
    for match in _NUMBER.finditer(text):
        token = match.group().replace(",", "").replace("−", "-")
        values.append(float(token))
    return values


def run_check(check: Check, answer: str) -> tuple[bool, str]:
    """Apply ``check`` to ``answer``; return (met, a one-line justification)."""
    if check.type == "number":
        assert check.value is not None
        found = numbers_in(answer)
        for number in found:
            if math.isclose(number, check.value, abs_tol=check.tolerance, rel_tol=0.0):
                return True, f"found {number:g} (expected {check.value:g} ± {check.tolerance:g})"
        shown = ", ".join(f"{n:g}" for n in found[:8]) or "no numbers"
        return False, f"expected {check.value:g} ± {check.tolerance:g}; answer has {shown}"
    if check.type == "regex":
        assert check.pattern is not None
        flags = 0 if check.case_sensitive else re.IGNORECASE
        match = re.search(check.pattern, answer, flags)
        return (True, f"matched /{check.pattern}/") if match else (False, f"no match for /{check.pattern}/")
    haystack = answer if check.case_sensitive else answer.casefold()
    present = [v for v in check.values if (v if check.case_sensitive else v.casefold()) in haystack]
    missing = [v for v in check.values if v not in present]
    if check.type == "contains_any":
        return (True, f"contains {present[0]!r}") if present else (False, f"contains none of {check.values!r}")
    if check.type == "contains_all":
        return (not missing, f"missing {missing!r}" if missing else "contains all expected strings")
    # not_contains
    return (not present, f"contains forbidden {present!r}" if present else "contains none of the forbidden strings")
