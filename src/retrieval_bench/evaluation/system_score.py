"""Score one system's run in both views: per-question rows (with their segments) and the summary
metrics.json holds. Shared by the single system's score stage and each panel system's."""

from __future__ import annotations

import sys

import pandas as pd

from retrieval_bench.evaluation.judged import judged_summary, unjudged_warning, without_repeated_twins
from retrieval_bench.evaluation.metrics import summarize
from retrieval_bench.evaluation.scoring import score_run_both_views, unscorable_warning, unspanned_warning
from retrieval_bench.evaluation.segments import segments
from retrieval_bench.retrieval.run_info import run_info_metrics


def score_system(
    all_params: dict,
    golden: list[dict],
    chunks: pd.DataFrame,
    run: pd.DataFrame,
    run_info_path: str,
    duplicates: pd.DataFrame,
    pool_rows: list[dict],
    pool_path: str,
    label: str = "score",
) -> tuple[pd.DataFrame, dict]:
    """(per-question table, summary); warns on stderr about questions nothing could be scored for."""
    params, judge = all_params["score"], all_params["judge"]
    ks = sorted(params["k"])
    table = score_run_both_views(
        golden,
        chunks,
        run,
        ks,
        params["min_coverage"],
        params["ties"],
        duplicates,
        pool_rows,
        judge["min_grade"],
        judge["ambiguous_at"],
        pool_path,
        params["budgets"],
        params["budget_unit"],
    )
    for warning in (unscorable_warning(table), unspanned_warning(golden, chunks), unjudged_warning(table)):
        if warning:
            print(f"{label}: warning: {warning}", file=sys.stderr)
    strict = summarize(table, ks, len(chunks), params["budgets"])
    judged = without_repeated_twins(strict, judged_summary(table, ks, duplicates), graded=judge["enabled"])
    summary = {**strict, **judged, **run_info_metrics(run_info_path, ks)}
    return pd.concat([table, segments(golden)], axis=1), summary
