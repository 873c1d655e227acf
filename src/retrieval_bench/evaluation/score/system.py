"""Score one system's run in both views: per-question rows (with their segments) and the summary
metrics.json holds: what the score stage does for each panel system."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from retrieval_bench.evaluation.score.judged import judged_summary, unjudged_warning, without_repeated_twins
from retrieval_bench.evaluation.score.metrics import summarize
from retrieval_bench.evaluation.score.scoring import score_run_both_views, unscorable_warning, unspanned_warning
from retrieval_bench.evaluation.score.segments import segments
from retrieval_bench.evaluation.score.settings import Scoring


def score_system(
    scoring: Scoring,
    golden: list[dict],
    chunks: pd.DataFrame,
    run: pd.DataFrame,
    *,
    run_info_path: str,
    duplicates: pd.DataFrame,
    pool_rows: list[dict],
    pool_path: str,
    label: str = "score",
) -> tuple[pd.DataFrame, dict]:
    """(per-question table, summary); warns on stderr about questions nothing could be scored for."""
    ks = list(scoring.ks)
    table = score_run_both_views(golden, chunks, run, scoring, duplicates, pool_rows, pool_path=pool_path)
    for warning in (unscorable_warning(table), unspanned_warning(golden, chunks), unjudged_warning(table)):
        if warning:
            print(f"{label}: warning: {warning}", file=sys.stderr)
    strict = summarize(table, ks, len(chunks), list(scoring.budgets))
    judged = without_repeated_twins(strict, judged_summary(table, ks, duplicates), graded=scoring.judge_enabled)
    summary = {**strict, **judged, **ann_recall_metrics(run_info_path, ks)}
    return pd.concat([table, segments(golden)], axis=1), summary


def ann_recall_metrics(run_info_path: str | Path, ks: list[int]) -> dict[str, float]:
    """ann_recall@k for each k up to the run's depth, read from the `ann_recall` curve retrieve
    wrote to run_info.json (retrieval/run_info.py); nothing for exact methods, or when the file
    is absent. Read here, not imported from retrieval, so the score stage's closure (its DVC deps)
    does not hold the dense search."""
    path = Path(run_info_path)
    if not path.is_file():
        return {}
    curve = json.loads(path.read_text(encoding="utf-8")).get("ann_recall", {})
    return {f"ann_recall@{k}": float(curve[str(k)]) for k in sorted(ks) if str(k) in curve}
