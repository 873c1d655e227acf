"""The Pareto front of a panel (evaluation.panel.pareto): the hand case of the docs, and a brute-force
check of the definition on random points, ties and missing costs included."""

from __future__ import annotations

import itertools

import numpy as np

from retrieval_bench.evaluation.panel.pareto import dominated_by, dominates, pareto_front, unmeasured


def point(quality, **costs):
    return {"quality": quality, "costs": costs}


def test_the_hand_case():
    points = {
        "dense": point(0.52, search=0.4, index=1.7),
        "cheap-worse": point(0.40, search=0.3, index=0.9),  # cheaper: on the front
        "hybrid": point(0.49, search=0.9, index=2.6),  # worse and dearer than dense: dominated
        "twin": point(0.52, search=0.4, index=1.7),  # equal to dense: neither dominates (no strict)
        "same-quality-dearer": point(0.52, search=0.5, index=1.7),  # dense is as good, one cost lower
        "external": point(0.30, search=None, index=None),  # costs not measured: never dominated
    }
    assert pareto_front(points) == ["dense", "cheap-worse", "twin", "external"]
    assert dominated_by(points)["hybrid"] == ["dense", "twin", "same-quality-dearer"]
    assert dominated_by(points)["same-quality-dearer"] == ["dense", "twin"]
    assert unmeasured(points) == ["external"]
    assert not dominates(points["external"], points["cheap-worse"])


def brute_force_front(points: dict) -> list[str]:
    """The definition, written out: b is dominated when some a has quality >= and every cost <=,
    with at least one of them strict, every figure of both known."""
    front = []
    for b, pb in points.items():
        beaten = False
        for a, pa in points.items():
            if a == b:
                continue
            pairs = [(pa["quality"], pb["quality"], True)] + [
                (pa["costs"][c], pb["costs"][c], False) for c in pb["costs"]
            ]
            if any(x is None or y is None for x, y, _ in pairs):
                continue
            better_or_equal = all((x >= y) if up else (x <= y) for x, y, up in pairs)
            strict = any((x > y) if up else (x < y) for x, y, up in pairs)
            beaten |= better_or_equal and strict
        if not beaten:
            front.append(b)
    return front


def test_the_front_agrees_with_brute_force_on_random_panels():
    rng = np.random.default_rng(0)
    for trial in range(300):
        n = int(rng.integers(1, 9))
        grid = [0.1, 0.2, 0.3]  # a coarse grid: many ties
        points = {
            f"s{i}": point(
                float(rng.choice(grid)),
                **{c: (None if rng.random() < 0.1 else float(rng.choice(grid))) for c in ("a", "b", "c")},
            )
            for i in range(n)
        }
        assert pareto_front(points) == brute_force_front(points), (trial, points)
        front = set(pareto_front(points))
        for a, b in itertools.permutations(points, 2):  # domination is asymmetric
            assert not (dominates(points[a], points[b]) and dominates(points[b], points[a]))
        assert front or not points
