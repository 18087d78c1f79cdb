"""Normalise the dataset's free-form category (``eval_focus``) and domain (``prompt_category``).

The exact strings in the public dataset are not documented, so matching is by keyword
and unknown values are kept (slugified) rather than rejected.
"""

from __future__ import annotations

import re

CATEGORIES: tuple[str, ...] = ("region_switch", "hybrid_tool", "follow_up", "temporal", "progressive")
DOMAINS: tuple[str, ...] = ("stem", "medical", "finance", "sports", "generalist")
SINGLE_TURN_CATEGORIES = frozenset({"region_switch", "hybrid_tool"})

_CATEGORY_KEYWORDS: tuple[tuple[str, str], ...] = (
    ("region", "region_switch"),
    ("hybrid", "hybrid_tool"),
    ("follow", "follow_up"),
    ("clarif", "follow_up"),
    ("temporal", "temporal"),
    ("progressive", "progressive"),
)
_STEM = {"stem", "chemistry", "maths", "math", "mathematics", "biology", "engineering", "physics"}
_DOMAIN_ALIASES = {"medicine": "medical", "health": "medical", "sport": "sports", "general": "generalist"}


def slug(value: str) -> str:
    """Lower-case ``value`` and join its alphanumeric runs with underscores."""
    return "_".join(re.findall(r"[a-z0-9]+", value.lower()))


def normalize_category(raw: str) -> str:
    """Map a raw ``eval_focus`` spelling to one of :data:`CATEGORIES`, or its slug if unknown.

    >>> normalize_category("Region Switch Q&A"), normalize_category("hybrid_tool_reasoning")
    ('region_switch', 'hybrid_tool')
    """
    s = slug(raw)
    for keyword, name in _CATEGORY_KEYWORDS:
        if keyword in s:
            return name
    return s or "unknown"


def normalize_domain(raw: str) -> str:
    """Map a raw ``prompt_category`` to one of :data:`DOMAINS` (STEM subjects merged), or its slug."""
    s = slug(raw)
    if s in _STEM:
        return "stem"
    s = _DOMAIN_ALIASES.get(s, s)
    return s or "unknown"
