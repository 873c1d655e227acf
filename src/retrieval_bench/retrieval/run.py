"""What a method gets (Questions, Corpus) and the exact top-k it ranks with: scores computed block
by block, whole tie groups at the cut, turned into a run (the contract: retrieval_bench.run_contract)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from retrieval_bench.run_contract import ranked

QUESTION_BLOCK = 1024  # questions scored at once
CHUNK_BLOCK = 16_384  # chunks scored at once: memory is bounded by QUESTION_BLOCK x CHUNK_BLOCK floats (64 MiB)


@dataclass(frozen=True)
class Questions:
    """What a method gets to ask: ids, texts and, for dense methods, unit vectors (row order)."""

    qids: list[str]
    texts: list[str]
    vectors: np.ndarray | None = None


@dataclass(frozen=True)
class Corpus:
    """What a method searches: chunk ids, texts and, for dense methods, unit vectors (row order)."""

    chunk_ids: list[str]
    texts: list[str]
    vectors: np.ndarray | None = None


def resolve_depth(depth: int | str, n_chunks: int) -> int:
    """retrieval.depth: a positive number of chunks per question, or `all`."""
    return n_chunks if depth == "all" else min(int(depth), n_chunks)


def top_k_blocked(
    score_block: Callable[[slice, slice], np.ndarray], n_questions: int, n_chunks: int, depth: int, progress=None
) -> tuple[np.ndarray, np.ndarray]:
    """The `depth` best chunk indices and scores per question (best first; equal scores by chunk
    index), from scores computed block by block so memory stays bounded at any corpus size."""
    indices = np.empty((n_questions, depth), dtype=np.int64)
    scores = np.empty((n_questions, depth), dtype=np.float32)
    for q0 in range(0, n_questions, QUESTION_BLOCK):
        rows = slice(q0, min(q0 + QUESTION_BLOCK, n_questions))
        best_i = np.empty((rows.stop - q0, 0), dtype=np.int64)
        best_s = np.empty((rows.stop - q0, 0), dtype=np.float32)
        threshold = None  # per row, its depth-th best at the last sort
        for c0 in range(0, n_chunks, CHUNK_BLOCK):
            columns = slice(c0, min(c0 + CHUNK_BLOCK, n_chunks))
            block = np.asarray(score_block(rows, columns), dtype=np.float32)
            if threshold is not None:
                # Only chunks above a question's depth-th best so far can enter its top (a later
                # chunk with an equal score loses on the index): a comparison, not a partition.
                # They are sorted in only once they are as many as the best: a sort per block
                # would cost a third of the products.
                best_i, best_s = _append(best_i, best_s, *_above(block, c0, threshold, strict=True))
            elif min(depth, block.shape[1]) < block.shape[1]:
                best_i, best_s = _append(best_i, best_s, *_above(block, c0, _floor_of_best(block, depth), strict=False))
            else:
                best_i = np.concatenate([best_i, np.tile(np.arange(c0, columns.stop), (block.shape[0], 1))], axis=1)
                best_s = np.concatenate([best_s, block], axis=1)
            if best_i.shape[1] >= (2 * depth if threshold is not None else depth):
                best_i, best_s = _best(best_i, best_s, depth)
                threshold = best_s[:, -1:]
        indices[rows], scores[rows] = _best(best_i, best_s, depth)
        if progress is not None:
            progress.update(rows.stop - q0)
    return indices, scores


def _floor_of_best(block: np.ndarray, keep: int) -> np.ndarray:
    """Per row, a score that at least `keep` of its entries reach, so its `keep` best are all at or
    above it: the keep-th best of the maxima of 4 x keep disjoint groups of columns (each maximum
    is another entry). Two passes over the block, where a partition copies it first and costs
    over half its product; the margin leaves ~15% more candidates than `keep` to merge."""
    groups = min(4 * keep, block.shape[1])
    width = block.shape[1] // groups * groups
    maxima = block[:, :width].reshape(block.shape[0], groups, -1).max(axis=2)
    return np.partition(maxima, groups - keep, axis=1)[:, groups - keep, None]


def _above(block: np.ndarray, c0: int, threshold: np.ndarray, strict: bool) -> tuple[np.ndarray, np.ndarray]:
    """The chunks of `block` scoring above (or, not `strict`, at) each row's `threshold`: their
    indices and scores, row by row, padded to the longest row with entries that sort last."""
    above = block > threshold if strict else block >= threshold
    hit_rows, hit_cols = np.divmod(np.flatnonzero(above), block.shape[1])  # 10x faster than a 2-d nonzero
    counts = np.bincount(hit_rows, minlength=block.shape[0])
    slot = np.arange(len(hit_rows)) - (np.cumsum(counts) - counts)[hit_rows]
    new_i = np.full(
        (block.shape[0], counts.max(initial=0)), np.iinfo(np.int64).max, dtype=np.int64
    )  # padding sorts last
    new_s = np.full(new_i.shape, -np.inf, dtype=np.float32)
    new_i[hit_rows, slot], new_s[hit_rows, slot] = hit_cols + c0, block[hit_rows, hit_cols]
    return new_i, new_s


def _append(
    best_i: np.ndarray, best_s: np.ndarray, new_i: np.ndarray, new_s: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    if new_i.shape[1] == 0:
        return best_i, best_s
    return np.concatenate([best_i, new_i], axis=1), np.concatenate([best_s, new_s], axis=1)


def _best(best_i: np.ndarray, best_s: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's `depth` best, best first; lexsort breaks equal scores by chunk index."""
    order = np.lexsort((best_i, -best_s), axis=1)[:, :depth]
    return np.take_along_axis(best_i, order, 1), np.take_along_axis(best_s, order, 1)


def whole_ties(
    indices: np.ndarray, scores: np.ndarray, retrieved: np.ndarray, depth: int, row_scores: Callable[[int], np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """From each question's best `depth + 1` chunks (best first; `retrieved` a prefix of each row),
    its best `depth` and, where the next one scores the same as the depth-th, every chunk of that
    tie group, taken from the question's whole row of scores `row_scores(q)` (only such questions
    are scored again). Rows come back best first, equal scores by chunk index, padded at the end
    (retrieved False)."""
    if indices.shape[1] <= depth:  # the whole corpus is in: no cut
        return indices, scores, retrieved
    straddling = np.flatnonzero(retrieved[:, depth] & (scores[:, depth] == scores[:, depth - 1]))
    groups = {}
    for question in straddling.tolist():
        row = np.asarray(row_scores(question), dtype=scores.dtype)
        # The row's depth-th best is at least its lowest score of the depth chunks in hand, so it
        # is found among the chunks at or above that: a partition of a few, not of the corpus.
        candidates = np.flatnonzero(row >= row[indices[question, :depth]].min())
        kth_best = np.partition(row[candidates], len(candidates) - depth)[len(candidates) - depth]
        members = candidates[row[candidates] >= kth_best]
        order = np.lexsort((members, -row[members]))
        groups[question] = (members[order], row[members[order]])
    width = max([depth] + [len(members) for members, _ in groups.values()])
    out_i = np.zeros((len(indices), width), dtype=np.int64)
    out_s = np.zeros((len(indices), width), dtype=scores.dtype)
    out_r = np.zeros((len(indices), width), dtype=bool)
    out_i[:, :depth], out_s[:, :depth], out_r[:, :depth] = indices[:, :depth], scores[:, :depth], retrieved[:, :depth]
    for question, (members, values) in groups.items():
        out_i[question, : len(members)], out_s[question, : len(members)], out_r[question, : len(members)] = (
            members,
            values,
            True,
        )
    return out_i, out_s, out_r


def from_top(qids: list[str], chunk_ids: list[str], indices: np.ndarray, scores: np.ndarray, keep=None) -> pd.DataFrame:
    """A run from per-question chunk indices and scores (rows in any order: they are ranked here); `keep`, a boolean
    mask of the same shape, drops entries (e.g. BM25 chunks sharing no word with the question)."""
    keep = np.ones(indices.shape, dtype=bool) if keep is None else keep
    ids = np.asarray(chunk_ids, dtype=object)
    question, column = np.nonzero(keep)  # row by row, as run_contract.ranked would keep them
    chunk, score = indices[question, column], scores[question, column].astype(np.float64)
    if len(set(qids)) < len(qids) or np.isnan(score).any():  # what only ranked's pandas sort defines
        return ranked(
            pd.DataFrame({"qid": np.asarray(qids, dtype=object)[question], "chunk_id": ids[chunk], "score": score})
        )
    # ranked's order (question, score descending, chunk id) by integer keys: 10x faster than sorting the strings in pandas.
    used, position = np.unique(chunk, return_inverse=True)
    id_order = np.empty(len(used), dtype=np.int64)
    id_order[np.argsort(ids[used], kind="stable")] = np.arange(len(used))
    order = np.lexsort((id_order[position.ravel()], -score, question))
    question = question[order]
    first = np.searchsorted(question, question)  # each row's question's first row (question is sorted)
    return pd.DataFrame(
        {
            "qid": np.asarray(qids, dtype=object)[question],
            "chunk_id": ids[chunk[order]],
            "rank": np.arange(len(order), dtype=np.int64) - first + 1,
            "score": score[order],
        }
    )
