"""Per-question retrieval metrics from the ranks of a question's relevant chunks.

Every definition equals a trec_eval measure (checked against pytrec_eval in tests/test_metrics.py):
ranks are 1-based positions in the full ranking of the corpus; a relevant chunk has gain > 0.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

CUTOFF = 10  # mrr@10, ndcg@10, map@10


def dcg(ranks: np.ndarray, gains: np.ndarray, k: int) -> float:
    """sum of gain / log2(rank + 1) over the relevant chunks ranked in the top k (trec_eval's)."""
    inside = ranks <= k
    return float(np.sum(gains[inside] / np.log2(ranks[inside] + 1.0)))


def ndcg_at(ranks: np.ndarray, gains: np.ndarray, k: int) -> float:
    """DCG@k over the ideal DCG@k, the relevant gains sorted best first (trec_eval ndcg_cut.k)."""
    ideal = np.sort(gains)[::-1][:k]
    ideal_dcg = float(np.sum(ideal / np.log2(np.arange(2, len(ideal) + 2))))
    return dcg(ranks, gains, k) / ideal_dcg if ideal_dcg > 0 else 0.0


def average_precision_at(ranks: np.ndarray, k: int) -> float:
    """Mean over all relevant chunks of precision at its rank, 0 beyond k (trec_eval map_cut.k)."""
    if len(ranks) == 0:
        return 0.0
    inside = np.sort(ranks[ranks <= k])
    precisions = np.arange(1, len(inside) + 1) / inside
    return float(precisions.sum() / len(ranks))


def question_metrics(
    ranks: np.ndarray,
    gains: np.ndarray,
    ks: list[int],
    recall_at: dict[int, float] | None = None,
) -> dict[str, float]:
    """All metrics of one question.

    ranks, gains: the rank and gain of each relevant chunk; a relevant chunk the retriever did not
    return has rank inf. recall_at: recall per k when it is not the share of relevant chunks in
    the top k (evidence coverage); None for chunk labels.
    """
    ranks = np.asarray(ranks, dtype=np.float64)
    gains = np.asarray(gains, dtype=np.float64)
    first = float(ranks.min()) if len(ranks) else math.inf
    row = {
        "first_relevant_rank": first if math.isfinite(first) else math.nan,
        "reciprocal_rank": 1.0 / first,
        f"reciprocal_rank@{CUTOFF}": 1.0 / first if first <= CUTOFF else 0.0,
        f"ndcg@{CUTOFF}": ndcg_at(ranks, gains, CUTOFF),
        f"map@{CUTOFF}": average_precision_at(ranks, CUTOFF),
    }
    for k in ks:
        if recall_at is not None:
            row[f"recall@{k}"] = recall_at[k]
        else:
            row[f"recall@{k}"] = float(np.mean(ranks <= k)) if len(ranks) else 0.0
        row[f"hit@{k}"] = float(first <= k)
    return row


def summary_names(ks: list[int]) -> list[tuple[str, str]]:
    """(metrics.json key, per-question column it averages), in the order they are reported."""
    names = [(f"recall@{k}", f"recall@{k}") for k in ks] + [(f"hit@{k}", f"hit@{k}") for k in ks]
    names += [
        ("mrr", "reciprocal_rank"),
        (f"mrr@{CUTOFF}", f"reciprocal_rank@{CUTOFF}"),
        (f"ndcg@{CUTOFF}", f"ndcg@{CUTOFF}"),
        (f"map@{CUTOFF}", f"map@{CUTOFF}"),
    ]
    return names


def summarize(per_question: pd.DataFrame, ks: list[int], n_chunks: int) -> dict[str, float | int]:
    """metrics.json: the mean of every metric over questions, and the counts."""
    summary: dict[str, float | int] = {name: float(per_question[column].mean()) for name, column in summary_names(ks)}
    summary.update(
        n_questions=len(per_question),
        n_chunks=n_chunks,
        n_questions_without_relevant_chunk=int(per_question["first_relevant_rank"].isna().sum()),
    )
    return summary


RANK_BUCKETS = [(1, 1), (2, 2), (3, 3), (4, 5), (6, 10), (11, 20), (21, 50), (51, 100), (101, None)]


def rank_histogram(first_relevant_ranks: pd.Series) -> pd.DataFrame:
    """Questions per bucket of first relevant rank (1, 2, 3, 4-5, ..., >100, none), for a bar plot."""
    rows = []
    for low, high in RANK_BUCKETS:
        inside = (first_relevant_ranks >= low) & (first_relevant_ranks <= (high if high is not None else np.inf))
        label = str(low) if low == high else (f"{low}-{high}" if high is not None else f">{low - 1}")
        rows.append({"first_relevant_rank": label, "questions": int(inside.sum())})
    rows.append({"first_relevant_rank": "none", "questions": int(first_relevant_ranks.isna().sum())})
    return pd.DataFrame(rows)
