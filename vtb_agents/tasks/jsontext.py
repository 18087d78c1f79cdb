"""JSON text of task data parsed with a bound on nesting depth.

Why: task files and dataset cells are untrusted; deeply nested JSON makes Python's parser (and
everything walking the result) raise ``RecursionError``. Here it is a plain ``ValueError`` that the
loaders turn into a task error naming the field.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted in task JSON (VTB data nests 4 levels)."""


def loads(text: str | bytes) -> Any:
    """Parse ``text``; ValueError if it is not JSON or nests deeper than :data:`MAX_DEPTH`."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError(f"JSON nested too deeply (the limit is {MAX_DEPTH} levels)") from None
    check_depth(data)
    return data


def check_depth(data: Any, limit: int = MAX_DEPTH) -> None:
    """ValueError if ``data`` (parsed JSON) nests arrays/objects deeper than ``limit``."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
        if children is None:
            continue
        if depth > limit:
            raise ValueError(f"JSON nested deeper than {limit} levels")
        stack.extend((child, depth + 1) for child in children)
