"""Does a system know when nothing answers? Its top-1 score as an abstention signal, from the
unanswerable questions (kind unanswerable: no relevant chunk by definition) beside the answerable
ones (docs/reference/metrics.md, Abstention).

- abstention_auc: the chance that a random answerable question's top-1 score is above a random
  unanswerable one's, ties counting half (the Mann-Whitney AUC); 0.5 is no signal, 1 a perfect one.
- false_hit_rate: the share of unanswerable questions whose top-1 score reaches the threshold that
  keeps 95% of the answerable questions' top-1 hits: a RAG system that answers above that
  threshold answers them from a chunk that does not hold the answer.

A question the run returned nothing for has no top-1 score: it scores below every score (it abstained).

An unanswerable question for which the judged view found a relevant chunk (the LLM judge, or a
reviewer, graded a pooled chunk as answering it: judged_n_relevant > 0) is not unanswerable after
all: it is counted (n_unanswerable_contradicted), named in a warning, and left out of the figures.
Without the judge only the golden-set build's check stands (metrics/goldenset.json names it).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from retrieval_bench.core.errors import some_of

KEEP_HITS = 0.95  # the share of answerable top-1 hits the false-hit threshold keeps
UNANSWERABLE = "unanswerable"
JUDGED_RELEVANT = "judged_n_relevant"  # the judged view's relevant chunks of a question (grades, reviews, copies)
EXAMPLES = 5  # question ids a warning names


def top_scores(run: pd.DataFrame, qids: list[str]) -> np.ndarray:
    """Each question's top-1 score in the run (NaN where the run returned nothing for it)."""
    best = run.groupby("qid", sort=False)["score"].max()
    return best.reindex(pd.Index(qids, dtype=object)).to_numpy(dtype=np.float64)


def _lowest_when_missing(scores: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(scores), -np.inf, scores)


def top_score_quantiles(scores: np.ndarray, quantiles: list[float]) -> list[float | None]:
    """Quantiles of top-1 scores, a question the run returned nothing for below every score (as
    in the AUC and the threshold), None where a quantile falls on one; [] without questions."""
    if not len(scores):
        return []
    with np.errstate(invalid="ignore"):  # interpolating next to -inf gives NaN: a quantile on one
        values = np.quantile(_lowest_when_missing(scores), quantiles)
    return [float(value) if np.isfinite(value) else None for value in values]


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, equal values sharing their average rank (scipy.stats.rankdata's default):
    written here so that the score stage does not import scipy (about 0.4 CPU-s a system)."""
    order = np.argsort(values, kind="stable")
    _, first, counts = np.unique(values[order], return_index=True, return_counts=True)
    ranks = np.empty(len(values))
    ranks[order] = np.repeat(first + (counts + 1) / 2, counts)
    return ranks


def abstention_auc(answerable: np.ndarray, unanswerable: np.ndarray) -> float:
    """P(answerable top-1 score > unanswerable one) + P(equal) / 2 over all pairs, from the rank
    sum (Mann-Whitney U); NaN when either side is empty."""
    answerable, unanswerable = _lowest_when_missing(answerable), _lowest_when_missing(unanswerable)
    if not len(answerable) or not len(unanswerable):
        return math.nan
    ranks = average_ranks(np.concatenate([answerable, unanswerable]))
    n = len(answerable)
    return float((ranks[:n].sum() - n * (n + 1) / 2) / (n * len(unanswerable)))


def hit_threshold(scores: np.ndarray, hits: np.ndarray, keep: float = KEEP_HITS) -> float:
    """The highest top-1 score t such that the answerable questions whose top-1 chunk is relevant
    (weighted by hit@1: a share under score.ties expected) scoring >= t hold at least `keep` of
    them all; NaN when no answerable question has a top-1 hit."""
    scores, hits = _lowest_when_missing(scores), np.asarray(hits, dtype=np.float64)
    total = float(hits.sum())
    if total <= 0:
        return math.nan
    order = np.argsort(-scores, kind="stable")
    distinct, first_of = np.unique(-scores[order], return_index=True)  # descending scores, where each starts
    reached = np.cumsum(hits[order])[np.append(first_of[1:], len(order)) - 1]  # weight at or above each score
    return float(-distinct[np.flatnonzero(reached >= keep * total - 1e-12)[0]])


def false_hit_rate(unanswerable: np.ndarray, threshold: float) -> float:
    """The share of unanswerable questions whose top-1 score is at least `threshold`."""
    if not len(unanswerable) or math.isnan(threshold):
        return math.nan
    return float(np.mean(_lowest_when_missing(unanswerable) >= threshold))


def abstention_warning(per_question: pd.DataFrame) -> str | None:
    """Why a table with unanswerable questions gets no abstention figures, when it is score.k
    lacking 1 (the threshold keeps 95% of the top-1 hits, hit@1); else None."""
    has_unanswerable = "kind" in per_question and bool((per_question["kind"] == UNANSWERABLE).any())
    if has_unanswerable and "hit@1" not in per_question:
        return "no abstention figures for the unanswerable questions: they need hit@1, add 1 to score.k"
    return None


def contradicted(per_question: pd.DataFrame) -> np.ndarray:
    """The unanswerable questions the judged view found a relevant chunk for (booleans, row order)."""
    unanswerable = (per_question["kind"] == UNANSWERABLE).to_numpy()
    if JUDGED_RELEVANT not in per_question:
        return np.zeros(len(per_question), dtype=bool)
    return unanswerable & (per_question[JUDGED_RELEVANT].to_numpy() > 0)


def contradiction_warning(per_question: pd.DataFrame) -> str | None:
    """A warning naming the unanswerable questions a judged chunk answers, or None."""
    if "kind" not in per_question:
        return None
    qids = per_question.loc[contradicted(per_question), "qid"].astype(str).tolist()
    if not qids:
        return None
    return (
        f"{len(qids)} unanswerable question(s) have a pooled chunk graded as answering them ({some_of(qids, EXAMPLES)}): "
        "left out of the abstention figures; fix or drop them in the golden set"
    )


def abstention_summary(per_question: pd.DataFrame) -> dict[str, float | int]:
    """metrics.json's abstention figures from a per-question table with kind, top_score and hit@1
    (nothing without unanswerable and answerable questions): n_unanswerable, abstention_auc,
    abstention_threshold, false_hit_rate, the answerable and unanswerable top-1 scores' medians;
    with n_unanswerable_contradicted, the unanswerable questions a judged chunk answers, which are
    left out of the figures."""
    if "kind" not in per_question or "top_score" not in per_question or "hit@1" not in per_question:
        return {}
    answered = contradicted(per_question)
    unanswerable = (per_question["kind"] == UNANSWERABLE).to_numpy() & ~answered
    answerable = (per_question["kind"] != UNANSWERABLE).to_numpy() & (per_question["n_relevant"].to_numpy() > 0)
    if not unanswerable.any() or not answerable.any():
        return {"n_unanswerable_contradicted": int(answered.sum())} if answered.any() else {}
    scores = per_question["top_score"].to_numpy(dtype=np.float64)
    threshold = hit_threshold(scores[answerable], per_question["hit@1"].to_numpy(dtype=np.float64)[answerable])
    summary: dict[str, float | int | None] = {
        "n_unanswerable": int(unanswerable.sum()),
        **({"n_unanswerable_contradicted": int(answered.sum())} if answered.any() else {}),
        "abstention_auc": abstention_auc(scores[answerable], scores[unanswerable]),
        "false_hit_rate": false_hit_rate(scores[unanswerable], threshold),
        "abstention_threshold": threshold,
        "top_score_median_answerable": top_score_quantiles(scores[answerable], [0.5])[0],
        "top_score_median_unanswerable": top_score_quantiles(scores[unanswerable], [0.5])[0],
    }
    # a declared DVC metric holds numbers only: a figure that could not be computed (or a median on
    # a question the run returned nothing for) is left out
    return {
        name: value
        for name, value in summary.items()
        if value is not None and not (isinstance(value, float) and math.isnan(value))
    }
