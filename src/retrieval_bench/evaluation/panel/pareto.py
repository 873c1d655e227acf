"""The Pareto front of a panel: the systems no other system beats on quality and cost at once.

A system is a point: its quality (higher is better; the leaderboard uses mrr over the compared
questions) and its costs by name (lower is better; None where the cost was not measured, e.g. an
external run's search time). System A dominates system B when A's quality >= B's, every cost of
A <= B's, and at least one of these is strict. A missing cost is unknown, not zero: where either
system lacks a cost, the two are incomparable on it, so neither dominates the other; a system
with a missing cost is therefore never dominated (and dominates no one): it stays on the front,
and the leaderboard says its costs were not measured. Pure functions."""

from __future__ import annotations

import math
from collections.abc import Mapping


def _known(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def dominates(a: Mapping, b: Mapping) -> bool:
    """Whether point `a` ({"quality": q, "costs": {name: value | None}}) dominates point `b`."""
    names = set(a["costs"]) | set(b["costs"])
    if not _known(a["quality"]) or not _known(b["quality"]):
        return False
    for name in names:
        if not (_known(a["costs"].get(name)) and _known(b["costs"].get(name))):
            return False
    if a["quality"] < b["quality"] or any(a["costs"][name] > b["costs"][name] for name in names):
        return False
    return a["quality"] > b["quality"] or any(a["costs"][name] < b["costs"][name] for name in names)


def dominated_by(points: Mapping[str, Mapping]) -> dict[str, list[str]]:
    """Each system: the systems that dominate it, in the given order (empty: on the front)."""
    return {
        name: [other for other, point in points.items() if other != name and dominates(point, points[name])]
        for name in points
    }


def pareto_front(points: Mapping[str, Mapping]) -> list[str]:
    """The systems no other system dominates, in the given order."""
    return [name for name, by in dominated_by(points).items() if not by]


def unmeasured(points: Mapping[str, Mapping]) -> list[str]:
    """The systems with a cost (or their quality) missing: on the front by the rule above."""
    return [
        name
        for name, point in points.items()
        if not _known(point["quality"]) or not all(_known(value) for value in point["costs"].values())
    ]
