"""recall_budget@B: recall at an equal context budget (score.budgets, in score.budget_unit).

The LLM is handed the retrieved chunks in rank order while they fit: a chunk is within budget B
when the total length of every chunk ranked at or above it is <= B (whole chunks; the first chunk
that does not fit ends the context). recall_budget@B is the recall of recall@k over those chunks:
the share of relevant chunks within budget (chunk labels), or the share of the evidence the chunks
within budget cover (evidence spans). So a 400- and an 800-character chunking are compared at the
same amount of text, which recall@k (k 400-character chunks are half the text) does not do.

Ties follow score.ties as recall@k does: pessimistic/optimistic place the judged chunks at their
ranks of retrieval_bench.evaluation.score.metrics.concrete_ranks (the other chunks of the tie fill the
rest of it); expected is the exact expectation over all orders of each tie group (first_fits).
A chunk the run does not hold is not retrieved (retrieval.depth; trec_eval's convention).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from math import comb
from typing import Any

import numpy as np
import pandas as pd

from retrieval_bench.core import paths
from retrieval_bench.core.files import read_table
from retrieval_bench.core.relevance import Judgement, union_coverage
from retrieval_bench.core.run_table import Positions
from retrieval_bench.evaluation.score.metrics import concrete_ranks
from retrieval_bench.evaluation.score.settings import Scoring

UNITS = ("chars", "words")


def budget_columns(budgets: list[int]) -> list[str]:
    """The per-question columns (and metrics.json keys) of the budgets, in order."""
    return [f"recall_budget@{budget}" for budget in sorted(budgets)]


def chunk_columns(score: dict) -> list[str]:
    """The chunk-table columns scoring reads under the score params: the text only where budgets
    count words (it is the largest column)."""
    words = bool(score["budgets"]) and score["budget_unit"] == "words"
    return ["chunk_id", "doc_id", "start", "end"] + (["text"] if words else [])


def chunk_tables(chunking: str, columns: tuple[str, ...]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A chunking's chunk table (`columns` of it: chunk_columns) and its duplicates, as score reads
    them (the stage keeps the last chunking's for the systems on it)."""
    return read_table(paths.chunks_of(chunking), list(columns)), read_table(paths.duplicates_of(chunking))


def panel_chunk_ids(panel: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """The chunk ids of every chunking the panel's systems are on."""
    chunkings = {system["chunking"] for system in panel.values()}
    return {str(c) for chunking in chunkings for c in read_table(paths.chunks_of(chunking), ["chunk_id"])["chunk_id"]}


def chunk_lengths(chunks: pd.DataFrame, unit: str) -> np.ndarray:
    """Each chunk's length in `unit`: characters (end - start, which is len(text) in the chunk
    table) or whitespace-separated words of its text."""
    if unit == "words":
        return np.array([len(text.split()) for text in chunks["text"]], dtype=np.int64)
    return (chunks["end"] - chunks["start"]).to_numpy(dtype=np.int64)


def budget_table(
    judgements: list[Judgement],
    placed: list[Positions],
    run: pd.DataFrame,
    qids: list[str],
    chunks: pd.DataFrame,
    scoring: Scoring,
) -> pd.DataFrame:
    """recall_budget@B per question (rows in `qids` order) for each B of scoring.budgets (in
    scoring.budget_unit, ties by scoring.ties), from the run and the chunk table."""
    lengths = chunk_lengths(chunks, scoring.budget_unit)
    row_of = pd.Series(np.arange(len(chunks)), index=chunks["chunk_id"].to_numpy())
    by_qid = {qid: group for qid, group in run.groupby("qid", sort=False)}
    columns = budget_columns(list(scoring.budgets))
    rows = []
    for qid, judgement, where in zip(qids, judgements, placed, strict=True):
        group = by_qid.get(qid)
        if group is None:
            group = run.iloc[:0]
        order = np.argsort(-group["score"].to_numpy(), kind="stable")
        in_run = row_of[group["chunk_id"].to_numpy()].to_numpy()[order]
        recall = budget_recall(judgement, where, in_run, group["score"].to_numpy()[order], lengths, scoring)
        rows.append(dict(zip(columns, recall, strict=True)))
    return pd.DataFrame(rows, columns=columns)


def budget_recall(
    judgement: Judgement,
    where: Positions,
    in_run: np.ndarray,
    scores: np.ndarray,
    lengths: np.ndarray,
    scoring: Scoring,
) -> list[float]:
    """recall_budget@B of one question for each B of scoring.budgets (NaN for an unanswerable one),
    ties by scoring.ties. in_run, scores: the chunk-table rows of the run's chunks and their scores,
    best first; lengths: every chunk's length."""
    budgets, ties = scoring.budgets, scoring.ties
    if not judgement.answerable:
        return [math.nan] * len(budgets)
    slot = {row: i for i, row in enumerate(in_run.tolist())}
    at = np.array([slot.get(row, -1) for row in judgement.indices.tolist()], dtype=np.int64)  # -1: not retrieved
    relevant = judgement.gains > 0
    # Chunk labels count the relevant chunks retrieved (a chunk under the coverage bar may be in the
    # run alone); span coverage counts every chunk it overlaps.
    if not (at >= 0).any() or (judgement.span is None and not (relevant & (at >= 0)).any()):
        return [0.0] * len(budgets)
    rooms = np.asarray(budgets, dtype=np.int64)
    run_lengths = lengths[in_run]
    if ties != "expected":
        fits = _concrete_fits(judgement, where, at, run_lengths, rooms, ties)
        if judgement.span is None:
            return [float(fits[relevant, b].mean()) for b in range(len(budgets))]
        span, starts, ends = judgement.evidence()
        return [
            float(judgement.recall_of(union_coverage(starts[fits[:, b]], ends[fits[:, b]], *span)))
            for b in range(len(budgets))
        ]
    group = np.unique(-scores, return_inverse=True)[1].ravel()  # tie group of each run row, 0 = best
    totals = np.bincount(group, weights=run_lengths).astype(np.int64)
    before = np.concatenate([[0], np.cumsum(totals)[:-1]])  # the length of all better tie groups

    def fit(marked: np.ndarray) -> np.ndarray:  # P(the first of the judged `marked` is within budget), per budget
        g = group[at[marked][0]]
        others = group == g
        others[at[marked]] = False
        return first_fits(run_lengths[others], run_lengths[at[marked]], rooms - before[g])

    if judgement.span is None:
        inside = [fit(np.array([i])) for i in np.flatnonzero(relevant & (at >= 0))]
        return [float(value) for value in np.sum(inside, axis=0) / relevant.sum()]
    return [float(value) for value in _expected_coverage(judgement, at, group, fit, len(budgets))]


def _concrete_fits(
    judgement: Judgement, where: Positions, at: np.ndarray, run_lengths: np.ndarray, rooms: np.ndarray, ties: str
) -> np.ndarray:
    """(judged chunk, budget) -> within budget, the judged chunks at their concrete_ranks and the
    other chunks of each tie group in the slots left (their order there changes no judged chunk's
    context: pessimistic puts them all before the judged ones, optimistic all after)."""
    ranks = concrete_ranks(where, judgement.gains, ties, judgement.covered())
    retrieved = at >= 0
    order = np.full(len(run_lengths), -1)
    order[ranks[retrieved].astype(np.int64) - 1] = at[retrieved]
    order[order < 0] = np.setdiff1d(np.arange(len(run_lengths)), at[retrieved])
    reach = np.empty(len(run_lengths))
    reach[order] = np.cumsum(run_lengths[order])  # the context's length up to and with each chunk
    return retrieved[:, None] & (reach[np.maximum(at, 0)][:, None] <= rooms[None, :])


def _expected_coverage(judgement: Judgement, at: np.ndarray, group: np.ndarray, fit, n_budgets: int) -> np.ndarray:
    """E[share of the evidence covered]: each stretch between chunk boundaries is covered when the
    first-ranked chunk over it is within budget (the context is a prefix of the ranking): that is
    the first of those in the best tie group holding any."""
    (span_start, span_end), chunk_starts, chunk_ends = judgement.evidence()
    starts = np.clip(chunk_starts, span_start, span_end)
    ends = np.clip(chunk_ends, span_start, span_end)
    cuts = np.unique(np.concatenate([starts, ends, [span_start, span_end]]))
    covered, cache = np.zeros(n_budgets), {}
    for low, high in zip(cuts[:-1], cuts[1:], strict=True):
        over = np.flatnonzero((starts <= low) & (ends >= high) & (at >= 0))
        if len(over):
            best = over[group[at[over]] == group[at[over]].min()]
            key = tuple(best.tolist())
            if key not in cache:
                cache[key] = fit(best)
            covered += (high - low) * cache[key]
    return judgement.recall_of(covered / max(span_end - span_start, 1))


def first_fits(others: np.ndarray, marked: np.ndarray, rooms: np.ndarray) -> np.ndarray:
    """P(the first of the `marked` chunks is within each room), exactly, when they and the `others`
    of their tie group stand in uniformly random order: the first marked chunk is any of them with
    equal chance, and the others before it are a uniformly random j-subset of the others, j = J
    with P(J = j) = a C(n, j) / ((n + a) C(n + a - 1, j)) (n others, a marked). A DP over
    (j, total length) of those subsets gives their length's distribution; lengths above the
    largest room are cut off, so it is (subset size x room) in size, not 2^n."""
    others = np.sort(others[others > 0])  # a zero-length chunk changes no total; the rest stay uniformly ordered
    n, a, total = len(others), len(marked), int(others.sum())
    caps = np.asarray(rooms, dtype=np.int64)[:, None] - np.asarray(marked, dtype=np.int64)[None, :]  # (room, marked)
    result = (caps >= total).sum(axis=1) / a  # fits whatever stands before it
    uncertain = (caps >= 0) & (caps < total)
    if not uncertain.any():
        return result
    top = int(caps[uncertain].max())
    most = int(np.searchsorted(np.cumsum(others), top, side="right"))  # a larger subset never fits
    share = np.zeros((most + 1, top + 1))  # share[j, t]: P(a random j-subset of the others so far totals t)
    share[0, 0] = 1.0
    seen = 0
    for length, count in zip(*np.unique(others, return_counts=True), strict=True):
        share = _add_equal(share, seen, int(length), int(count))
        seen += int(count)
    p_j = np.array([a * comb(n, j) / ((n + a) * comb(n + a - 1, j)) for j in range(most + 1)])
    fits_within = p_j @ np.cumsum(share, axis=1)  # [t]: P(the others before the first marked total <= t)
    return result + np.where(uncertain, fits_within[np.clip(caps, 0, top)], 0.0).sum(axis=1) / a


def _add_equal(share: np.ndarray, n: int, length: int, count: int) -> np.ndarray:
    """share after `count` more chunks of `length` (>= 1) join the n before: a random j-subset of the
    n + count takes i of the new ones with the hypergeometric chance C(count, i) C(n, j - i) / C(n + count, j)."""
    top = share.shape[1] - 1
    new = np.zeros_like(share)
    for j in range(min(share.shape[0], n + count + 1)):  # no subset is larger than the chunks seen
        for i in range(min(j, count, top // length) + 1):
            weight = comb(count, i) * comb(n, j - i) / comb(n + count, j)
            if weight:
                new[j, i * length :] += weight * share[j - i, : top + 1 - i * length]
    return new
