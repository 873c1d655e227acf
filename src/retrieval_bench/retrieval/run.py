"""What a method gets (Questions, Corpus), and its top chunks made a run: whole tie groups at the
cut, then the contract's order (retrieval_bench.core.run_table)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from retrieval_bench.core.run_table import ranked


@dataclass(frozen=True)
class Questions:
    """What a method gets to ask: ids, texts and, for dense methods, unit vectors (row order)."""

    qids: list[str]
    texts: list[str]
    vectors: np.ndarray | None = None

    @property
    def dense_vectors(self) -> np.ndarray:
        """The unit vectors a dense method asks with (embedded for every dense method)."""
        assert self.vectors is not None, "a dense method's questions have their vectors"
        return self.vectors


class Corpus:
    """What a method searches: chunk ids, texts and, for dense methods, unit vectors (row order).
    `texts` is the list, or a function that reads it: then it is read the first time a method asks
    for it (bm25, hybrid, rerank), and a search that never does (dense, ann, store, an external
    run) never holds the texts (at 400k chunks of 800 characters, over 600 MB in Python)."""

    __slots__ = ("chunk_ids", "vectors", "_texts")
    chunk_ids: list[str]
    vectors: np.ndarray | None
    _texts: list[str] | Callable[[], list[str]]

    def __init__(
        self, chunk_ids: list[str], texts: list[str] | Callable[[], list[str]], vectors: np.ndarray | None = None
    ):
        object.__setattr__(self, "chunk_ids", chunk_ids)
        object.__setattr__(self, "_texts", texts)
        object.__setattr__(self, "vectors", vectors)

    def __setattr__(self, name, value):  # read-only, as the frozen dataclass it was
        raise AttributeError(f"Corpus is read-only: cannot set {name}")

    @property
    def texts(self) -> list[str]:
        texts = self._texts
        if callable(texts):
            texts = texts()
            object.__setattr__(self, "_texts", texts)
        return texts

    @property
    def dense_vectors(self) -> np.ndarray:
        """The unit vectors a dense method searches (its corpus is always built with them)."""
        assert self.vectors is not None, "a dense method's corpus has its vectors"
        return self.vectors

    @property
    def texts_read(self) -> bool:
        """Whether the texts are in memory (given, or read since by a method that asked for them)."""
        return not callable(self._texts)

    def __reduce__(self):  # pickled with its texts (read now if they were not): a reader is no data
        return Corpus, (self.chunk_ids, self.texts, self.vectors)

    def __repr__(self) -> str:
        texts = f"{len(self.texts)} texts" if self.texts_read else "texts not read"
        vectors = "no vectors" if self.vectors is None else f"vectors {self.vectors.shape}"
        return f"Corpus({len(self.chunk_ids)} chunks, {texts}, {vectors})"


def resolve_depth(depth: int | str, n_chunks: int) -> int:
    """retrieval.depth: a positive number of chunks per question, or `all`."""
    return n_chunks if depth == "all" else min(int(depth), n_chunks)


MIN_TIE_ROOM = 1_000  # rows a run may hold beyond its depth for a tie group at the cut, at least


def tie_room(depth: int) -> int:
    """How many rows beyond `depth` a question's run keeps of a tie group straddling the cut: a
    group of 20,000 equal BM25 scores on each of 5,000 questions made a run of 100 million rows."""
    return max(depth, MIN_TIE_ROOM)


def whole_ties(
    indices: np.ndarray, scores: np.ndarray, retrieved: np.ndarray, depth: int, row_scores: Callable[[int], np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """From each question's best `depth + 1` chunks (best first; `retrieved` a prefix of each row),
    its best `depth` and, where the next one scores the same as the depth-th, every chunk of that
    tie group, taken from the question's whole row of scores `row_scores(q)` (only such questions
    are scored again), up to tie_room(depth) rows beyond the depth (a larger group is cut there in
    chunk order, with one warning on stderr). Rows come back best first, equal scores by chunk
    index, padded at the end (retrieved False)."""
    if indices.shape[1] <= depth:  # the whole corpus is in: no cut
        return indices, scores, retrieved
    straddling = np.flatnonzero(retrieved[:, depth] & (scores[:, depth] == scores[:, depth - 1]))
    groups, most = {}, depth + tie_room(depth)
    cut: list[int] = []  # the sizes of the tie groups cut
    for question in straddling.tolist():
        row = np.asarray(row_scores(question), dtype=scores.dtype)
        # The row's depth-th best is at least its lowest score of the depth chunks in hand, so it
        # is found among the chunks at or above that: a partition of a few, not of the corpus.
        candidates = np.flatnonzero(row >= row[indices[question, :depth]].min())
        kth_best = np.partition(row[candidates], len(candidates) - depth)[len(candidates) - depth]
        members = candidates[row[candidates] >= kth_best]
        order = np.lexsort((members, -row[members]))
        if len(members) > most:
            cut.append(int(np.sum(row[members] == kth_best)))
            order = order[:most]
        groups[question] = (members[order], row[members[order]])
    if cut:
        print(
            f"warning: {len(cut)} of {len(indices)} questions tie at the cut of their {depth} best with groups of up "
            f"to {max(cut)} chunks scoring alike (common words in short chunks?): {tie_room(depth)} rows beyond it "
            "are kept, the group cut in chunk order, so score.ties expected counts only the kept part of it",
            file=sys.stderr,
        )
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
    question, column = np.nonzero(keep)  # row by row, as run_table.ranked would keep them
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
