"""Cohen's kappa of two reviewers on what both reviewed: their marks of the same questions and their
grades of the same (question, chunk) pairs (evaluation.stats.cohen_kappa, unweighted)."""

from __future__ import annotations

import math
from itertools import combinations

from retrieval_bench.evaluation.stats import cohen_kappa
from retrieval_bench.goldenset.reviews import Reviews


def agreement_lines(reviews: Reviews) -> list[str]:
    """One line per pair of reviewers who share a question or a graded chunk; none when no two do."""
    lines = []
    for first, second in combinations(reviews.reviewers, 2):
        parts = []
        for what, table, keys, label in (
            ("questions", reviews.questions, ["qid"], "mark"),
            ("chunks", reviews.grades, ["qid", "chunk_id"], "grade"),
        ):
            both = table[table["reviewer"] == first].merge(table[table["reviewer"] == second], on=keys)
            if len(both):
                kappa = cohen_kappa(both[f"{label}_x"].to_numpy(), both[f"{label}_y"].to_numpy())
                shown = "n/a (one label throughout)" if math.isnan(kappa) else f"{kappa:.3f}"
                parts.append(f"{len(both)} {what} in common, {label}s kappa {shown}")
        if parts:
            lines.append(f"{first} and {second}: " + "; ".join(parts))
    return lines
