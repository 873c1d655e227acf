"""Exact dense retrieval: cosine similarity of unit vectors, blocked matrix products and
argpartition, so memory stays bounded at a million chunks."""

from __future__ import annotations

import numpy as np
import pandas as pd

from retrieval_bench.retrieval.run import Corpus, Questions, from_top, top_k_blocked, whole_ties


def top(questions: Questions, corpus: Corpus, depth: int, progress=None) -> tuple[np.ndarray, np.ndarray]:
    """The `depth` best chunk indices and cosine scores per question, best first."""
    q, c = questions.vectors, corpus.vectors
    return top_k_blocked(
        lambda rows, cols: q[rows] @ c[cols].T, len(questions.qids), len(corpus.chunk_ids), depth, progress
    )


def top_with_ties(
    questions: Questions, corpus: Corpus, depth: int, progress=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each question's `depth` best chunks and the whole tie group at the cut: (indices, scores,
    kept), as whole_ties gives them, so which tied chunks make the cut never depends on their order."""
    q, c = questions.vectors, corpus.vectors
    indices, scores = top(questions, corpus, min(depth + 1, len(corpus.chunk_ids)), progress)
    return whole_ties(
        indices, scores, np.ones(indices.shape, dtype=bool), depth, lambda row: (q[row : row + 1] @ c.T)[0]
    )


def retrieve(questions: Questions, corpus: Corpus, settings: dict, depth: int, progress=None) -> pd.DataFrame:
    """The run: each question's `depth` best chunks and the whole tie group at the cut."""
    indices, scores, kept = top_with_ties(questions, corpus, depth, progress)
    return from_top(questions.qids, corpus.chunk_ids, indices, scores, keep=kept)
