"""The Pareto front of a panel: the systems no other system beats on quality and cost at once.

A system is a point: its quality (higher is better; the leaderboard uses mrr over the compared
questions) and its costs by name (lower is better): a number (exact, e.g. an index's size), a
measured (low, high) range (the spread of repeated timings: its noise, core.timing), or None
where the cost was not measured (e.g. an external run's search time). A cost is *lower beyond
noise* than another when its high end is below the other's low end: ranges that overlap are
within the noise, not told apart (two numbers: the plain comparison). System A dominates system
B when A's quality >= B's, no cost of A is higher beyond noise than B's, and A's quality is
higher or a cost of A is lower beyond noise. A missing cost is unknown, not zero: where either
system lacks a cost, the two are incomparable on it, so neither dominates the other; a system
with a missing cost is therefore never dominated (and dominates no one): it stays on the front,
and the leaderboard says its costs were not measured. Pure functions."""

from __future__ import annotations

import math
from collections.abc import Mapping


def _known(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def _range(value) -> tuple[float, float]:
    return (value, value) if isinstance(value, (int, float)) else tuple(value)


def lower_beyond_noise(a, b) -> bool:
    """Whether cost `a` (a number or a (low, high) range) is lower than `b` beyond their noise."""
    return _range(a)[1] < _range(b)[0]


def _known_cost(value) -> bool:
    return _known(value) if isinstance(value, (int, float)) or value is None else all(map(_known, value))


def dominates(a: Mapping, b: Mapping) -> bool:
    """Whether point `a` ({"quality": q, "costs": {name: number | (low, high) | None}}) dominates point `b`."""
    names = set(a["costs"]) | set(b["costs"])
    if not _known(a["quality"]) or not _known(b["quality"]):
        return False
    for name in names:
        if not (_known_cost(a["costs"].get(name)) and _known_cost(b["costs"].get(name))):
            return False
    if a["quality"] < b["quality"] or any(lower_beyond_noise(b["costs"][n], a["costs"][n]) for n in names):
        return False
    return a["quality"] > b["quality"] or any(lower_beyond_noise(a["costs"][n], b["costs"][n]) for n in names)


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
        if not _known(point["quality"]) or not all(_known_cost(value) for value in point["costs"].values())
    ]
