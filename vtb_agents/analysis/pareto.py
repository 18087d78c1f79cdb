"""The Pareto front of runs by APR and cost: the runs no other run beats on both.

A run is on the front when no other run costs at most as much and scores at least as high, with one
of the two strictly better. Runs at the same point are all on the front or all off it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

__all__ = ["CostPoint", "pareto_front"]


@dataclass(frozen=True)
class CostPoint:
    """One run on the APR-against-cost chart: its label, estimated cost (USD) and APR (0..1)."""

    label: str
    cost: float
    apr: float


def _dominates(p: CostPoint, q: CostPoint) -> bool:
    """``p`` is at least as cheap and as good as ``q``, and better in one."""
    return p.cost <= q.cost and p.apr >= q.apr and (p.cost < q.cost or p.apr > q.apr)


def pareto_front(points: Sequence[CostPoint]) -> list[CostPoint]:
    """The points no other point dominates, cheapest first (then best APR first)."""
    front = [q for q in points if not any(_dominates(p, q) for p in points)]
    return sorted(front, key=lambda p: (p.cost, -p.apr, p.label))
