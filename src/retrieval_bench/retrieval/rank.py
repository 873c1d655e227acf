"""Rank every chunk for every question (exact search) and read off the ranks of judged chunks."""
from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
from retrieval_bench.evaluation.metrics import Positions

QUERY_BATCH = 256  # questions scored at once: bounds memory at QUERY_BATCH x n_chunks floats


def dense_scores(question_vectors: np.ndarray, chunk_vectors: np.ndarray) -> Callable[[slice], np.ndarray]:
    """Cosine similarity (the vectors are unit length) of a batch of questions to every chunk."""
    return lambda rows: question_vectors[rows] @ chunk_vectors.T


def tied_ranks(scores: np.ndarray) -> np.ndarray:
    """1-based rank of every chunk per row, best first; chunks with equal scores share the
    worst rank of their group (the pessimistic policy), so no chunk gains from its position."""
    ascending = np.sort(scores, axis=1)
    # rank = the number of chunks scoring at least as high = n - (chunks scoring strictly lower).
    lower = np.stack([np.searchsorted(row, values, side="left") for row, values in zip(ascending, scores)])
    return (scores.shape[1] - lower).astype(np.int64)


def rrf_scores(
    methods: list[tuple[Callable[[slice], np.ndarray], float]], rrf_k: float
) -> Callable[[slice], np.ndarray]:
    """Reciprocal rank fusion: sum over methods of weight / (rrf_k + rank under that method)."""
    def fused(rows: slice) -> np.ndarray:
        return sum(weight / (rrf_k + tied_ranks(score(rows))) for score, weight in methods)
    return fused


def judged_positions(scores: np.ndarray, judged: np.ndarray) -> Positions:
    """Where chunks `judged` stand in one question's `scores`: how many other chunks score higher,
    and how many score the same (the chunk itself included)."""
    if len(judged) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Positions(empty.astype(np.float64), empty)
    judged_scores = scores[judged][:, None]
    better = (scores[None, :] > judged_scores).sum(axis=1)
    tied = (scores[None, :] == judged_scores).sum(axis=1)
    return Positions(better.astype(np.float64), tied.astype(np.int64))


def pessimistic_ranks(scores: np.ndarray, judged: np.ndarray) -> np.ndarray:
    """Rank of chunks `judged` when each stands after every chunk tied with it: 1 + the number of
    other chunks scoring at least as high (used where one rank per chunk is needed on its own)."""
    positions = judged_positions(scores, judged)
    return (positions.better + positions.tied).astype(np.int64)


def judged_ranks(
    score_batch: Callable[[slice], np.ndarray], n_questions: int, judged: list[np.ndarray], progress=None
) -> Iterator[Positions]:
    """For each question in order, the positions of its judged chunk indices."""
    for batch_start in range(0, n_questions, QUERY_BATCH):
        rows = slice(batch_start, min(batch_start + QUERY_BATCH, n_questions))
        scores = score_batch(rows)
        for offset, question in enumerate(range(rows.start, rows.stop)):
            yield judged_positions(scores[offset], judged[question])
        if progress is not None:
            progress.update(rows.stop - rows.start)


def method_scores(
    retrieval: dict,
    question_vectors: np.ndarray | None,
    chunk_vectors: np.ndarray | None,
    chunk_texts: list[str],
    questions: list[str],
) -> Callable[[slice], np.ndarray]:
    """The scores of `retrieval["method"]` (dense, bm25 or hybrid; the validated retrieval section
    of params.yaml) for a batch of question rows."""
    from retrieval_bench.retrieval.bm25 import bm25_scores

    method = retrieval["method"]
    if method == "dense":
        return dense_scores(question_vectors, chunk_vectors)
    if method == "bm25":
        return bm25_scores(chunk_texts, questions, **retrieval["bm25"])
    if method == "hybrid":
        weights = retrieval["weights"]
        return rrf_scores(
            [(dense_scores(question_vectors, chunk_vectors), weights["dense"]),
             (bm25_scores(chunk_texts, questions, **retrieval["bm25"]), weights["bm25"])],
            retrieval["rrf_k"],
        )
    raise ValueError(f"unknown retrieval method {method!r}")
