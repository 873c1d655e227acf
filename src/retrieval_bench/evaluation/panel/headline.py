"""The headline numbers: metrics/headline.json (the leaderboard's: a handful of numbers per panel
system and for the golden set, the judge and the certificate) and each system's own,
metrics/headlines/<system>.json (score's: the DVC metrics files, a row of `dvc metrics show`
each, so that it and `dvc metrics diff main` stay readable in review). Numbers only (no strings, no
booleans, no nulls: an unavailable figure is left out). Everything else (intervals, p-values,
segments, the reports' reasons and settings) stays in the leaderboard files and `show`."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd

from retrieval_bench.evaluation.certificate.states import VERDICT_NUMBER
from retrieval_bench.evaluation.score.per_question import (
    HEADLINE_BUDGET,
    HEADLINE_CUTOFF,
    headline_column,
    kinds_of,
    weighted_mean,
)

# Each system's headline: its mean over the compared questions (as the leaderboard's) of mrr and of
# these at the headline cut-off (or budget), named as the per-question column is.
SYSTEM_METRICS = (("ndcg", HEADLINE_CUTOFF), ("recall", HEADLINE_CUTOFF), ("recall_budget", HEADLINE_BUDGET))
GOLDENSET = ("n_questions", "n_generated", "echo_rate", "rejected", "evidence_not_located")  # of metrics/goldenset.json
JUDGE = ("judged", "relevant", "cost_usd")  # of metrics/judge.json
DIGITS = 4  # the figures agree to about 4 decimals across CPUs (docs/explanation/limits.md): no diff of last bits


def _number(value) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else round(value, DIGITS)
    return value


def _numbers(report: dict | None, keys: tuple[str, ...]) -> dict:
    report = report or {}
    return {key: value for key in keys if (value := _number(report.get(key))) is not None}


def system_headline(table: pd.DataFrame, weights: Mapping[str, float] | None = None) -> dict:
    """One system's headline means over the rows of `table` (the compared questions); with
    `weights` (score.weights real-mix: kind -> weight), each mean reweighted by kind as the
    leaderboard's headline is (score.per_question.weighted_mean)."""
    if not len(table):
        return {}
    kinds = None if weights is None else kinds_of(table)

    def mean(column: str) -> float:
        if kinds is None:  # pandas' mean: an unanswerable question's NaN is no ranking figure, left out
            return float(table[column].astype(float).mean())
        return weighted_mean(table[column].to_numpy(dtype=float), kinds, weights or {})

    names = {"mrr": "reciprocal_rank"} | {
        column: column
        for prefix, preferred in SYSTEM_METRICS
        if (column := headline_column(table.columns, prefix, preferred)) is not None
    }
    return {
        name: value
        for name, column in names.items()
        if column in table and (value := _number(mean(column))) is not None
    }


def headline(
    aligned: dict[str, pd.DataFrame],
    goldenset: dict | None,
    judge: dict | None,
    certificate: dict,
    weights: Mapping[str, float] | None = None,
    rejections: Mapping | None = None,
) -> dict:
    """{panel: {system: {mrr, ndcg@10, recall@10, recall_budget@4000 (or the cut-off and budget
    nearest: per_question.headline_column)}}, goldenset: {...},
    judge: {...}, certificate: {SET: {verdict (1 agrees, 0 undetermined, -1 disagrees),
    kendall_tau_mrr}}} with the unavailable figures left out. The systems' figures are over the
    reference question set when the leaderboard heads with one (leaderboard.headline_set); with
    `weights` (score.weights real-mix: the board's reweighted entry), over every compared question,
    reweighted to the real mix as the leaderboard's headline. With people's reviews (`rejections`:
    panel.reviewed.rejections), reviews: {n_reviewed, n_rejected, rejected_<reason> per reason}."""
    out = {
        "panel": {system: system_headline(table, weights) for system, table in aligned.items()},
        "goldenset": _numbers(goldenset, GOLDENSET),
        "judge": _numbers(judge, JUDGE),
    }
    if rejections is not None:
        by_reason = {f"rejected_{reason}": n for reason, n in rejections["by_reason"].items()}
        out["reviews"] = {"n_reviewed": rejections["n_reviewed"], "n_rejected": rejections["n_rejected"], **by_reason}
    for name, entry in certificate.get("sets", {}).items():
        figures = {"verdict": VERDICT_NUMBER[entry["verdict"]]}
        tau = _number(entry["metrics"].get("mrr", {}).get("kendall_tau", {}).get("value"))
        out.setdefault("certificate", {})[name] = figures if tau is None else {**figures, "kendall_tau_mrr": tau}
    return out
