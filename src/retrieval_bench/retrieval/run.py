"""What a method gets (Questions, Corpus) and the exact top-k it ranks with: scores computed block
by block, whole tie groups at the cut, turned into a run (the contract: retrieval_bench.run_contract)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from retrieval_bench.run_contract import ranked

QUESTION_BLOCK = 256  # questions scored at once
CHUNK_BLOCK = 65_536  # chunks scored at once: memory is bounded by QUESTION_BLOCK x CHUNK_BLOCK floats


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
        for c0 in range(0, n_chunks, CHUNK_BLOCK):
            columns = slice(c0, min(c0 + CHUNK_BLOCK, n_chunks))
            block = np.asarray(score_block(rows, columns), dtype=np.float32)
            if best_i.shape[1] == depth:
                # Only chunks above a question's depth-th best so far can enter its top (a later
                # chunk with an equal score loses on the index): a comparison, not a partition.
                best_i, best_s = _merge_above(best_i, best_s, block, c0, depth, best_s.min(axis=1, keepdims=True), strict=True)
                continue
            keep = min(depth, block.shape[1])
            if keep < block.shape[1]:
                # The keep-th best score of each row (a partition of values, twice as fast as of
                # indices); every chunk at or above it is a candidate.
                kth = np.partition(block, block.shape[1] - keep, axis=1)[:, block.shape[1] - keep, None]
                best_i, best_s = _merge_above(best_i, best_s, block, c0, depth, kth, strict=False)
                continue
            part = np.tile(np.arange(block.shape[1]), (block.shape[0], 1))
            best_i = np.concatenate([best_i, part + c0], axis=1)
            best_s = np.concatenate([best_s, np.take_along_axis(block, part, axis=1)], axis=1)
            if best_i.shape[1] > depth:
                # Keep the depth best so far; lexsort breaks equal scores by chunk index.
                order = np.lexsort((best_i, -best_s), axis=1)[:, :depth]
                best_i, best_s = np.take_along_axis(best_i, order, 1), np.take_along_axis(best_s, order, 1)
        order = np.lexsort((best_i, -best_s), axis=1)
        indices[rows], scores[rows] = np.take_along_axis(best_i, order, 1), np.take_along_axis(best_s, order, 1)
        if progress is not None:
            progress.update(rows.stop - q0)
    return indices, scores


def _merge_above(
    best_i: np.ndarray, best_s: np.ndarray, block: np.ndarray, c0: int, depth: int, threshold: np.ndarray, strict: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Merge into each row's best so far the chunks of `block` scoring above (or, not `strict`, at)
    that row's `threshold`, keeping the `depth` best, sorted best first (equal scores by index)."""
    above = block > threshold if strict else block >= threshold
    hit_rows, hit_cols = np.divmod(np.flatnonzero(above), block.shape[1])  # 10x faster than a 2-d nonzero
    if len(hit_rows) == 0:
        return best_i, best_s
    counts = np.bincount(hit_rows, minlength=block.shape[0])
    slot = np.arange(len(hit_rows)) - (np.cumsum(counts) - counts)[hit_rows]
    new_i = np.full((block.shape[0], counts.max()), np.iinfo(np.int64).max, dtype=np.int64)  # padding sorts last
    new_s = np.full(new_i.shape, -np.inf, dtype=np.float32)
    new_i[hit_rows, slot], new_s[hit_rows, slot] = hit_cols + c0, block[hit_rows, hit_cols]
    best_i, best_s = np.concatenate([best_i, new_i], axis=1), np.concatenate([best_s, new_s], axis=1)
    order = np.lexsort((best_i, -best_s), axis=1)[:, :depth]
    return np.take_along_axis(best_i, order, 1), np.take_along_axis(best_s, order, 1)


def whole_ties(indices: np.ndarray, scores: np.ndarray, retrieved: np.ndarray, depth: int,
               row_scores: Callable[[int], np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
        members = np.flatnonzero(row >= np.partition(row, len(row) - depth)[len(row) - depth])
        order = np.lexsort((members, -row[members]))
        groups[question] = (members[order], row[members[order]])
    width = max([depth] + [len(members) for members, _ in groups.values()])
    out_i = np.zeros((len(indices), width), dtype=np.int64)
    out_s = np.zeros((len(indices), width), dtype=scores.dtype)
    out_r = np.zeros((len(indices), width), dtype=bool)
    out_i[:, :depth], out_s[:, :depth], out_r[:, :depth] = indices[:, :depth], scores[:, :depth], retrieved[:, :depth]
    for question, (members, values) in groups.items():
        out_i[question, :len(members)], out_s[question, :len(members)], out_r[question, :len(members)] = members, values, True
    return out_i, out_s, out_r


def from_top(qids: list[str], chunk_ids: list[str], indices: np.ndarray, scores: np.ndarray, keep=None) -> pd.DataFrame:
    """A run from per-question chunk indices and scores (rows in any order: they are ranked here); `keep`, a boolean
    mask of the same shape, drops entries (e.g. BM25 chunks sharing no word with the question)."""
    keep = np.ones(indices.shape, dtype=bool) if keep is None else keep
    ids = np.asarray(chunk_ids, dtype=object)
    per_question = keep.sum(axis=1)
    run = pd.DataFrame({
        "qid": np.repeat(np.asarray(qids, dtype=object), per_question),
        "chunk_id": ids[indices[keep]],
        "score": scores[keep].astype(np.float64),
    })
    return ranked(run)


















