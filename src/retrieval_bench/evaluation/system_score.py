"""Score one system's run in both views: per-question rows (with their segments) and the summary
metrics.json holds. Shared by the single system's score stage and each panel system's."""

from __future__ import annotations

import sys

import pandas as pd

from retrieval_bench.evaluation.judged import PREFIX, judged_summary, unjudged_warning
from retrieval_bench.evaluation.metrics import summarize
from retrieval_bench.evaluation.scoring import score_run_both_views, unscorable_warning
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
    )
    for warning in (unscorable_warning(table), unjudged_warning(table)):
        if warning:
            print(f"{label}: warning: {warning}", file=sys.stderr)
    strict = summarize(table, ks, len(chunks))
    judged = judged_summary(table, ks, duplicates)
    twins = [name for name in judged if name.startswith(PREFIX) and name.removeprefix(PREFIX) in strict]
    if not judge["enabled"] and all(judged[name] == strict[name.removeprefix(PREFIX)] for name in twins):
        # The judge off and no duplicate changed anything: judged_<metric> would repeat every
        # metric, and `dvc metrics diff` list each twice. per_question.csv keeps the columns.
        judged = {name: value for name, value in judged.items() if name not in twins}
    summary = {**strict, **judged, **run_info_metrics(run_info_path, ks)}
    return pd.concat([table, segments(golden)], axis=1), summary
